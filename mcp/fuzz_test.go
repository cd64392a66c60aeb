package mcp

import (
	"encoding/json"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/mailroom/mailroom"
)

// FuzzParseArgs feeds untrusted argument objects to the argument checker:
// it must never panic, and what it accepts must be a JSON object of declared
// keys whose strings decode to valid UTF-8 without replacement.
func FuzzParseArgs(f *testing.F) {
	for _, s := range []string{
		`{"to":"@bob","subject":"s","body":"b"}`,
		`{"from":"@x"}`, `{"AGENT_ID":1}`, `{"bogus":true}`, `null`, `[]`, `"x"`, ``,
		`{"body":"\ud800"}`, `{"body":"\ud83d\ude00"}`, `{"body":"\udc00\ud800"}`, `{"body":"\\ud800"}`,
		`{"body":"a\u0000b"}`, "{\"body\":\"\xff\"}", `{"to":["@a","@b"]}`, `{"subject":"\u00e9"}`,
		`{"to":"@bob","subject":"a\u0000b","body":"b"}`, `{"to":"@bob","subject":"\u001b[2J","body":"b"}`,
		`{"to":"@bob","subject":"x\u009b2J","body":"b"}`, `{"to":"@bob","subject":"line\nbreak","body":"b"}`,
		`{"to":"@bob","subject":"tab\tok","body":"b"}`, `{"to":"@bob","subject":"del\u007f","body":"b"}`,
	} {
		f.Add([]byte(s))
	}
	declared := []string{"to", "subject", "body"}
	f.Fuzz(func(t *testing.T, raw []byte) {
		a, err := parseArgs(raw, declared, true)
		if err != nil {
			return
		}
		for k, v := range a {
			if k != "to" && k != "subject" && k != "body" {
				t.Fatalf("accepted undeclared key %q", k)
			}
			var x any
			if err := json.Unmarshal(v, &x); err != nil {
				t.Fatalf("accepted invalid JSON for %q: %v", k, err)
			}
			if s, ok := x.(string); ok && strings.ContainsRune(s, utf8.RuneError) && !strings.Contains(string(v), "\uFFFD") && !strings.Contains(strings.ToLower(string(v)), `\ufffd`) {
				t.Fatalf("%q decoded with a replacement character from %q", k, v)
			}
		}
		// What passes the checker and the domain's rules has a subject of
		// at most 200 characters and no control characters but tab.
		var in struct {
			To      any    `json:"to"`
			Subject string `json:"subject"`
			Body    string `json:"body"`
		}
		if json.Unmarshal(raw, &in) != nil {
			return
		}
		to, _ := in.To.(string)
		if _, err := (mailroom.SendInput{To: []string{to}, Subject: in.Subject, Body: in.Body}).Draft(0); err == nil {
			if utf8.RuneCountInString(in.Subject) > mailroom.MaxSubjectLen {
				t.Fatalf("accepted a %d-character subject", utf8.RuneCountInString(in.Subject))
			}
			for _, r := range in.Subject {
				if (r < 0x20 && r != '\t') || (r >= 0x7f && r <= 0x9f) {
					t.Fatalf("accepted control character U+%04X in subject %q", r, in.Subject)
				}
			}
		}
	})
}

func TestCheckJSONText(t *testing.T) {
	t.Parallel()
	tests := map[string]bool{
		`"plain"`:               true,
		`"\ud83d\ude00"`:        true,
		`"\\ud800"`:             true, // an escaped backslash, then text
		`"\ud800"`:              false,
		`"\udc00"`:              false,
		`"\ud800\u0041"`:        false,
		`"\ud800x"`:             false,
		"\"\xff\"":              false,
		`["ok", "\ud800"]`:      false,
		`{"k": "\uDBFF\uDFFF"}`: true,
	}
	for in, ok := range tests {
		if err := checkJSONText([]byte(in)); (err == nil) != ok {
			t.Errorf("checkJSONText(%s) = %v, want ok=%v", in, err, ok)
		}
	}
}
