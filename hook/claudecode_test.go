package hook_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/mailroom/mailroom"
	"github.com/mailroom/mailroom/hook"
	"github.com/mailroom/mailroom/sqlite"
)

func TestParseInput(t *testing.T) {
	for _, tc := range []struct{ in, err string }{
		{`{"hook_event_name":"Stop","session_id":"s","stop_hook_active":true}`, ""},
		{`{"hook_event_name":"Stop"}`, "hook input has no session_id"},
		{`not json`, "hook input is not JSON"},
	} {
		in, err := hook.ParseInput(strings.NewReader(tc.in))
		if tc.err == "" && (err != nil || !in.StopHookActive || in.SessionID != "s") {
			t.Errorf("%s: %+v, %v", tc.in, in, err)
		}
		if tc.err != "" && (err == nil || !strings.HasPrefix(err.Error(), tc.err)) {
			t.Errorf("%s: err %v, want %q", tc.in, err, tc.err)
		}
	}
}

func TestClaudeCodeAnswers(t *testing.T) {
	ctx := context.Background()
	s, err := sqlite.Open(ctx, sqlite.Memory, sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	alice, _ := s.EnsureAgent(ctx, "alice")
	bob, _ := s.EnsureAgent(ctx, "bob")
	for i := range 7 {
		d, _ := mailroom.SendInput{To: []string{"@bob"}, Subject: "note " + string(rune('a'+i)), Body: "b", Priority: "high"}.Draft(0)
		d.OriginSessionID = "SESSION:t"
		if _, err := s.Send(mailroom.WithCaller(ctx, alice), d); err != nil {
			t.Fatal(err)
		}
	}
	asBob := mailroom.WithCaller(ctx, bob)
	for _, tc := range []struct {
		name string
		in   hook.Input
		want string // a key of the JSON printed, "" for nothing
	}{
		{"an event it does not handle", hook.Input{HookEventName: "PreToolUse", SessionID: "a"}, ""},
		{"Stop already continuing", hook.Input{HookEventName: "Stop", SessionID: "a", StopHookActive: true}, ""},
		{"Stop", hook.Input{HookEventName: "Stop", SessionID: "a"}, "decision"},
		{"Stop again", hook.Input{HookEventName: "Stop", SessionID: "a"}, ""},
		{"another session", hook.Input{HookEventName: "SessionStart", SessionID: "b"}, "hookSpecificOutput"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, err := hook.ClaudeCode(asBob, s, tc.in)
			if err != nil {
				t.Fatal(err)
			}
			if tc.want == "" {
				if out != nil {
					t.Fatalf("printed %s", out)
				}
				return
			}
			var m map[string]any
			if err := json.Unmarshal(out, &m); err != nil || m[tc.want] == nil {
				t.Fatalf("printed %s, want a %q object", out, tc.want)
			}
		})
	}
	text := hook.Reminder(7, nil)
	if !strings.HasPrefix(text, "mailroom: you have 7 unread messages.") {
		t.Fatalf("reminder = %q", text)
	}
	p, _ := s.List(asBob, mailroom.ListFilter{Box: mailroom.BoxInbox, Limit: 50})
	text = hook.Reminder(7, p.Messages)
	if n := strings.Count(text, "\n- MESSAGE:"); n != 5 || !strings.Contains(text, `(high): "note g"`) || strings.Contains(text, `"note a"`) {
		t.Fatalf("the reminder names the 5 newest: %s", text)
	}
}
