package mailroom_test

import (
	"strings"
	"testing"

	"github.com/mailroom/mailroom"
)

func TestQueryLimits(t *testing.T) {
	words := func(n int) string { return strings.TrimSpace(strings.Repeat("wal ", n)) }
	tests := []struct {
		name    string
		limits  mailroom.Limits
		query   string
		wantErr string
	}{
		{"500 characters is fine", mailroom.Limits{}, strings.Repeat("é", 500), ""},
		{"501 characters", mailroom.Limits{}, strings.Repeat("é", 501), "query is 501 characters; the limit is 500"},
		{"16 terms is fine", mailroom.Limits{}, words(16), ""},
		{"17 terms", mailroom.Limits{}, words(17), "query has 17 terms; the limit is 16"},
		{"prefix terms count", mailroom.Limits{}, strings.TrimSpace(strings.Repeat("a* ", 17)), "query has 17 terms; the limit is 16"},
		{"punctuation is not a term", mailroom.Limits{}, words(16) + strings.Repeat(" - ", 30), ""},
		{"control characters separate terms", mailroom.Limits{}, strings.Repeat("a\x00", 17), "query has 17 terms; the limit is 16"},
		{"an operator may allow more terms", mailroom.Limits{MaxQueryTerms: 40}, words(40), ""},
		{"and more characters", mailroom.Limits{MaxQueryChars: 2000}, strings.Repeat("x", 2000), ""},
		{"but the raised limit holds", mailroom.Limits{MaxQueryChars: 2000}, strings.Repeat("x", 2001), "query is 2001 characters; the limit is 2000"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := mailroom.ListInput{Query: tt.query}.FilterWith(tt.limits)
			if (err == nil) != (tt.wantErr == "") || (err != nil && err.Error() != tt.wantErr) {
				t.Fatalf("err = %v, want %q", err, tt.wantErr)
			}
			if err != nil && mailroom.ErrorCode(err) != mailroom.EINVALID {
				t.Errorf("code = %s", mailroom.ErrorCode(err))
			}
		})
	}
}

func TestConceptFilterLimit(t *testing.T) {
	tags := func(n int) []string {
		out := make([]string, n)
		for i := range out {
			out[i] = "topic " + strings.Repeat("x", i%7) + string(rune('a'+i%26))
		}
		return out
	}
	if _, err := (mailroom.ListInput{TaggedConcepts: tags(50)}).Filter(); err != nil {
		t.Errorf("50 tags: %v", err)
	}
	_, err := mailroom.ListInput{TaggedConcepts: tags(51)}.Filter()
	if want := "taggedConcepts accepts at most 50 entries (got 51)"; err == nil || err.Error() != want {
		t.Errorf("51 tags: %v, want %q", err, want)
	}
}

func TestSubjectControlCharacters(t *testing.T) {
	tests := []struct {
		subject string
		wantErr string
	}{
		{"tab\tis fine", ""},
		{"émoji 🚀 and ümlauts", ""},
		{"NUL\x00here", "subject must not contain control characters (found U+0000 at character 4)"},
		{"line\nbreak", "subject must not contain control characters (found U+000A at character 5)"},
		{"carriage\rreturn", "subject must not contain control characters (found U+000D at character 9)"},
		{"\x1b[2Jcleared", "subject must not contain control characters (found U+001B at character 1)"},
		{"del\x7f", "subject must not contain control characters (found U+007F at character 4)"},
		{"c1 csi \u009b2J", "subject must not contain control characters (found U+009B at character 8)"},
		{"bell\a", "subject must not contain control characters (found U+0007 at character 5)"},
	}
	for _, tt := range tests {
		_, err := mailroom.SendInput{To: []string{"@bob"}, Subject: tt.subject, Body: "bodies\nmay\x1bhave anything"}.Draft(0)
		if (err == nil) != (tt.wantErr == "") || (err != nil && err.Error() != tt.wantErr) {
			t.Errorf("subject %q: err = %v, want %q", tt.subject, err, tt.wantErr)
		}
	}
}
