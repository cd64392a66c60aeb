package main

import (
	"errors"
	"os/exec"
	"regexp"
	"strings"
	"testing"
)

// exitCode is the binary's exit status from runCLI's error.
func exitCode(err error) int {
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return ee.ExitCode()
	}
	if err != nil {
		return -1
	}
	return 0
}

// wantFailure requires exit status 1 and exactly one line on stderr that
// contains want.
func wantFailure(t *testing.T, stdout, stderr string, err error, want string) {
	t.Helper()
	if code := exitCode(err); code != 1 {
		t.Fatalf("exit status %d, want 1\nstdout: %s\nstderr: %s", code, stdout, stderr)
	}
	if lines := strings.Split(strings.TrimRight(stderr, "\n"), "\n"); len(lines) != 1 {
		t.Errorf("stderr has %d lines, want one:\n%s", len(lines), stderr)
	}
	if !strings.HasPrefix(stderr, "mailroom: ") || !strings.Contains(stderr, want) {
		t.Errorf("stderr %q does not say %q", stderr, want)
	}
}

func TestVersionAndHelp(t *testing.T) {
	t.Parallel()
	env := environ(t)
	out := mustRunCLI(t, env, "--version")
	if !regexp.MustCompile(`^mailroom \d+\.\d+\.\d+\n$`).MatchString(out) {
		t.Errorf("--version printed %q", out)
	}
	// Every command, found by walking the help pages themselves (so a
	// command added later is covered too), explains itself both ways, on
	// stdout, with status 0.
	var walk func(cmd []string)
	seen := 0
	walk = func(cmd []string) {
		name := strings.Join(cmd, " ")
		viaFlag := mustRunCLI(t, env, append(cmd, "--help")...)
		if len(cmd) > 0 {
			seen++
			viaHelp := mustRunCLI(t, env, append([]string{"help"}, cmd...)...)
			if viaFlag != viaHelp {
				t.Errorf("%s --help and help %s differ:\n%s\n---\n%s", name, name, viaFlag, viaHelp)
			}
			if !strings.Contains(viaFlag, "Usage:\n  mailroom "+name) {
				t.Errorf("help for %s lacks its usage line:\n%s", name, viaFlag)
			}
		}
		_, list, ok := strings.Cut(viaFlag, "Available Commands:\n")
		if !ok {
			return
		}
		list, _, _ = strings.Cut(list, "\n\n")
		for _, line := range strings.Split(list, "\n") {
			if f := strings.Fields(line); len(f) > 0 && f[0] != "help" {
				walk(append(append([]string(nil), cmd...), f[0]))
			}
		}
	}
	walk(nil)
	if seen < 20 {
		t.Errorf("walked only %d commands", seen)
	}
	top := mustRunCLI(t, env, "--help")
	for _, c := range []string{"serve", "token", "identity", "role", "completion", "help"} {
		if !regexp.MustCompile(`(?m)^  ` + c + `\s`).MatchString(top) {
			t.Errorf("mailroom --help does not list %s:\n%s", c, top)
		}
	}
	if out := mustRunCLI(t, env, "completion", "bash"); !strings.Contains(out, "bash completion") {
		t.Errorf("completion bash printed no script: %.200s", out)
	}
}

func TestCommandLineErrors(t *testing.T) {
	t.Parallel()
	env := environ(t)
	db := testDB(t)
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{}, "no command given"},
		{[]string{"frobnicate"}, `unknown command "frobnicate"`},
		{[]string{"identity"}, "mailroom identity needs a command: add, list"},
		{[]string{"identity", "frob"}, `unknown command "frob" for "mailroom identity"`},
		{[]string{"identity", "add"}, "mailroom identity add needs NAME"},
		{[]string{"identity", "add", "a", "b"}, `mailroom identity add: unexpected "b"`},
		{[]string{"role", "grant", "alice"}, "mailroom role grant needs ROLE"},
		{[]string{"role", "revoke"}, "mailroom role revoke needs NAME ROLE"},
		{[]string{"serve", "--bogus"}, "unknown flag: --bogus"},
		{[]string{"serve", "--max-body"}, "flag needs an argument: --max-body"},
		{[]string{"serve", "--concepts", "gpt"}, `--concepts must be embedded, ollama or off (got "gpt")`},
		{[]string{"token", "create", "--agent", "a", "--human", "b"}, "exactly one of --agent NAME or --human LOGIN"},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			out, stderr, err := runCLI(t, env, append([]string{"--db", db}, tc.args...)...)
			wantFailure(t, out, stderr, err, tc.want)
		})
	}
}

func TestIdentityAndRoleListings(t *testing.T) {
	t.Parallel()
	env := environ(t, "MAILROOM_DB="+testDB(t))
	mustRunCLI(t, env, "identity", "add", "bob")
	mustRunCLI(t, env, "identity", "add", "dana", "--human")
	mustRunCLI(t, env, "token", "create", "--agent", "alice")
	mustRunCLI(t, env, "role", "grant", "@bob", "reviewer")
	mustRunCLI(t, env, "role", "grant", "human:dana", "role:reviewer")
	mustRunCLI(t, env, "role", "grant", "bob", "ops")

	ids := mustRunCLI(t, env, "identity", "list")
	want := regexp.MustCompile(`^IDENTITY\s+KIND\s+CREATED\s+ROLES\n` +
		`@alice\s+agent\s+\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\s+-\n` +
		`@bob\s+agent\s+\S+ \S+\s+ops,reviewer\n` +
		`human:dana\s+human\s+\S+ \S+\s+reviewer\n$`)
	if !want.MatchString(ids) {
		t.Errorf("identity list:\n%s", ids)
	}
	roles := mustRunCLI(t, env, "role", "list")
	if !regexp.MustCompile(`^ROLE\s+HOLDERS\nrole:ops\s+@bob\nrole:reviewer\s+@bob,human:dana\n$`).MatchString(roles) {
		t.Errorf("role list:\n%s", roles)
	}

	if out := mustRunCLI(t, env, "role", "revoke", "bob", "reviewer"); out != "revoked role:reviewer from bob\n" {
		t.Errorf("role revoke printed %q", out)
	}
	if roles := mustRunCLI(t, env, "role", "list"); !strings.Contains(roles, "role:reviewer  human:dana\n") {
		t.Errorf("after the revoke, role list:\n%s", roles)
	}
	out, stderr, err := runCLI(t, env, "role", "revoke", "bob", "reviewer")
	wantFailure(t, out, stderr, err, "@bob does not hold role:reviewer")
	out, stderr, err = runCLI(t, env, "role", "revoke", "nobody", "reviewer")
	wantFailure(t, out, stderr, err, "Unknown identity: nobody")
}
