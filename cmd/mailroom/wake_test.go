package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"io"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// hookRun runs `mailroom hook claude-code` as Claude Code does: the event's
// JSON on stdin, stdout and the exit status read back.
func hookRun(t *testing.T, env []string, db, agent string, event map[string]any) (stdout, stderr string) {
	t.Helper()
	in, _ := json.Marshal(event)
	cmd := exec.Command(bin, "hook", "claude-code", "--db", db, "--agent", agent)
	cmd.Env = env
	cmd.Stdin = bytes.NewReader(in)
	var o, e bytes.Buffer
	cmd.Stdout, cmd.Stderr = &o, &e
	if err := cmd.Run(); err != nil {
		t.Fatalf("hook %v: %v (the exit status must always be 0)\nstderr: %s", event, err, e.String())
	}
	return o.String(), e.String()
}

func keys(m map[string]any) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

func TestHookClaudeCode(t *testing.T) {
	t.Parallel()
	env := environ(t)
	db := filepath.Join(t.TempDir(), "m.db")
	mustRunCLI(t, env, "identity", "add", "--db", db, "bob")
	alice := stdio(t, env, "alice", "--db", db, "--agent", "alice")
	first := alice.send("@bob", "deploy is blocked")
	second := alice.send("@bob", `the "fix" is in`)
	event := func(name, session string, extra ...any) map[string]any {
		ev := map[string]any{"hook_event_name": name, "session_id": session, "transcript_path": "/tmp/t.jsonl", "cwd": "/tmp"}
		for i := 0; i < len(extra); i += 2 {
			ev[extra[i].(string)] = extra[i+1]
		}
		return ev
	}
	contextOf := func(t *testing.T, out, eventName string) string {
		t.Helper()
		var got map[string]any
		if err := json.Unmarshal([]byte(out), &got); err != nil {
			t.Fatalf("stdout is not one JSON object: %q", out)
		}
		hso, _ := got["hookSpecificOutput"].(map[string]any)
		if !slices.Equal(keys(got), []string{"hookSpecificOutput"}) || !slices.Equal(keys(hso), []string{"additionalContext", "hookEventName"}) || hso["hookEventName"] != eventName {
			t.Fatalf("output shape = %s", out)
		}
		return hso["additionalContext"].(string)
	}

	for _, ev := range []string{"SessionStart", "UserPromptSubmit"} {
		t.Run(ev, func(t *testing.T) {
			session := "S-" + ev
			out, errOut := hookRun(t, env, db, "bob", event(ev, session))
			text := contextOf(t, out, ev)
			for _, want := range []string{"2 unread messages", first.MessageID, second.MessageID, "@alice", "(normal)", `"deploy is blocked"`, `"the \"fix\" is in"`, "get_message"} {
				if !strings.Contains(text, want) {
					t.Errorf("additionalContext lacks %q:\n%s", want, text)
				}
			}
			if errOut != "" {
				t.Errorf("stderr = %q", errOut)
			}
			if out, _ := hookRun(t, env, db, "bob", event(ev, session)); out != "" {
				t.Fatalf("the same mail a second time in the session printed %q", out)
			}
		})
	}
	t.Run("new mail is told once more", func(t *testing.T) {
		third := alice.send("@bob", "one more")
		out, _ := hookRun(t, env, db, "bob", event("UserPromptSubmit", "S-UserPromptSubmit"))
		if text := contextOf(t, out, "UserPromptSubmit"); !strings.Contains(text, "3 unread messages") || !strings.Contains(text, third.MessageID) {
			t.Fatalf("after new mail: %s", text)
		}
	})
	t.Run("Stop", func(t *testing.T) {
		if out, _ := hookRun(t, env, db, "bob", event("Stop", "S-stop", "stop_hook_active", true)); out != "" {
			t.Fatalf("Stop with stop_hook_active printed %q", out)
		}
		out, _ := hookRun(t, env, db, "bob", event("Stop", "S-stop", "stop_hook_active", false))
		var got map[string]any
		if err := json.Unmarshal([]byte(out), &got); err != nil || !slices.Equal(keys(got), []string{"decision", "reason"}) || got["decision"] != "block" {
			t.Fatalf("Stop output = %q", out)
		}
		if reason := got["reason"].(string); !strings.Contains(reason, "3 unread messages") || !strings.Contains(reason, "get_message") {
			t.Fatalf("reason = %s", reason)
		}
		if out, _ := hookRun(t, env, db, "bob", event("Stop", "S-stop")); out != "" {
			t.Fatalf("a second Stop for the same mail printed %q", out)
		}
	})
	t.Run("nothing unread prints nothing", func(t *testing.T) {
		if out, errOut := hookRun(t, env, db, "carol", event("SessionStart", "S-carol")); out != "" || errOut != "" {
			t.Fatalf("empty inbox: stdout %q stderr %q", out, errOut)
		}
	})
	t.Run("errors", func(t *testing.T) {
		for name, c := range map[string]struct {
			db, stdin string
		}{
			"unreachable database": {db: "/dev/null/mailroom.db", stdin: `{"hook_event_name":"SessionStart","session_id":"x"}`},
			"not JSON":             {db: db, stdin: `hello`},
			"no session id":        {db: db, stdin: `{"hook_event_name":"Stop"}`},
		} {
			t.Run(name, func(t *testing.T) {
				cmd := exec.Command(bin, "hook", "claude-code", "--db", c.db, "--agent", "bob")
				cmd.Env = env
				cmd.Stdin = strings.NewReader(c.stdin)
				var o, e bytes.Buffer
				cmd.Stdout, cmd.Stderr = &o, &e
				if err := cmd.Run(); err != nil {
					t.Fatalf("exit: %v, want 0", err)
				}
				if o.Len() != 0 || strings.Count(e.String(), "\n") != 1 || !strings.HasPrefix(e.String(), "mailroom hook claude-code: ") {
					t.Fatalf("stdout %q, stderr %q: want nothing and one line", o.String(), e.String())
				}
			})
		}
	})
}

func TestWatchOnceExitsAfterMailFromAnotherProcess(t *testing.T) {
	t.Parallel()
	env := environ(t)
	db := filepath.Join(t.TempDir(), "m.db")
	mustRunCLI(t, env, "identity", "add", "--db", db, "bob")
	alice := stdio(t, env, "alice", "--db", db, "--agent", "alice")
	alice.send("@bob", "old mail is not news")
	cmd := exec.Command(bin, "watch", "--db", db, "--agent", "bob", "--once", "--json")
	cmd.Env = env
	var out bytes.Buffer
	cmd.Stdout = &out
	stderr, _ := cmd.StderrPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	// watch says on stderr when it listens; mail sent after that is new.
	sc := bufio.NewScanner(stderr)
	for sc.Scan() && !strings.Contains(sc.Text(), "watching the inbox of @bob") {
	}
	go io.Copy(io.Discard, stderr)
	sent := alice.send("@bob", "wake up")
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("watch --once: %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("watch --once did not exit after a message arrived")
	}
	var line map[string]any
	if err := json.Unmarshal(out.Bytes(), &line); err != nil || strings.Count(out.String(), "\n") != 1 {
		t.Fatalf("stdout = %q, want one JSON line", out.String())
	}
	if line["id"] != sent.MessageID || line["from"] != "@alice" || line["priority"] != "normal" || line["subject"] != "wake up" {
		t.Fatalf("line = %v", line)
	}
}
