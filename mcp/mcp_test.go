package mcp_test

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/mailroom/mailroom"
	"github.com/mailroom/mailroom/mcp"
	"github.com/mailroom/mailroom/postgres/pgtest"
	"github.com/mailroom/mailroom/sqlite"
)

func TestEveryToolWorksEndToEnd(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	alice, bob := e.as("alice"), e.as("bob")

	sent := alice.send(map[string]any{"to": "@bob", "subject": "handoff", "body": "the build is green", "priority": "high"})
	if !strings.HasPrefix(sent.MessageID, "MESSAGE:") || !strings.HasPrefix(sent.ThreadID, "THREAD:") {
		t.Errorf("add_message ids: %+v", sent)
	}
	if sent.Status != "sent" || sent.RecipientCount != 1 || !sent.Durable || sent.Priority != "high" || sent.SentAt.IsZero() {
		t.Errorf("add_message receipt: %+v", sent)
	}

	p := bob.list(nil)
	if p.TotalCount != 1 || len(p.Messages) != 1 || p.NextOffset != nil {
		t.Fatalf("bob's inbox: %+v", p)
	}
	r := p.Messages[0]
	if r.MessageID != sent.MessageID || r.Subject != "handoff" || r.From != "@alice" || !slices.Equal(r.To, []string{"@bob"}) ||
		r.Priority != "high" || r.ReadAt != nil || r.ArchivedAt != nil || r.ThreadID != sent.ThreadID || r.Retracted || !r.SentAt.Equal(sent.SentAt) {
		t.Errorf("bob's row: %+v", r)
	}
	if p.Watermark == nil || *p.Watermark != sent.MessageID {
		t.Errorf("watermark = %v, want %s", p.Watermark, sent.MessageID)
	}

	m := bob.get(sent.MessageID)
	if m.Body != "the build is green" || m.InReplyTo != nil || m.From != "@alice" {
		t.Errorf("get_message: %+v", m)
	}

	rr := bob.markRead(sent.MessageID)
	if rr.MessageID != sent.MessageID || rr.Status != "read" || !rr.Durable || rr.ReadAt.IsZero() {
		t.Errorf("mark_read: %+v", rr)
	}
	if got := bob.get(sent.MessageID).ReadAt; got == nil || !got.Equal(rr.ReadAt) {
		t.Errorf("readAt after mark_read = %v, want %v", got, rr.ReadAt)
	}

	var ar archiveReceipt
	bob.ok("archive_message", map[string]any{"messageId": sent.MessageID}, &ar)
	if ar.MessageID != sent.MessageID || ar.Status != "archived" || !ar.Durable || ar.ArchivedAt.IsZero() {
		t.Errorf("archive_message: %+v", ar)
	}
	if p := bob.list(nil); p.TotalCount != 0 {
		t.Errorf("archived message still listed: %+v", p)
	}
	if p := bob.list(map[string]any{"includeArchived": true}); p.TotalCount != 1 || p.Messages[0].ArchivedAt == nil {
		t.Errorf("includeArchived: %+v", p)
	}
	// Archiving is not reading and reading is not archiving: both states stay.
	if m := bob.get(sent.MessageID); m.ReadAt == nil || m.ArchivedAt == nil {
		t.Errorf("after read and archive: readAt %v archivedAt %v", m.ReadAt, m.ArchivedAt)
	}
}

func TestToolWithoutIdentityAnswersAClearError(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.agent("bob")
	c := connect(t, e.store, mcp.Options{}, "anonymous")
	calls := []struct {
		tool string
		args map[string]any
	}{
		{"add_message", map[string]any{"to": "@bob", "subject": "s", "body": "b"}},
		{"list_messages", map[string]any{}},
		{"get_message", map[string]any{"messageId": "MESSAGE:x"}},
		{"archive_message", map[string]any{"messageId": "MESSAGE:x"}},
		{"mark_read", map[string]any{"messageId": "MESSAGE:x"}},
		{"mark_read", map[string]any{"all": true}},
		{"unarchive_message", map[string]any{"messageId": "MESSAGE:x"}},
		{"mark_unread", map[string]any{"messageId": "MESSAGE:x"}},
		{"delete_message", map[string]any{"messageId": "MESSAGE:x"}},
		{"retract_message", map[string]any{"messageId": "MESSAGE:x"}},
		{"mailbox_status", map[string]any{}},
	}
	for _, call := range calls {
		t.Run(call.tool, func(t *testing.T) {
			c := c.on(t)
			msg := c.fail(call.tool, call.args)
			if !strings.HasPrefix(msg, "no identity is bound to this connection") || !strings.Contains(msg, "--agent") {
				t.Errorf("error = %q", msg)
			}
		})
	}
	if n := e.as("bob").list(map[string]any{"includeArchived": true}).TotalCount; n != 0 {
		t.Errorf("anonymous add_message stored %d message(s)", n)
	}
}

func TestAddressing(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	alice, bob, carol := e.as("alice"), e.as("bob"), e.as("carol")
	e.human("dana")
	dana := e.as("dana")

	cases := []struct {
		name      string
		to        any
		wantTo    []string
		wantCount int
		receivers []*client
	}{
		{"@name reaches the agent", "@bob", []string{"@bob"}, 1, []*client{bob}},
		{"a bare name reaches the agent", "bob", []string{"@bob"}, 1, []*client{bob}},
		{"AGENT:name reaches the agent", "AGENT:bob", []string{"@bob"}, 1, []*client{bob}},
		{"AGENT:@name reaches the agent", "AGENT:@bob", []string{"@bob"}, 1, []*client{bob}},
		{"@me reaches the caller", "@me", []string{"@alice"}, 1, []*client{alice}},
		{"human:login reaches the human", "human:dana", []string{"human:dana"}, 1, []*client{dana}},
		{"an array reaches each address", []string{"@bob", "@carol"}, []string{"@bob", "@carol"}, 2, []*client{bob, carol}},
		{"* reaches every agent but the sender", "*", []string{"*"}, 2, []*client{bob, carol}},
		{"AGENT:* is a broadcast too", "AGENT:*", []string{"*"}, 2, []*client{bob, carol}},
		{"duplicates fold to one delivery", []string{"@bob", "bob", "AGENT:bob"}, []string{"@bob"}, 1, []*client{bob}},
		{"a broadcast and a direct address give one delivery each", []string{"*", "@bob"}, []string{"*", "@bob"}, 2, []*client{bob, carol}},
		{"@me and a broadcast reach everyone once", []string{"@me", "*"}, []string{"@alice", "*"}, 3, []*client{alice, bob, carol}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			alice, bob, carol, dana := alice.on(t), bob.on(t), carol.on(t), dana.on(t)
			r := alice.send(map[string]any{"to": tc.to, "subject": tc.name, "body": "b"})
			if r.RecipientCount != tc.wantCount {
				t.Errorf("recipientCount = %d, want %d", r.RecipientCount, tc.wantCount)
			}
			for _, c := range []*client{alice, bob, carol, dana} {
				row, ok := c.inbox().find(r.MessageID)
				want := slices.ContainsFunc(tc.receivers, func(r *client) bool { return r.name == c.name })
				if ok != want {
					t.Errorf("%s has it: %v, want %v", c.name, ok, want)
				}
				if ok && !slices.Equal(row.To, tc.wantTo) {
					t.Errorf("%s sees to = %v, want %v", c.name, row.To, tc.wantTo)
				}
			}
		})
	}
	// Humans are not in a broadcast's audience.
	if p := dana.list(map[string]any{"to": "*"}); p.TotalCount != 0 {
		t.Errorf("a human received a broadcast: %+v", p.ids())
	}
}

func TestAddressingErrors(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	alice := e.as("alice")
	e.agent("bob")
	e.human("dana")

	tooMany := make([]string, 51)
	for i := range tooMany {
		tooMany[i] = "@bob"
	}
	cases := []struct {
		name string
		to   any
		want string // "" means any error
	}{
		{"unknown agent", "@nobody", "Unknown recipient: @nobody"},
		{"unknown bare name", "nobody", "Unknown recipient: @nobody"},
		{"unknown AGENT:name", "AGENT:nobody", "Unknown recipient: @nobody"},
		{"one unknown among known ones", []string{"@bob", "@nobody"}, "Unknown recipient: @nobody"},
		{"unknown human", "human:nobody", "Unknown recipient: human:nobody"},
		{"an agent addressed as a human", "human:bob", ""},
		{"a human addressed as an agent", "@dana", ""},
		{"empty to array", []string{}, ""},
		{"empty to string", "", ""},
		{"51 addresses", tooMany, "to accepts at most 50 addresses (got 51)"},
		{"next-session-of an unknown agent", "role:next-session-of-nobody", ""},
		{"a malformed address", "@Not Valid", ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			alice := alice.on(t)
			before := alice.list(map[string]any{"box": "outbox"}).TotalCount
			msg := alice.fail("add_message", map[string]any{"to": tc.to, "subject": "s", "body": "b"})
			if tc.want != "" && msg != tc.want {
				t.Errorf("error = %q, want %q", msg, tc.want)
			}
			if tc.name == "next-session-of an unknown agent" && !strings.HasPrefix(msg, "Unknown recipient: role:next-session-of-nobody") {
				t.Errorf("error = %q", msg)
			}
			if after := alice.list(map[string]any{"box": "outbox"}).TotalCount; after != before {
				t.Errorf("a refused message was stored: outbox %d -> %d", before, after)
			}
		})
	}

	t.Run("50 addresses are accepted", func(t *testing.T) {
		alice := alice.on(t)
		alice.send(map[string]any{"to": tooMany[:50], "subject": "s", "body": "b"})
	})
}

func TestBroadcastReachingNobodyIsAnError(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	alice := e.as("alice")
	e.human("dana") // humans are not in a broadcast's audience
	for _, to := range []string{"*", "AGENT:*"} {
		alice.failWith("add_message", map[string]any{"to": to, "subject": "s", "body": "b"}, "No recipients: the broadcast reaches nobody")
	}
	if p := alice.list(map[string]any{"box": "outbox"}); p.TotalCount != 0 {
		t.Errorf("outbox after refused broadcasts: %d", p.TotalCount)
	}
}

func TestRoles(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	alice, bob, carol, dave := e.as("alice"), e.as("bob"), e.as("carol"), e.as("dave")
	e.grant("bob", "reviewer")
	e.grant("carol", "reviewer")

	t.Run("a role message reaches every holder with one shared read state", func(t *testing.T) {
		alice, bob, carol, dave := alice.on(t), bob.on(t), carol.on(t), dave.on(t)
		r := alice.send(map[string]any{"to": "role:reviewer", "subject": "please review", "body": "b"})
		if r.RecipientCount != 1 {
			t.Errorf("recipientCount = %d, want 1 (a role counts once)", r.RecipientCount)
		}
		for _, c := range []*client{bob, carol} {
			row, ok := c.inbox().find(r.MessageID)
			if !ok || !slices.Equal(row.To, []string{"role:reviewer"}) || row.ReadAt != nil {
				t.Fatalf("%s: row %+v, found %v", c.name, row, ok)
			}
		}
		if _, ok := dave.inbox().find(r.MessageID); ok {
			t.Errorf("dave does not hold the role but sees the message")
		}
		dave.failWith("get_message", map[string]any{"messageId": r.MessageID}, "Message not found: "+r.MessageID)
		if _, ok := alice.inbox().find(r.MessageID); ok {
			t.Errorf("a role message is in its own sender's inbox")
		}
		if _, ok := alice.list(map[string]any{"box": "outbox"}).find(r.MessageID); !ok {
			t.Errorf("a role message is missing from its sender's outbox")
		}

		rr := bob.markRead(r.MessageID)
		row, _ := carol.inbox().find(r.MessageID)
		if row.ReadAt == nil || !row.ReadAt.Equal(rr.ReadAt) {
			t.Errorf("carol's view of the shared read state: readAt %v, want %v", row.ReadAt, rr.ReadAt)
		}
		if row.ReadBy == nil || *row.ReadBy != "@bob" {
			t.Errorf("readBy = %v, want @bob", row.ReadBy)
		}
		if m := carol.get(r.MessageID); m.ReadBy == nil || *m.ReadBy != "@bob" {
			t.Errorf("get_message readBy = %v, want @bob", m.ReadBy)
		}
		// Carol marking it again keeps the first read.
		if again := carol.markRead(r.MessageID); !again.ReadAt.Equal(rr.ReadAt) {
			t.Errorf("second reader moved readAt: %v -> %v", rr.ReadAt, again.ReadAt)
		}
		if row, _ := carol.inbox().find(r.MessageID); row.ReadBy == nil || *row.ReadBy != "@bob" {
			t.Errorf("readBy after carol's mark = %v, want @bob", row.ReadBy)
		}

		// Archive state is shared too.
		var ar archiveReceipt
		carol.ok("archive_message", map[string]any{"messageId": r.MessageID}, &ar)
		if _, ok := bob.inbox().find(r.MessageID); ok {
			t.Errorf("carol archived the role message but bob still lists it")
		}
		if row, _ := bob.list(map[string]any{"includeArchived": true}).find(r.MessageID); row.ArchivedAt == nil || !row.ArchivedAt.Equal(ar.ArchivedAt) {
			t.Errorf("bob's archivedAt = %v, want %v", row.ArchivedAt, ar.ArchivedAt)
		}
	})

	t.Run("a role nobody holds yet is accepted and waits", func(t *testing.T) {
		alice, dave := alice.on(t), dave.on(t)
		r := alice.send(map[string]any{"to": "role:oncall", "subject": "pager", "body": "b"})
		if r.RecipientCount != 1 {
			t.Errorf("recipientCount = %d", r.RecipientCount)
		}
		if _, ok := dave.inbox().find(r.MessageID); ok {
			t.Fatalf("dave sees it before the grant")
		}
		e.grant("dave", "oncall")
		if _, ok := dave.inbox().find(r.MessageID); !ok {
			t.Errorf("dave does not see the waiting role message after the grant")
		}
	})

	t.Run("every agent holds role:next-session", func(t *testing.T) {
		alice, bob, carol, dave := alice.on(t), bob.on(t), carol.on(t), dave.on(t)
		r := alice.send(map[string]any{"to": "role:next-session", "subject": "for whoever comes next", "body": "b"})
		for _, c := range []*client{bob, carol, dave} {
			if _, ok := c.inbox().find(r.MessageID); !ok {
				t.Errorf("%s does not see role:next-session", c.name)
			}
		}
		if _, ok := alice.inbox().find(r.MessageID); ok {
			t.Errorf("the sender sees its own role:next-session message")
		}
	})

	t.Run("agent X holds role:next-session-of-X", func(t *testing.T) {
		alice, bob, carol, dave := alice.on(t), bob.on(t), carol.on(t), dave.on(t)
		r := alice.send(map[string]any{"to": "role:next-session-of-bob", "subject": "for bob's successor", "body": "b"})
		if _, ok := bob.inbox().find(r.MessageID); !ok {
			t.Errorf("bob does not see role:next-session-of-bob")
		}
		for _, c := range []*client{carol, dave} {
			if _, ok := c.inbox().find(r.MessageID); ok {
				t.Errorf("%s sees role:next-session-of-bob", c.name)
			}
		}
		// A note for one's own successor is for the next session of the
		// same identity: the one role message that reaches its sender.
		own := alice.send(map[string]any{"to": "role:next-session-of-alice", "subject": "note to self", "body": "b"})
		if _, ok := alice.inbox().find(own.MessageID); !ok {
			t.Errorf("alice's next session cannot see the handoff she left for it")
		}
		alice.markRead(own.MessageID)
	})

	t.Run("a personal delivery wins over a role one", func(t *testing.T) {
		alice, bob, carol := alice.on(t), bob.on(t), carol.on(t)
		r := alice.send(map[string]any{"to": []string{"@bob", "role:reviewer"}, "subject": "both ways", "body": "b"})
		if r.RecipientCount != 2 {
			t.Errorf("recipientCount = %d, want 2", r.RecipientCount)
		}
		if n := strings.Count(strings.Join(bob.inbox().ids(), " "), r.MessageID); n != 1 {
			t.Errorf("bob sees the message %d times, want once", n)
		}
		bob.markRead(r.MessageID)
		// Bob's personal read leaves the role queue unread for carol.
		if row, _ := carol.inbox().find(r.MessageID); row.ReadAt != nil {
			t.Errorf("bob's personal read consumed the role delivery: %+v", row)
		}
	})
}

func TestBroadcastReadStateIsPerRecipient(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	alice, bob, carol := e.as("alice"), e.as("bob"), e.as("carol")
	r := alice.send(map[string]any{"to": "*", "subject": "all hands", "body": "b"})
	if r.RecipientCount != 2 {
		t.Fatalf("recipientCount = %d, want 2", r.RecipientCount)
	}
	bob.markRead(r.MessageID)
	if row, _ := bob.inbox().find(r.MessageID); row.ReadAt == nil {
		t.Errorf("bob's copy is unread after mark_read")
	}
	if row, ok := carol.inbox().find(r.MessageID); !ok || row.ReadAt != nil {
		t.Errorf("carol's copy: %+v (found %v); want unread", row, ok)
	}
	if !contains(carol.unread(), r.MessageID) {
		t.Errorf("carol's unreadOnly listing lost the broadcast")
	}
	// Outbox rows carry no read state.
	if row, _ := alice.list(map[string]any{"box": "outbox"}).find(r.MessageID); row.ReadAt != nil {
		t.Errorf("outbox row readAt = %v, want null", row.ReadAt)
	}

	// The audience was fixed at send time.
	erin := e.as("erin")
	if _, ok := erin.inbox().find(r.MessageID); ok {
		t.Errorf("an agent created after the broadcast received it")
	}
	erin.failWith("get_message", map[string]any{"messageId": r.MessageID}, "Message not found: "+r.MessageID)
}

func TestReplyThreading(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	alice, bob, carol := e.as("alice"), e.as("bob"), e.as("carol")
	parent := alice.send(map[string]any{"to": "@bob", "subject": "question", "body": "?"})
	other := alice.send(map[string]any{"to": "@bob", "subject": "unrelated", "body": "x"})
	if other.ThreadID == parent.ThreadID {
		t.Fatalf("a new message joined an existing thread")
	}
	reply := bob.send(map[string]any{"to": "@alice", "subject": "re: question", "body": "!", "inReplyTo": parent.MessageID})
	if reply.ThreadID != parent.ThreadID {
		t.Errorf("reply thread %s, want the parent's %s", reply.ThreadID, parent.ThreadID)
	}
	second := alice.send(map[string]any{"to": "@bob", "subject": "re: re", "body": "ok", "inReplyTo": reply.MessageID})
	if second.ThreadID != parent.ThreadID {
		t.Errorf("reply to a reply left the thread")
	}

	m := alice.get(reply.MessageID)
	if m.InReplyTo == nil || *m.InReplyTo != parent.MessageID || m.ThreadID != parent.ThreadID {
		t.Errorf("get_message of the reply: inReplyTo %v threadId %s", m.InReplyTo, m.ThreadID)
	}
	if m := bob.get(parent.MessageID); m.InReplyTo != nil {
		t.Errorf("the parent has inReplyTo %v", *m.InReplyTo)
	}

	th := alice.list(map[string]any{"box": "all", "threadId": parent.ThreadID})
	if want := []string{second.MessageID, reply.MessageID, parent.MessageID}; !slices.Equal(th.ids(), want) || th.TotalCount != 3 {
		t.Errorf("thread listing = %v (total %d), want %v", th.ids(), th.TotalCount, want)
	}

	t.Run("a thread listing shows an outsider nothing", func(t *testing.T) {
		carol := carol.on(t)
		if p := carol.list(map[string]any{"box": "all", "threadId": parent.ThreadID}); p.TotalCount != 0 {
			t.Errorf("carol sees %d messages of a thread she is not in", p.TotalCount)
		}
	})
	t.Run("a reply to an invisible message is refused", func(t *testing.T) {
		carol := carol.on(t)
		carol.failWith("add_message", map[string]any{"to": "@alice", "subject": "s", "body": "b", "inReplyTo": parent.MessageID}, "Message not found: "+parent.MessageID)
		carol.failWith("add_message", map[string]any{"to": "@alice", "subject": "s", "body": "b", "inReplyTo": "MESSAGE:nope"}, "Message not found: MESSAGE:nope")
		if p := carol.list(map[string]any{"box": "outbox"}); p.TotalCount != 0 {
			t.Errorf("refused reply was stored")
		}
	})
	t.Run("a bad threadId filter is an error", func(t *testing.T) {
		alice := alice.on(t)
		alice.fail("list_messages", map[string]any{"threadId": "MESSAGE:x"})
	})
}

func TestMessageEdgesAreVisibleInGetMessage(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	alice, bob := e.as("alice"), e.as("bob")
	r := alice.send(map[string]any{
		"to": "@bob", "subject": "edges", "body": "b",
		"originSessionId": "claude-1234",
		"relatedSessions": []string{"SESSION:codex-9", "gemini-7"},
		"relatedTickets":  []string{"#12", "owner/repo#34"},
		"taggedConcepts":  []string{"Rate Limiting", "CONCEPT:token-bucket", "rate-limiting"},
	})
	m := bob.get(r.MessageID)
	if m.OriginSessionID != "SESSION:claude-1234" {
		t.Errorf("originSessionId = %q, want SESSION:claude-1234", m.OriginSessionID)
	}
	if want := []string{"SESSION:codex-9", "SESSION:gemini-7"}; !sameSet(m.RelatedSessions, want) {
		t.Errorf("relatedSessions = %v, want %v", m.RelatedSessions, want)
	}
	if want := []string{"#12", "owner/repo#34"}; !sameSet(m.RelatedTickets, want) {
		t.Errorf("relatedTickets = %v, want %v", m.RelatedTickets, want)
	}
	byID := map[string]string{}
	for _, c := range m.TaggedConcepts {
		byID[c.ID] = c.Name
	}
	for _, id := range []string{"CONCEPT:rate-limiting", "CONCEPT:token-bucket"} {
		if name, ok := byID[id]; !ok || name == "" {
			t.Errorf("taggedConcepts lacks %s with a name: %+v", id, m.TaggedConcepts)
		}
	}
	if byID["CONCEPT:rate-limiting"] != "Rate Limiting" {
		t.Errorf("concept name = %q, want the caller's text %q", byID["CONCEPT:rate-limiting"], "Rate Limiting")
	}
	for _, c := range m.TaggedConcepts {
		if c.ID != "CONCEPT:"+mailroom.ConceptSlug(c.ID[len("CONCEPT:"):]) {
			t.Errorf("concept id %q is not canonical", c.ID)
		}
	}
	// Concepts are searchable by id and by free text.
	for _, q := range []string{"CONCEPT:token-bucket", "Token Bucket", "rate limiting"} {
		if p := bob.list(map[string]any{"taggedConcepts": []string{q}}); !contains(p.ids(), r.MessageID) {
			t.Errorf("taggedConcepts filter %q misses the message", q)
		}
	}
	if p := bob.list(map[string]any{"taggedConcepts": []string{"token bucket", "unrelated-topic"}}); p.TotalCount != 0 {
		t.Errorf("every tag must match: got %v", p.ids())
	}

	t.Run("originSessionId defaults to the connection's session", func(t *testing.T) {
		alice, bob := alice.on(t), bob.on(t)
		plain := alice.send(map[string]any{"to": "@bob", "subject": "plain", "body": "b"})
		m := bob.get(plain.MessageID)
		if !strings.HasPrefix(m.OriginSessionID, "SESSION:") || len(m.OriginSessionID) <= len("SESSION:") {
			t.Errorf("originSessionId = %q", m.OriginSessionID)
		}
		if len(m.RelatedSessions) != 0 || len(m.RelatedTickets) != 0 || m.RelatedSessions == nil || m.RelatedTickets == nil {
			t.Errorf("empty edges should be empty arrays: sessions %#v tickets %#v", m.RelatedSessions, m.RelatedTickets)
		}
	})

	t.Run("bad edges are refused with nothing stored", func(t *testing.T) {
		alice := alice.on(t)
		before := alice.list(map[string]any{"box": "outbox"}).TotalCount
		for _, args := range []map[string]any{
			{"relatedTickets": []string{"PROJ-12"}},
			{"relatedTickets": []string{"#"}},
			{"relatedTickets": "#12"},
			{"relatedSessions": []string{"bad session id!"}},
			{"originSessionId": "  "},
			{"taggedConcepts": []string{"!!!"}},
			{"priority": "urgent"},
		} {
			args["to"], args["subject"], args["body"] = "@bob", "s", "b"
			msg := alice.fail("add_message", args)
			if strings.HasPrefix(msg, "Unknown argument") {
				t.Errorf("%v: %s", args, msg)
			}
		}
		if after := alice.list(map[string]any{"box": "outbox"}).TotalCount; after != before {
			t.Errorf("outbox %d -> %d", before, after)
		}
		alice.failWith("add_message", map[string]any{"to": "@bob", "subject": "s", "body": "b", "relatedTickets": []string{"PROJ-12"}},
			`relatedTickets: invalid ticket "PROJ-12" (use #123 or owner/repo#123)`)
	})
}

func sameSet(a, b []string) bool {
	a, b = slices.Clone(a), slices.Clone(b)
	slices.Sort(a)
	slices.Sort(b)
	return slices.Equal(a, b)
}

func TestPaginationWalksEveryMessageOnce(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	bob := e.as("bob")
	const n = 3000
	sent := e.seed("alice", []string{"@bob"}, n)
	slices.Reverse(sent) // newest first

	var seen []string
	offset := 0
	for pages := 0; ; pages++ {
		if pages > n/200+1 {
			t.Fatalf("too many pages")
		}
		p := bob.list(map[string]any{"limit": 200, "offset": offset})
		if p.TotalCount != n {
			t.Fatalf("page at %d: totalCount %d, want %d", offset, p.TotalCount, n)
		}
		if p.Watermark == nil || *p.Watermark != sent[0] {
			t.Fatalf("watermark %v, want the newest %s", p.Watermark, sent[0])
		}
		seen = append(seen, p.ids()...)
		if p.NextOffset == nil {
			if len(p.Messages) != 200 { // 3000 is a multiple of 200
				t.Errorf("last page has %d rows", len(p.Messages))
			}
			break
		}
		if *p.NextOffset != offset+len(p.Messages) {
			t.Fatalf("nextOffset %d after offset %d with %d rows", *p.NextOffset, offset, len(p.Messages))
		}
		offset = *p.NextOffset
	}
	if !slices.Equal(seen, sent) {
		t.Fatalf("walked %d ids; not every id exactly once in newest-first order", len(seen))
	}
	t.Run("past the end is an empty last page", func(t *testing.T) {
		bob := bob.on(t)
		p := bob.list(map[string]any{"limit": 200, "offset": n})
		if len(p.Messages) != 0 || p.NextOffset != nil || p.TotalCount != n || p.Messages == nil {
			t.Errorf("offset %d: %d rows, nextOffset %v, total %d", n, len(p.Messages), p.NextOffset, p.TotalCount)
		}
	})
	t.Run("default limit is 50", func(t *testing.T) {
		bob := bob.on(t)
		p := bob.list(nil)
		if len(p.Messages) != 50 || p.NextOffset == nil || *p.NextOffset != 50 {
			t.Errorf("default page: %d rows, nextOffset %v", len(p.Messages), p.NextOffset)
		}
	})
}

// Paging by cursor over MCP: every message once, newest first, while new
// mail arrives and unseen mail is archived between pages; the last page's
// nextCursor is null.
func TestCursorPagingWalksAMovingInbox(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	alice, bob := e.as("alice"), e.as("bob")
	const n = 450
	sent := e.seed("alice", []string{"@bob"}, n)
	slices.Reverse(sent) // newest first
	archived := sent[250]
	var seen []string
	args := map[string]any{"limit": 200}
	for pages := 0; ; pages++ {
		if pages > 4 {
			t.Fatal("too many pages")
		}
		p := bob.list(args)
		if _, ok := args["cursor"]; ok && p.NextOffset != nil {
			t.Errorf("nextOffset %d on a cursor page", *p.NextOffset)
		}
		seen = append(seen, p.ids()...)
		if p.NextCursor == nil {
			break
		}
		args = map[string]any{"limit": 200, "cursor": *p.NextCursor}
		if pages == 0 {
			alice.sendTo("@bob", "arrives between pages")
			bob.ok("archive_message", map[string]any{"messageId": archived}, nil)
		}
	}
	want := slices.DeleteFunc(slices.Clone(sent), func(id string) bool { return id == archived })
	if !slices.Equal(seen, want) {
		t.Fatalf("walked %d rows, want %d (each once, newest first, the archived one gone)", len(seen), len(want))
	}
}

func TestListArgumentErrors(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	alice := e.as("alice")
	cases := []struct {
		name string
		args any
		want string
	}{
		{"limit 0", map[string]any{"limit": 0}, "limit must be between 1 and 200 (got 0)"},
		{"limit 201", map[string]any{"limit": 201}, "limit must be between 1 and 200 (got 201)"},
		{"limit -5", map[string]any{"limit": -5}, "limit must be between 1 and 200 (got -5)"},
		{"limit as a string", map[string]any{"limit": "x"}, "limit must be an integer (got string)"},
		{"limit as a fraction", map[string]any{"limit": 1.5}, "limit must be an integer (got 1.5)"},
		{"offset -1", map[string]any{"offset": -1}, "offset must be 0 or more (got -1)"},
		{"cursor and offset", map[string]any{"cursor": "c1.MTA", "offset": 0}, "give cursor or offset, not both"},
		{"cursor not from a list", map[string]any{"cursor": "MESSAGE:x"}, `cursor must be a nextCursor from list_messages (got "MESSAGE:x")`},
		{"cursor as a number", map[string]any{"cursor": 7}, "cursor must be a string (got number)"},
		{"cursor with relatedTo", map[string]any{"cursor": "c1.MTA", "relatedTo": "MESSAGE:x"}, "cursor does not apply with relatedTo (ranked by shared concepts); use offset"},
		{"box unknown", map[string]any{"box": "trash"}, `box must be one of inbox, outbox, all (got "trash")`},
		{"unreadOnly as a string", map[string]any{"unreadOnly": "yes"}, "unreadOnly must be true or false (got string)"},
		{"from an unknown identity", map[string]any{"from": "@nobody"}, "from: unknown identity @nobody"},
		{"from a role", map[string]any{"from": "role:x"}, `from: "role:x" is not an identity (use @name or human:login)`},
		{"an unknown argument", map[string]any{"bogus": 1}, "Unknown argument 'bogus'"},
		{"arguments that are not an object", json.RawMessage(`[1]`), ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			alice := alice.on(t)
			if tc.want == "" {
				alice.fail("list_messages", tc.args)
				return
			}
			alice.failWith("list_messages", tc.args, tc.want)
		})
	}
}

func TestListFilters(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	alice, bob, carol := e.as("alice"), e.as("bob"), e.as("carol")
	e.human("dana")
	dana := e.as("dana")
	e.grant("bob", "ops")

	a2b := alice.sendTo("@bob", "alice to bob")
	c2b := carol.sendTo("@bob", "carol to bob")
	b2a := bob.sendTo("@alice", "bob to alice")
	d2b := dana.sendTo("@bob", "dana to bob")
	a2ops := alice.sendTo("role:ops", "alice to ops")
	a2all := alice.sendTo("*", "alice to all")
	archived := alice.sendTo("@bob", "archived one")
	bob.ok("archive_message", map[string]any{"messageId": archived}, nil)
	bob.markRead(a2b)

	cases := []struct {
		name string
		args map[string]any
		want []string // newest first
	}{
		{"inbox is the default", nil, []string{a2all, a2ops, d2b, c2b, a2b}},
		{"box inbox", map[string]any{"box": "inbox"}, []string{a2all, a2ops, d2b, c2b, a2b}},
		{"box outbox", map[string]any{"box": "outbox"}, []string{b2a}},
		{"box all", map[string]any{"box": "all"}, []string{a2all, a2ops, d2b, b2a, c2b, a2b}},
		{"unreadOnly", map[string]any{"unreadOnly": true}, []string{a2all, a2ops, d2b, c2b}},
		{"unreadOnly false is everything", map[string]any{"unreadOnly": false}, []string{a2all, a2ops, d2b, c2b, a2b}},
		{"from @alice", map[string]any{"from": "@alice"}, []string{a2all, a2ops, a2b}},
		{"from a bare name", map[string]any{"from": "carol"}, []string{c2b}},
		{"from human:dana", map[string]any{"from": "human:dana"}, []string{d2b}},
		{"from @me in box all", map[string]any{"box": "all", "from": "@me"}, []string{b2a}},
		{"to role:ops", map[string]any{"to": "role:ops"}, []string{a2ops}},
		{"to *", map[string]any{"to": "*"}, []string{a2all}},
		{"to @bob", map[string]any{"to": "@bob"}, []string{d2b, c2b, a2b}},
		{"to bob in box all", map[string]any{"box": "all", "to": "bob"}, []string{d2b, c2b, a2b}},
		{"to @me is the caller's own address", map[string]any{"to": "@me"}, []string{d2b, c2b, a2b}},
		{"to AGENT:* is a broadcast", map[string]any{"to": "AGENT:*"}, []string{a2all}},
		{"includeArchived", map[string]any{"includeArchived": true}, []string{archived, a2all, a2ops, d2b, c2b, a2b}},
		{"includeArchived with from", map[string]any{"includeArchived": true, "from": "@alice", "to": "@bob"}, []string{archived, a2b}},
		{"query over subject", map[string]any{"query": "carol"}, []string{c2b}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			bob := bob.on(t)
			p := bob.list(tc.args)
			if !slices.Equal(p.ids(), tc.want) || p.TotalCount != len(tc.want) {
				t.Errorf("got %v (total %d), want %v", subjects(bob, p), p.TotalCount, tc.want)
			}
		})
	}
	t.Run("a from filter is not a spoof", func(t *testing.T) {
		bob := bob.on(t)
		bob.list(map[string]any{"from": "@alice"})
	})
}

func subjects(c *client, p page) []string {
	out := make([]string, len(p.Messages))
	for i, r := range p.Messages {
		out[i] = r.Subject
	}
	return out
}

func TestFullTextSearchAcceptsAnyText(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	alice, bob := e.as("alice"), e.as("bob")
	pol := alice.send(map[string]any{"to": "@bob", "subject": "policy check", "body": "ticket POL-358 is blocked on legal"}).MessageID
	quote := alice.send(map[string]any{"to": "@bob", "subject": `say "unbalanced`, "body": "emoji 🚀 launch; a:b pairs; it's"}).MessageID
	alice.send(map[string]any{"to": "@bob", "subject": "noise", "body": "nothing to see"})

	hostile := []string{`POL-358`, `"unbalanced`, `AND OR`, `*`, `NEAR(`, `a:b`, `'`, `🚀`, `NOT`, `)(`, `"`, `-`, `^pol`, `col:umn:`, `pol*`, `\`, `{x}`, `AND`, `OR NOT NEAR`, `""`, `%_`}
	for _, q := range hostile {
		t.Run(q, func(t *testing.T) {
			bob := bob.on(t)
			bob.list(map[string]any{"query": q})
			bob.list(map[string]any{"query": q, "box": "all"})
		})
	}
	if p := bob.list(map[string]any{"query": "POL-358"}); !slices.Equal(p.ids(), []string{pol}) {
		t.Errorf("POL-358 found %v, want only %s", subjects(bob, p), pol)
	}
	if p := bob.list(map[string]any{"query": `"unbalanced`}); !slices.Equal(p.ids(), []string{quote}) {
		t.Errorf(`"unbalanced found %v, want only %s`, subjects(bob, p), quote)
	}
	if p := bob.list(map[string]any{"query": "pol*"}); !contains(p.ids(), pol) {
		t.Errorf("prefix query pol* misses POL-358: %v", subjects(bob, p))
	}
	if p := bob.list(map[string]any{"query": "legal blocked"}); !slices.Equal(p.ids(), []string{pol}) {
		t.Errorf("every word must match: %v", subjects(bob, p))
	}
	if p := alice.list(map[string]any{"query": "POL-358"}); p.TotalCount != 0 {
		t.Errorf("alice's inbox search found another's message: %v", p.ids())
	}
	if p := alice.list(map[string]any{"query": "POL-358", "box": "outbox"}); !slices.Equal(p.ids(), []string{pol}) {
		t.Errorf("outbox search: %v", p.ids())
	}
}

// A search examines only the SearchScan newest matches: when none of them
// is in the caller's inbox (here his own sends to a role he holds, which
// his search reaches and his inbox never shows), the page is empty, its total only a lower
// bound, and nextCursor leads on to the caller's older matches. An offset
// past the rows it found is an error that says how to go on: an empty page
// there would pass over rows below the scan without a word.
func TestFullTextSearchPastItsScan(t *testing.T) {
	t.Parallel()
	if raceDetector && !pgtest.UsePostgres() {
		// The scan's size is the point, and a walk of 10,000 matches in
		// SQLite's instrumented C took a minute (3 s without -race);
		// scripts/test.sh runs it without -race, and under -race on
		// PostgreSQL.
		t.Skip("SearchScan matches on SQLite under -race: scripts/test.sh runs this without it")
	}
	e := newEnv(t)
	// No budgets: under the race detector on a loaded machine a walk of
	// SearchScan matches passes them (CPU 100 ms, and even the 10 s wall),
	// and the budgets are not what this test is about.
	id := e.agent("bob")
	bob := connect(t, e.store, mcp.Options{Identity: &id, CPUBudget: -1, CallBudget: -1}, "bob")
	e.agent("carol")
	older := e.seed("alice", []string{"@bob"}, 5)
	e.grant("bob", "triage")
	e.seed("bob", []string{"role:triage"}, mailroom.SearchScan)
	var p struct {
		page
		TotalCountExact bool `json:"totalCountExact"`
	}
	bob.ok("list_messages", map[string]any{"query": "seeded"}, &p)
	if len(p.Messages) != 0 || p.TotalCount != 0 || p.TotalCountExact || p.NextOffset != nil || p.NextCursor == nil {
		t.Fatalf("a scan of mail bob's inbox never shows: %d rows, total %d exact %v, nextOffset %v, nextCursor %v; want none, 0 as a lower bound, a cursor",
			len(p.Messages), p.TotalCount, p.TotalCountExact, p.NextOffset, p.NextCursor)
	}
	slices.Reverse(older)
	if next := bob.list(map[string]any{"query": "seeded", "cursor": *p.NextCursor}); !slices.Equal(next.ids(), older) || next.NextCursor != nil {
		t.Fatalf("the page past the scan: %v (nextCursor %v), want bob's %v", next.ids(), next.NextCursor, older)
	}
	bob.failWith("list_messages", map[string]any{"query": "seeded", "offset": 3},
		"offset 3 is past the 0 rows this search found: it examines only the 10000 newest matches of query; give an offset of at most 0 and follow nextCursor")
	if p := bob.list(map[string]any{"query": "seeded", "offset": 0}); p.NextCursor == nil {
		t.Fatal("offset 0 lost its cursor")
	}
}

func TestAntiSpoof(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	alice := e.as("alice")
	bob := e.as("bob")
	keys := []string{"from", "sender", "senderId", "sender_id", "agentId", "agent_id", "identity", "userId", "user_id", "author",
		"FROM", "Agent_ID", "SenderID", "USERID", "Author"}
	for _, k := range keys {
		t.Run(k, func(t *testing.T) {
			alice := alice.on(t)
			want := "Identity-override spoof rejected: '" + k + "' is stamped by the server"
			alice.failWith("add_message", map[string]any{"to": "@bob", "subject": "s", "body": "b", k: "@bob"}, want)
			// Checked before schema validation: missing required
			// arguments, wrong types and unknown keys do not hide it.
			alice.failWith("add_message", map[string]any{k: "@bob"}, want)
			alice.failWith("add_message", map[string]any{"to": 7, k: 1, "bogus": true}, want)
		})
	}
	if p := alice.list(map[string]any{"box": "outbox"}); p.TotalCount != 0 {
		t.Errorf("spoofed sends were stored: outbox %d", p.TotalCount)
	}
	if p := bob.list(nil); p.TotalCount != 0 {
		t.Errorf("spoofed sends were delivered: bob's inbox %d", p.TotalCount)
	}
	// The sender is always the bound identity.
	r := alice.sendTo("@bob", "real")
	if row, _ := bob.inbox().find(r); row.From != "@alice" {
		t.Errorf("from = %q, want @alice", row.From)
	}
}

func TestUnknownArguments(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	alice := e.as("alice")
	for _, tool := range []string{"add_message", "list_messages", "get_message", "archive_message", "mark_read"} {
		t.Run(tool, func(t *testing.T) {
			alice := alice.on(t)
			alice.failWith(tool, map[string]any{"bogus": 1}, "Unknown argument 'bogus'")
			alice.failWith(tool, map[string]any{"messageId": "MESSAGE:x", "to": "@alice", "bogus": "x"}, "Unknown argument 'bogus'")
		})
	}
	t.Run("argument names are case-sensitive", func(t *testing.T) {
		alice := alice.on(t)
		alice.failWith("get_message", map[string]any{"MessageId": "MESSAGE:x"}, "Unknown argument 'MessageId'")
	})
	t.Run("an identity key on another tool is refused", func(t *testing.T) {
		// SPEC names the spoof check for add_message; on other tools an
		// identity key is at least an unknown argument.
		alice := alice.on(t)
		msg := alice.fail("get_message", map[string]any{"messageId": "MESSAGE:x", "sender": "@bob"})
		if msg != "Unknown argument 'sender'" && msg != "Identity-override spoof rejected: 'sender' is stamped by the server" {
			t.Errorf("error = %q", msg)
		}
	})
}

func TestInvisibleMessagesDoNotExist(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	alice, bob, carol := e.as("alice"), e.as("bob"), e.as("carol")
	id := alice.sendTo("@bob", "private")

	for _, tool := range []string{"get_message", "mark_read", "archive_message"} {
		t.Run("an outsider's "+tool, func(t *testing.T) {
			carol := carol.on(t)
			carol.failWith(tool, map[string]any{"messageId": id}, "Message not found: "+id)
		})
		t.Run(tool+" of a message that does not exist", func(t *testing.T) {
			carol := carol.on(t)
			carol.failWith(tool, map[string]any{"messageId": "MESSAGE:0190a0a0-0000-7000-8000-000000000000"}, "Message not found: MESSAGE:0190a0a0-0000-7000-8000-000000000000")
			carol.failWith(tool, map[string]any{"messageId": "not-an-id"}, "Message not found: not-an-id")
		})
	}
	t.Run("the outsider's array mark_read says the same", func(t *testing.T) {
		carol := carol.on(t)
		var r manyReceipt
		carol.ok("mark_read", map[string]any{"messageId": []string{id}}, &r)
		if len(r.Results) != 1 || r.Results[0].Status != "error" || r.Results[0].Error != "Message not found: "+id {
			t.Errorf("results = %+v", r.Results)
		}
	})
	t.Run("the sender may get but not mark or archive", func(t *testing.T) {
		alice := alice.on(t)
		if m := alice.get(id); m.Subject != "private" || m.ReadAt != nil {
			t.Errorf("sender's get_message: %+v", m)
		}
		alice.failWith("mark_read", map[string]any{"messageId": id}, "Not a recipient: "+id)
		alice.failWith("archive_message", map[string]any{"messageId": id}, "Not a recipient: "+id)
	})
	if row, _ := bob.inbox().find(id); row.ReadAt != nil || row.ArchivedAt != nil {
		t.Errorf("others' attempts changed bob's state: %+v", row)
	}
	t.Run("missing or empty messageId is an error", func(t *testing.T) {
		bob := bob.on(t)
		for _, tool := range []string{"get_message", "archive_message"} {
			bob.failWith(tool, map[string]any{}, "messageId is required")
			bob.failWith(tool, map[string]any{"messageId": ""}, "messageId must not be empty")
			bob.failWith(tool, map[string]any{"messageId": 5}, "messageId must be a string (got number)")
		}
	})
}

func TestBadInputLeavesTheStoreUntouched(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	alice, bob := e.as("alice"), e.as("bob")
	long := strings.Repeat("é", 201) // characters, not bytes
	cases := []struct {
		name string
		args any
		want string
	}{
		{"a 201-character subject", map[string]any{"to": "@bob", "subject": long, "body": "b"}, "subject is 201 characters; the limit is 200"},
		{"a body over 64 KiB", map[string]any{"to": "@bob", "subject": "s", "body": strings.Repeat("x", 64*1024+1)}, "body is 65537 bytes; the limit is 65536"},
		{"an empty subject", map[string]any{"to": "@bob", "subject": "  ", "body": "b"}, "subject must not be empty"},
		{"a missing body", map[string]any{"to": "@bob", "subject": "s"}, "body is required"},
		{"a missing to", map[string]any{"subject": "s", "body": "b"}, "to is required"},
		{"a number as subject", map[string]any{"to": "@bob", "subject": 5, "body": "b"}, "subject must be a string (got number)"},
		{"a lone surrogate in the body", json.RawMessage(`{"to":"@bob","subject":"s","body":"bad \ud800 text"}`), ""},
		{"a lone low surrogate in the subject", json.RawMessage(`{"to":"@bob","subject":"x\udc00","body":"b"}`), ""},
		{"a reversed surrogate pair", json.RawMessage(`{"to":"@bob","subject":"s","body":"\udc00\ud800"}`), ""},
		{"a lone surrogate in to", json.RawMessage(`{"to":["@bob","\ud800"],"subject":"s","body":"b"}`), ""},
		{"a lone surrogate in a concept", json.RawMessage(`{"to":"@bob","subject":"s","body":"b","taggedConcepts":["\ud83d"]}`), ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			alice := alice.on(t)
			msg := alice.fail("add_message", tc.args)
			if tc.want != "" && msg != tc.want {
				t.Errorf("error = %q, want %q", msg, tc.want)
			}
			if strings.Contains(tc.name, "surrogate") && !strings.Contains(msg, "UTF-8") {
				t.Errorf("error %q does not say the text is not valid UTF-8", msg)
			}
		})
	}
	if p := alice.list(map[string]any{"box": "all"}); p.TotalCount != 0 {
		t.Errorf("refused messages were stored: %v", subjects(alice, p))
	}
	if p := bob.list(nil); p.TotalCount != 0 {
		t.Errorf("refused messages were delivered: %v", subjects(bob, p))
	}

	t.Run("limits themselves are accepted", func(t *testing.T) {
		alice := alice.on(t)
		alice.send(map[string]any{"to": "@bob", "subject": strings.Repeat("é", 200), "body": strings.Repeat("x", 64*1024)})
		// A valid surrogate pair is an emoji, not an error.
		var r sendReceipt
		alice.ok("add_message", json.RawMessage(`{"to":"@bob","subject":"rocket \ud83d\ude80","body":"b"}`), &r)
		if m := alice.get(r.MessageID); m.Subject != "rocket 🚀" {
			t.Errorf("subject = %q", m.Subject)
		}
	})
	t.Run("a lone surrogate on another tool is an error too", func(t *testing.T) {
		alice := alice.on(t)
		msg := alice.fail("list_messages", json.RawMessage(`{"query":"\ud800"}`))
		if !strings.Contains(msg, "UTF-8") {
			t.Errorf("error = %q", msg)
		}
	})
}

func TestListingAndGettingNeverChangeReadState(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	alice, bob := e.as("alice"), e.as("bob")
	id := alice.sendTo("@bob", "look but do not touch")
	for range 3 {
		bob.list(nil)
		bob.list(map[string]any{"unreadOnly": true})
		bob.list(map[string]any{"query": "touch"})
		bob.get(id)
	}
	if got := bob.unread(); !slices.Equal(got, []string{id}) {
		t.Errorf("unread after listing and getting: %v", got)
	}
	if m := bob.get(id); m.ReadAt != nil {
		t.Errorf("get_message readAt = %v", m.ReadAt)
	}
}

func TestInMemoryStoreSaysItIsNotDurable(t *testing.T) {
	t.Parallel()
	e := newEnvWith(t, ":memory:", sqlite.Options{})
	alice, bob := e.as("alice"), e.as("bob")
	r := alice.send(map[string]any{"to": "@bob", "subject": "s", "body": "b"})
	if r.Durable {
		t.Errorf("add_message durable = true on :memory:")
	}
	var many manyReceipt
	other := alice.sendTo("@bob", "t")
	bob.ok("mark_read", map[string]any{"messageId": []string{other}}, &many)
	if many.Durable {
		t.Errorf("array mark_read durable = true")
	}
	d := bob.drain(nil)
	if d.Durable || d.DurableCount != 0 || d.Note == "" || d.ReadCount != 1 || d.MatchedCount != 1 || d.Status != "read" {
		t.Errorf("drain on :memory:: %+v", d)
	}
	if rr := bob.markRead(r.MessageID); rr.Durable {
		t.Errorf("scalar mark_read durable = true")
	}
	var ar archiveReceipt
	bob.ok("archive_message", map[string]any{"messageId": r.MessageID}, &ar)
	if ar.Durable {
		t.Errorf("archive durable = true")
	}
}
