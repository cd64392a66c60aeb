package mcp_test

import (
	"encoding/json"
	"errors"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/mailroom/mailroom/sqlite"
)

func TestMarkReadOne(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	alice, bob := e.as("alice"), e.as("bob")
	id := alice.sendTo("@bob", "one")
	other := alice.sendTo("@bob", "other")

	first := bob.markRead(id)
	time.Sleep(2 * time.Millisecond)
	second := bob.markRead(id)
	if !second.ReadAt.Equal(first.ReadAt) || second.Status != "read" {
		t.Errorf("marking again moved readAt: %v -> %v", first.ReadAt, second.ReadAt)
	}
	if got := bob.unread(); !slices.Equal(got, []string{other}) {
		t.Errorf("unread = %v, want only %s", got, other)
	}

	t.Run("all: false counts as absent", func(t *testing.T) {
		bob := bob.on(t)
		var r readReceipt
		bob.ok("mark_read", map[string]any{"messageId": other, "all": false}, &r)
		if r.MessageID != other || r.Status != "read" {
			t.Errorf("receipt %+v", r)
		}
	})
}

func TestMarkReadMany(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	alice, bob := e.as("alice"), e.as("bob")
	a := alice.sendTo("@bob", "a")
	b := alice.sendTo("@bob", "b")
	c := alice.sendTo("@bob", "c")

	t.Run("one bad id never fails the others", func(t *testing.T) {
		bob := bob.on(t)
		var r manyReceipt
		bob.ok("mark_read", map[string]any{"messageId": []string{a, "MESSAGE:bogus", b}}, &r)
		if len(r.Results) != 3 || !r.Durable {
			t.Fatalf("results = %+v", r)
		}
		want := []markResult{{MessageID: a, Status: "read"}, {MessageID: "MESSAGE:bogus", Status: "error", Error: "Message not found: MESSAGE:bogus"}, {MessageID: b, Status: "read"}}
		for i, w := range want {
			g := r.Results[i]
			if g.MessageID != w.MessageID || g.Status != w.Status || g.Error != w.Error || (w.Status == "read") != (g.ReadAt != nil) {
				t.Errorf("results[%d] = %+v, want %+v", i, g, w)
			}
		}
		if got := bob.unread(); !slices.Equal(got, []string{c}) {
			t.Errorf("unread = %v, want only c", got)
		}
	})
	t.Run("every id bad is still not isError", func(t *testing.T) {
		bob := bob.on(t)
		var r manyReceipt
		bob.ok("mark_read", map[string]any{"messageId": []string{"MESSAGE:x", "nope", ""}}, &r)
		if len(r.Results) != 3 {
			t.Fatalf("results = %+v", r.Results)
		}
		for i, want := range []string{"Message not found: MESSAGE:x", "Message not found: nope", ""} {
			if r.Results[i].Status != "error" || (want != "" && r.Results[i].Error != want) || r.Results[i].Error == "" {
				t.Errorf("results[%d] = %+v", i, r.Results[i])
			}
		}
	})
	t.Run("the sender's own message in an array is an error entry", func(t *testing.T) {
		alice := alice.on(t)
		var r manyReceipt
		alice.ok("mark_read", map[string]any{"messageId": []string{c}}, &r)
		if len(r.Results) != 1 || r.Results[0].Error != "Not a recipient: "+c {
			t.Errorf("results = %+v", r.Results)
		}
	})
	t.Run("an array keeps first readAt", func(t *testing.T) {
		bob := bob.on(t)
		var r manyReceipt
		first := bob.get(a).ReadAt
		bob.ok("mark_read", map[string]any{"messageId": []string{a, a}}, &r)
		for _, res := range r.Results {
			if res.ReadAt == nil || !res.ReadAt.Equal(*first) {
				t.Errorf("readAt %v, want the first %v", res.ReadAt, first)
			}
		}
	})
}

func TestMarkReadStringifiedArrays(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	alice, bob := e.as("alice"), e.as("bob")
	a := alice.sendTo("@bob", "a")
	b := alice.sendTo("@bob", "b")

	t.Run("a stringified array of MESSAGE: ids takes the array path", func(t *testing.T) {
		bob := bob.on(t)
		s, _ := json.Marshal([]string{a, b})
		var r manyReceipt
		bob.ok("mark_read", map[string]any{"messageId": string(s)}, &r)
		if len(r.Results) != 2 || r.Results[0].MessageID != a || r.Results[1].MessageID != b || r.Results[0].Status != "read" || r.Results[1].Status != "read" {
			t.Errorf("results = %+v", r.Results)
		}
		if got := bob.unread(); len(got) != 0 {
			t.Errorf("unread = %v", got)
		}
	})
	t.Run("the discriminator answers about MESSAGE:bogus", func(t *testing.T) {
		bob := bob.on(t)
		var r manyReceipt
		bob.ok("mark_read", json.RawMessage(`{"messageId":"[\"MESSAGE:bogus\"]"}`), &r)
		if len(r.Results) != 1 || r.Results[0].MessageID != "MESSAGE:bogus" || r.Results[0].Status != "error" || r.Results[0].Error != "Message not found: MESSAGE:bogus" {
			t.Errorf("results = %+v", r.Results)
		}
	})
	t.Run("a stringified array with surrounding whitespace is still an array", func(t *testing.T) {
		bob := bob.on(t)
		var r manyReceipt
		bob.ok("mark_read", map[string]any{"messageId": ` ["MESSAGE:bogus", "MESSAGE:bogus2"] `}, &r)
		if len(r.Results) != 2 || r.Results[1].Error != "Message not found: MESSAGE:bogus2" {
			t.Errorf("results = %+v", r.Results)
		}
	})
	for _, s := range []string{`[]`, `[1]`, `{}`, `{"messageId":"MESSAGE:x"}`, `["x"]`, `["MESSAGE:a"`, `["MESSAGE:a", 1]`, `["MESSAGE:a", "x"]`, `[["MESSAGE:a"]]`, `[null]`, `MESSAGE:x`, `null`} {
		t.Run("the string "+s+" is a scalar id", func(t *testing.T) {
			bob := bob.on(t)
			bob.failWith("mark_read", map[string]any{"messageId": s}, "Message not found: "+s)
		})
	}
}

func TestMarkReadArgumentErrors(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	alice, bob := e.as("alice"), e.as("bob")
	id := alice.sendTo("@bob", "x")
	cases := []struct {
		name string
		args any
		want string
	}{
		{"a native empty array", map[string]any{"messageId": []string{}}, "messageId must not be an empty array"},
		{"an empty string", map[string]any{"messageId": ""}, "messageId must not be empty"},
		{"messageId and all", map[string]any{"messageId": id, "all": true}, "mark_read takes either messageId or all: true, not both"},
		{"an array and all", map[string]any{"messageId": []string{id}, "all": true}, "mark_read takes either messageId or all: true, not both"},
		{"neither", map[string]any{}, "mark_read needs messageId (an id or a list of ids) or all: true"},
		{"all: false alone is neither", map[string]any{"all": false}, "mark_read needs messageId (an id or a list of ids) or all: true"},
		{"through without all", map[string]any{"messageId": id, "through": id}, "through applies only with all: true"},
		{"through with all: false", map[string]any{"all": false, "through": id}, ""},
		{"through alone", map[string]any{"through": id}, ""},
		{"a number", map[string]any{"messageId": 7}, "messageId must be a string or an array of strings"},
		{"an object", map[string]any{"messageId": map[string]any{"id": id}}, "messageId must be a string or an array of strings"},
		{"an array with a number", map[string]any{"messageId": []any{id, 1}}, "messageId must be a string or an array of strings"},
		{"all as a string", map[string]any{"all": "true"}, "all must be true or false (got string)"},
		{"an unknown argument", map[string]any{"all": true, "bogus": 1}, "Unknown argument 'bogus'"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			bob := bob.on(t)
			if tc.want == "" {
				bob.fail("mark_read", tc.args)
			} else {
				bob.failWith("mark_read", tc.args, tc.want)
			}
		})
	}
	if got := bob.unread(); !slices.Equal(got, []string{id}) {
		t.Errorf("malformed calls changed read state: unread %v", got)
	}
}

// drainFixture is bob's mailbox with every kind of mail a drain must tell
// apart.
type drainFixture struct {
	e                       *env
	alice, bob, carol       *client
	direct                  []string
	broadcast, role         string
	archived, alreadyRead   string
	personalTotal, roleOnly int
}

func newDrainFixture(t *testing.T, e *env) *drainFixture {
	f := &drainFixture{e: e, alice: e.as("alice"), bob: e.as("bob"), carol: e.as("carol")}
	e.grant("bob", "reviewer")
	for _, s := range []string{"d1", "d2", "d3"} {
		f.direct = append(f.direct, f.alice.sendTo("@bob", s))
	}
	f.broadcast = f.alice.sendTo("*", "everyone")
	f.role = f.alice.sendTo("role:reviewer", "for the reviewer")
	f.archived = f.alice.sendTo("@bob", "archived unread")
	f.bob.ok("archive_message", map[string]any{"messageId": f.archived}, nil)
	f.alreadyRead = f.alice.sendTo("@bob", "read already")
	f.bob.markRead(f.alreadyRead)
	return f
}

func checkCounts(t *testing.T, r drainReceipt) {
	t.Helper()
	if r.ReadCount+r.FailureCount != r.MatchedCount || r.FailureCount != len(r.Failures) || r.Failures == nil {
		t.Errorf("receipt counts do not add up: %+v", r)
	}
	if r.SnapshotAt.IsZero() {
		t.Errorf("snapshotAt is zero")
	}
}

func TestMarkAllRead(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	f := newDrainFixture(t, e)
	bob, carol := f.bob, f.carol

	r := bob.drain(nil)
	checkCounts(t, r)
	if r.Status != "read" || r.MatchedCount != 4 || r.ReadCount != 4 || r.DurableCount != 4 || r.FailureCount != 0 || r.WithheldRoleCount != 1 || !r.Durable {
		t.Errorf("first drain: %+v", r)
	}
	if got := bob.unread(); !slices.Equal(got, []string{f.role}) {
		t.Errorf("after the drain unread = %v, want only the role message", got)
	}
	all := bob.list(map[string]any{"includeArchived": true, "limit": 200})
	if row, _ := all.find(f.archived); row.ReadAt != nil {
		t.Errorf("the drain read an archived message")
	}
	for _, id := range append(f.direct, f.broadcast) {
		if row, _ := all.find(id); row.ReadAt == nil {
			t.Errorf("%s still unread after the drain", id)
		}
	}
	if row, _ := carol.inbox().find(f.broadcast); row.ReadAt != nil {
		t.Errorf("bob's drain read carol's copy of the broadcast")
	}

	again := bob.drain(nil)
	checkCounts(t, again)
	if again.Status != "noop" || again.MatchedCount != 0 || again.ReadCount != 0 || again.WithheldRoleCount != 1 {
		t.Errorf("second drain: %+v", again)
	}

	roles := bob.drain(map[string]any{"includeRoles": true})
	checkCounts(t, roles)
	if roles.Status != "read" || roles.MatchedCount != 1 || roles.ReadCount != 1 || roles.WithheldRoleCount != 0 {
		t.Errorf("includeRoles drain: %+v", roles)
	}
	if row, _ := bob.inbox().find(f.role); row.ReadAt == nil || row.ReadBy == nil || *row.ReadBy != "@bob" {
		t.Errorf("role message after includeRoles: %+v", row)
	}
	if got := bob.unread(); len(got) != 0 {
		t.Errorf("unread after includeRoles = %v", got)
	}
}

func TestMarkAllReadOnAnEmptyInboxIsANoop(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	bob := e.as("bob")
	r := bob.drain(nil)
	checkCounts(t, r)
	if r.Status != "noop" || r.MatchedCount != 0 || r.ReadCount != 0 || r.DurableCount != 0 || r.WithheldRoleCount != 0 || len(r.Failures) != 0 {
		t.Errorf("empty drain: %+v", r)
	}
}

func TestMarkAllReadThroughAWatermark(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	alice, bob, carol := e.as("alice"), e.as("bob"), e.as("carol")
	m1 := alice.sendTo("@bob", "m1")
	m2 := carol.sendTo("@bob", "m2")
	p := bob.list(nil)
	if p.Watermark == nil || *p.Watermark != m2 {
		t.Fatalf("watermark = %v, want %s", p.Watermark, m2)
	}
	m3 := alice.sendTo("@bob", "m3 arrives after the list")
	own := bob.sendTo("@alice", "bob's own")

	r := bob.drain(map[string]any{"through": *p.Watermark})
	checkCounts(t, r)
	if r.Status != "read" || r.MatchedCount != 2 || r.ReadCount != 2 {
		t.Errorf("drain through the watermark: %+v", r)
	}
	if got := bob.unread(); !slices.Equal(got, []string{m3}) {
		t.Errorf("unread = %v, want only m3 (%s); m1 %s m2 %s", got, m3, m1, m2)
	}

	t.Run("through an older message bounds it to that message", func(t *testing.T) {
		bob := bob.on(t)
		m4 := alice.sendTo("@bob", "m4")
		r := bob.drain(map[string]any{"through": m3})
		if r.MatchedCount != 1 || r.ReadCount != 1 {
			t.Errorf("receipt %+v", r)
		}
		if got := bob.unread(); !slices.Equal(got, []string{m4}) {
			t.Errorf("unread = %v, want only m4", got)
		}
	})
	t.Run("through the caller's own sent message works as a watermark", func(t *testing.T) {
		bob := bob.on(t)
		r := bob.drain(map[string]any{"through": own})
		checkCounts(t, r)
	})
	t.Run("through a message the caller cannot see is not found", func(t *testing.T) {
		bob, carol := bob.on(t), carol.on(t)
		hidden := alice.sendTo("@carol", "hidden from bob")
		bob.failWith("mark_read", map[string]any{"all": true, "through": hidden}, "Message not found: "+hidden)
		bob.failWith("mark_read", map[string]any{"all": true, "through": "MESSAGE:nope"}, "Message not found: MESSAGE:nope")
		if got := carol.unread(); !contains(got, hidden) {
			t.Errorf("carol's message was touched")
		}
	})
}

func TestMarkAllReadLeavesMessagesArrivingAfterTheSnapshot(t *testing.T) {
	t.Parallel()
	var (
		e    *env
		once sync.Once
		late string
	)
	hooks := &sqlite.Hooks{AfterSnapshot: func() {
		once.Do(func() { late = e.storeSend("alice", []string{"@bob"}, "late", "arrived mid-drain") })
	}}
	e = newEnvWith(t, filepath.Join(t.TempDir(), "mailroom.db"), sqlite.Options{Hooks: hooks})
	alice, bob := e.as("alice"), e.as("bob")
	early := []string{alice.sendTo("@bob", "e1"), alice.sendTo("@bob", "e2")}

	r := bob.drain(nil)
	checkCounts(t, r)
	if late == "" {
		t.Fatal("the AfterSnapshot hook did not run")
	}
	if r.Status != "read" || r.MatchedCount != 2 || r.ReadCount != 2 || r.DurableCount != 2 {
		t.Errorf("receipt: %+v", r)
	}
	if got := bob.unread(); !slices.Equal(got, []string{late}) {
		t.Errorf("unread = %v, want only the late message %s (early %v)", got, late, early)
	}
}

func TestMarkReadStorageFailures(t *testing.T) {
	t.Parallel()
	var failing sync.Map
	hooks := &sqlite.Hooks{FailMark: func(id string) error {
		if _, ok := failing.Load(id); ok {
			return errors.New("disk I/O error")
		}
		return nil
	}}
	e := newEnvWith(t, filepath.Join(t.TempDir(), "mailroom.db"), sqlite.Options{Hooks: hooks})
	alice, bob := e.as("alice"), e.as("bob")
	var ids []string
	for _, s := range []string{"m0", "m1", "m2", "m3", "m4", "m5"} {
		ids = append(ids, alice.sendTo("@bob", s))
	}
	bad := []string{ids[1], ids[4]}
	for _, id := range bad {
		failing.Store(id, true)
	}

	t.Run("a drain reports exactly the failed ids", func(t *testing.T) {
		bob := bob.on(t)
		r := bob.drain(nil)
		checkCounts(t, r)
		if r.Status != "partial" || r.MatchedCount != 6 || r.ReadCount != 4 || r.DurableCount != 4 || r.FailureCount != 2 {
			t.Errorf("receipt: %+v", r)
		}
		var got []string
		for _, f := range r.Failures {
			got = append(got, f.MessageID)
			if f.Error != "internal error" {
				t.Errorf("failure %s error = %q; storage details must stay in the log", f.MessageID, f.Error)
			}
		}
		if !sameSet(got, bad) {
			t.Errorf("failures = %v, want %v", got, bad)
		}
		if unread := bob.unread(); !sameSet(unread, bad) {
			t.Errorf("unread = %v, want exactly the failed ids %v", unread, bad)
		}
	})
	t.Run("an array reports the failed id and marks the rest", func(t *testing.T) {
		bob := bob.on(t)
		ok := alice.sendTo("@bob", "fresh")
		var r manyReceipt
		bob.ok("mark_read", map[string]any{"messageId": []string{bad[0], ok}}, &r)
		if len(r.Results) != 2 || r.Results[0].Status != "error" || r.Results[0].Error != "internal error" || r.Results[1].Status != "read" {
			t.Errorf("results = %+v", r.Results)
		}
	})
	t.Run("a scalar failure is isError", func(t *testing.T) {
		bob := bob.on(t)
		bob.failWith("mark_read", map[string]any{"messageId": bad[1]}, "internal error")
	})
	t.Run("once storage recovers the next drain reads them", func(t *testing.T) {
		bob := bob.on(t)
		failing.Clear()
		r := bob.drain(nil)
		if r.Status != "read" || r.MatchedCount != 2 || r.ReadCount != 2 {
			t.Errorf("receipt: %+v", r)
		}
	})
}

func TestMarkAllReadDrainsTenThousandInOneCall(t *testing.T) {
	if testing.Short() {
		t.Skip("seeds 10,000 messages")
	}
	t.Parallel()
	e := newEnv(t)
	bob := e.as("bob")
	const n = 10000
	e.seed("alice", []string{"@bob"}, n)
	start := time.Now()
	r := bob.drain(nil)
	t.Logf("drained %d in %v", r.ReadCount, time.Since(start))
	checkCounts(t, r)
	if r.Status != "read" || r.MatchedCount != n || r.ReadCount != n || r.DurableCount != n || r.FailureCount != 0 {
		t.Errorf("receipt: %+v", func() drainReceipt { r.Failures = r.Failures[:min(len(r.Failures), 3)]; return r }())
	}
	if p := bob.list(map[string]any{"unreadOnly": true, "limit": 1}); p.TotalCount != 0 {
		t.Errorf("unread after the drain = %d", p.TotalCount)
	}
}
