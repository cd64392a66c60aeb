package mcp_test

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/mailroom/mailroom"
	"github.com/mailroom/mailroom/sqlite"
)

// Result shapes of SPEC section 9, written from the SPEC.
type stateReceipt struct {
	MessageID  string     `json:"messageId"`
	Status     string     `json:"status"`
	Durable    bool       `json:"durable"`
	ReadAt     *time.Time `json:"readAt"`
	ArchivedAt *time.Time `json:"archivedAt"`
	DeletedAt  *time.Time `json:"deletedAt"`
	Retracted  bool       `json:"retracted"`
}

type mailboxStatus struct {
	Identity string `json:"identity"`
	Unread   struct {
		Total, Direct, Broadcast, Role, Human int
		ByPriority                            struct{ High, Normal, Low int } `json:"byPriority"`
	} `json:"unread"`
	OldestUnreadAt *time.Time `json:"oldestUnreadAt"`
	Archived       int        `json:"archived"`
	Watermark      *string    `json:"watermark"`
	Roles          []struct {
		Role   string `json:"role"`
		Unread int    `json:"unread"`
	} `json:"roles"`
}

func (c *client) state(tool, id string) stateReceipt {
	c.t.Helper()
	var r stateReceipt
	c.ok(tool, map[string]any{"messageId": id}, &r)
	return r
}

func (c *client) status() mailboxStatus {
	c.t.Helper()
	var s mailboxStatus
	c.ok("mailbox_status", map[string]any{}, &s)
	return s
}

// bothStores runs f on a file store and on :memory:.
func bothStores(t *testing.T, f func(t *testing.T, e *env, durable bool)) {
	t.Run("file", func(t *testing.T) { f(t, newEnv(t), true) })
	t.Run("memory", func(t *testing.T) { f(t, newEnvWith(t, sqlite.Memory, sqlite.Options{}), false) })
}

func TestLifecycleToolsEndToEnd(t *testing.T) {
	t.Parallel()
	bothStores(t, func(t *testing.T, e *env, durable bool) {
		alice, bob, carol := e.as("alice"), e.as("bob"), e.as("carol")
		id := alice.sendTo([]string{"@bob", "@carol"}, "lifecycle")
		nf := "Message not found: " + id

		bob.markRead(id)
		r := bob.state("mark_unread", id)
		if r.Status != "unread" || r.ReadAt != nil || r.MessageID != id || r.Durable != durable {
			t.Errorf("mark_unread: %+v", r)
		}
		if row, _ := bob.inbox().find(id); row.ReadAt != nil {
			t.Errorf("still read: %+v", row)
		}
		bob.state("mark_unread", id) // already unread: success, no change
		alice.failWith("mark_unread", map[string]any{"messageId": id}, "Not a recipient: "+id)

		bob.ok("archive_message", map[string]any{"messageId": id}, nil)
		r = bob.state("unarchive_message", id)
		if r.Status != "unarchived" || r.ArchivedAt != nil || r.Durable != durable {
			t.Errorf("unarchive_message: %+v", r)
		}
		if _, ok := bob.inbox().find(id); !ok {
			t.Error("unarchived mail is not listed")
		}
		bob.state("unarchive_message", id) // already unarchived
		alice.failWith("unarchive_message", map[string]any{"messageId": id}, "Not a recipient: "+id)

		bob.failWith("retract_message", map[string]any{"messageId": id}, "Not the sender: "+id)

		r = bob.state("delete_message", id)
		if r.Status != "deleted" || r.DeletedAt == nil || r.Durable != durable {
			t.Errorf("delete_message: %+v", r)
		}
		for _, tool := range []string{"get_message", "delete_message", "mark_read", "mark_unread", "archive_message", "unarchive_message"} {
			bob.failWith(tool, map[string]any{"messageId": id}, nf)
		}
		if _, ok := carol.inbox().find(id); !ok {
			t.Error("bob's delete removed carol's copy")
		}

		r = alice.state("retract_message", id)
		if r.Status != "retracted" || !r.Retracted || r.Durable != durable {
			t.Errorf("retract_message: %+v", r)
		}
		alice.state("retract_message", id) // already retracted
		m := carol.get(id)
		if !m.Retracted || m.Subject != "" || m.Body != "" {
			t.Errorf("carol sees %+v", m)
		}
		if p := carol.list(map[string]any{"query": "lifecycle"}); p.TotalCount != 0 {
			t.Errorf("query finds the retracted text: %v", p.ids())
		}

		// Outbox deletion by the sender.
		alice.state("delete_message", id)
		if p := alice.list(map[string]any{"box": "outbox"}); p.TotalCount != 0 {
			t.Errorf("alice's outbox after delete: %v", p.ids())
		}
		alice.failWith("retract_message", map[string]any{"messageId": id}, nf)

		fake := "MESSAGE:0190a0a0-0000-7000-8000-000000000000"
		for _, tool := range []string{"unarchive_message", "mark_unread", "delete_message", "retract_message"} {
			carol.failWith(tool, map[string]any{"messageId": fake}, "Message not found: "+fake)
			carol.failWith(tool, map[string]any{}, "messageId is required")
			carol.failWith(tool, map[string]any{"messageId": id, "of": "@bob"}, "Unknown argument 'of'")
		}
		carol.failWith("mailbox_status", map[string]any{"x": 1}, "Unknown argument 'x'")
	})
}

// TestMailboxStatusMatchesListings checks every count of mailbox_status
// against the totalCount of its list_messages call, through MCP.
func TestMailboxStatusMatchesListings(t *testing.T) {
	t.Parallel()
	bothStores(t, func(t *testing.T, e *env, durable bool) {
		e.human("dana")
		e.agent("carol")
		e.agent("bob")
		e.grant("bob", "triage")
		alice, bob, dana, carol := e.as("alice"), e.as("bob"), e.as("dana"), e.as("carol")
		direct := alice.send(map[string]any{"to": "@bob", "subject": "d", "body": "b", "priority": "high"}).MessageID
		alice.send(map[string]any{"to": "*", "subject": "all", "body": "b", "priority": "low"})
		carol.send(map[string]any{"to": "role:triage", "subject": "queue", "body": "b"})
		dana.send(map[string]any{"to": "@bob", "subject": "from a human", "body": "b"})
		archived := dana.send(map[string]any{"to": []string{"@bob", "role:triage"}, "subject": "archived", "body": "b"}).MessageID
		bob.ok("archive_message", map[string]any{"messageId": archived}, nil)
		bob.markRead(direct)

		st := bob.status()
		if st.Identity != "@bob" || st.Unread.Total != 3 || st.Unread.Direct != 1 || st.Unread.Broadcast != 1 || st.Unread.Role != 1 ||
			st.Unread.Human != 1 || st.Unread.ByPriority.Low != 1 || st.Unread.ByPriority.Normal != 2 || st.Archived != 1 || st.OldestUnreadAt == nil {
			t.Fatalf("status: %+v", st)
		}
		counts := map[string]int{
			"unread.total": st.Unread.Total, "unread.direct": st.Unread.Direct, "unread.broadcast": st.Unread.Broadcast,
			"unread.role": st.Unread.Role, "unread.human": st.Unread.Human, "unread.byPriority.high": st.Unread.ByPriority.High,
			"unread.byPriority.normal": st.Unread.ByPriority.Normal, "unread.byPriority.low": st.Unread.ByPriority.Low, "archived": st.Archived,
		}
		var roles []string
		for _, r := range st.Roles {
			counts["roles."+r.Role] = r.Unread
			roles = append(roles, r.Role)
		}
		if len(roles) != 3 {
			t.Errorf("roles %v: want next-session, next-session-of-bob, triage", roles)
		}
		for name, in := range mailroom.StatusQueries(roles) {
			args := map[string]any{"unreadOnly": in.UnreadOnly}
			for k, v := range map[string]string{"via": in.Via, "from": in.From, "priority": in.Priority, "to": in.To} {
				if v != "" {
					args[k] = v
				}
			}
			if in.ArchivedOnly {
				args["archivedOnly"] = true
			}
			if p := bob.list(args); p.TotalCount != counts[name] {
				t.Errorf("%s = %d, list_messages(%s).totalCount = %d", name, counts[name], show(args), p.TotalCount)
			}
		}
		if w := bob.list(nil).Watermark; w == nil || st.Watermark == nil || *w != *st.Watermark {
			t.Errorf("watermark %v, list says %v", st.Watermark, w)
		}
	})
}

// TestReadGrantIsReadOnly: a grantee reads the owner's inbox with `of` and
// every changing tool fails on the owner's mail, changing nothing.
func TestReadGrantIsReadOnly(t *testing.T) {
	t.Parallel()
	bothStores(t, func(t *testing.T, e *env, durable bool) {
		e.human("dana")
		alice, bob, dana := e.as("alice"), e.as("bob"), e.as("dana")
		id := bob.sendTo("@alice", "for alice")
		dana.failWith("list_messages", map[string]any{"of": "@alice"}, "No read grant for @alice")
		dana.failWith("get_message", map[string]any{"messageId": id, "of": "@alice"}, "No read grant for @alice")
		dana.failWith("list_messages", map[string]any{"of": "@nobody"}, "No read grant for @nobody")
		if err := e.store.GrantReadInbox(e.ctx, "human:dana", "@alice"); err != nil {
			t.Fatal(err)
		}
		alice.markRead(id)
		p := dana.list(map[string]any{"of": "@alice"})
		if p.TotalCount != 1 || p.Messages[0].MessageID != id || p.Messages[0].ReadAt == nil {
			t.Fatalf("dana's view of alice's inbox: %+v", p)
		}
		var m message
		dana.ok("get_message", map[string]any{"messageId": id, "of": "@alice"}, &m)
		if m.Subject != "for alice" || m.ReadAt == nil {
			t.Errorf("get_message of: %+v", m)
		}
		dana.failWith("list_messages", map[string]any{"of": "@alice", "box": "outbox"}, `of reads another identity's inbox only: box must be inbox (got "outbox")`)
		alice.state("mark_unread", id)

		nf := "Message not found: " + id
		for _, call := range []struct {
			tool string
			args map[string]any
		}{
			{"mark_read", map[string]any{"messageId": id}},
			{"mark_unread", map[string]any{"messageId": id}},
			{"archive_message", map[string]any{"messageId": id}},
			{"unarchive_message", map[string]any{"messageId": id}},
			{"delete_message", map[string]any{"messageId": id}},
			{"retract_message", map[string]any{"messageId": id}},
			{"add_message", map[string]any{"to": "@bob", "subject": "re", "body": "b", "inReplyTo": id}},
		} {
			dana.failWith(call.tool, call.args, nf)
			call.args["of"] = "@alice"
			dana.failWith(call.tool, call.args, "Unknown argument 'of'")
		}
		var arr manyReceipt
		dana.ok("mark_read", map[string]any{"messageId": []string{id}}, &arr)
		if arr.Results[0].Error != nf {
			t.Errorf("array mark_read: %+v", arr.Results)
		}
		if d := dana.drain(map[string]any{"includeRoles": true}); d.MatchedCount != 0 {
			t.Errorf("drain reached alice's mail: %+v", d)
		}
		if m := alice.get(id); m.ReadAt != nil || m.ArchivedAt != nil || m.Retracted {
			t.Errorf("the grantee changed alice's mail: %+v", m)
		}
		if _, err := e.store.RevokeReadInbox(e.ctx, "dana", "alice"); err != nil {
			t.Fatal(err)
		}
		dana.failWith("list_messages", map[string]any{"of": "@alice"}, "No read grant for @alice")
	})
}

func TestRelatedToOverMCP(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	alice, bob := e.as("alice"), e.as("bob")
	send := func(to, subject string, concepts ...string) string {
		return alice.send(map[string]any{"to": to, "subject": subject, "body": "b", "taggedConcepts": concepts}).MessageID
	}
	target := send("@bob", "t", "wal", "checkpoint")
	one := send("@bob", "one", "wal")
	two := send("@bob", "two", "wal", "checkpoint")
	send("@bob", "none", "lunch")
	send("@alice", "not bob's", "wal", "checkpoint")
	p := bob.list(map[string]any{"relatedTo": target})
	if got := p.ids(); len(got) != 2 || got[0] != two || got[1] != one || p.TotalCount != 2 {
		t.Errorf("relatedTo: %v", got)
	}
	if p := bob.list(map[string]any{"relatedTo": target, "query": "one"}); p.TotalCount != 1 {
		t.Errorf("relatedTo with query: %v", p.ids())
	}
	e.agent("carol")
	e.as("carol").failWith("list_messages", map[string]any{"relatedTo": target}, "Message not found: "+target)
}

func TestRetractionOverMCPLeavesNoTextInTheFile(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "m.db")
	e := newEnvWith(t, path, sqlite.Options{})
	alice, bob := e.as("alice"), e.as("bob")
	id := alice.sendTo("@bob", "misdirected qwxplumbago")
	alice.state("retract_message", id)
	if where := fileHolds(t, path, "qwxplumbago"); len(where) > 0 {
		t.Errorf("old subject still in %v", where)
	}
	if r, _ := bob.inbox().find(id); !r.Retracted || r.Subject != "" {
		t.Errorf("bob's row: %+v", r)
	}
}

func fileHolds(t *testing.T, path, word string) []string {
	t.Helper()
	var where []string
	for _, p := range []string{path, path + "-wal"} {
		b, err := os.ReadFile(p)
		if os.IsNotExist(err) {
			continue
		} else if err != nil {
			t.Fatal(err)
		}
		if bytes.Contains(b, []byte(word)) {
			where = append(where, filepath.Base(p))
		}
	}
	return where
}
