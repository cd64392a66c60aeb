package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/mailroom/mailroom"
)

// rowColumns reads a message row as the caller sees it, from box b (seq,
// did), message m and the caller's delivery d.
const rowColumns = `m.id, m.subject,
	(SELECT CASE s.kind WHEN 'human' THEN 'human:' || s.name ELSE '@' || s.name END FROM identity s WHERE s.id = m.sender_id),
	` + recipientsM + `,
	m.priority, m.created_at, ` + readAtD + `, d.archived_at, m.thread_id, m.retracted,
	(SELECT CASE r.kind WHEN 'human' THEN 'human:' || r.name ELSE '@' || r.name END FROM identity r WHERE r.id = ` + readByD + `)`

// recipientsM are message m's recipients, a JSON array in their order.
const recipientsM = `(SELECT json_group_array(address) FROM (SELECT address FROM message_to WHERE message_seq = m.seq ORDER BY position))`

// listColumns are rowColumns as List reads them: the sender and a role
// delivery's reader as identity ids, and no recipients, all three from the
// store's caches (nameRows), and readAt by the expression the branch needs.
func listColumns(readAt string) string {
	return listColumnsBy(readAt, readByD)
}

// listColumnsBy is listColumns with a role delivery's reader by the
// expression readBy.
func listColumnsBy(readAt, readBy string) string {
	return `m.id, m.subject, m.sender_id, m.priority, m.created_at, ` + readAt +
		`, d.archived_at, m.thread_id, m.retracted, ` + readBy
}

// outboxColumns are listColumns for a sent message: no delivery of the
// caller's, so no read state or archive.
const outboxColumns = `m.id, m.subject, m.sender_id, m.priority, m.created_at, NULL, NULL, m.thread_id, m.retracted, NULL`

// withRows makes a listing branch of (seq, did) select the row columns
// cols and seq instead, joining the message if it did not. A first page's
// merge then yields finished rows: reading (seq, did) first and each row's
// message and delivery again by key afterwards cost a third more. Only for
// pages without an offset: the merge computes the columns of every row it
// passes, skipped ones too.
func withRows(branch, cols string) string {
	const inbox, join, outbox = `SELECT d.message_seq AS seq, d.id AS did FROM delivery d`, ` JOIN message m ON m.seq = d.message_seq`,
		`SELECT m.seq AS seq, NULL AS did FROM message m`
	for _, w := range []struct{ walk, seq string }{{senderWalk, `m.seq`}, {addressWalk, `a.message_seq`}, {conceptWalk, `g.message_seq`}} {
		if rest, ok := strings.CutPrefix(branch, w.walk); ok {
			return `SELECT ` + cols + `, ` + w.seq + ` AS seq` + strings.TrimPrefix(w.walk, `SELECT `+w.seq+` AS seq, d.id AS did`) + rest
		}
	}
	if rest, ok := strings.CutPrefix(branch, inbox); ok {
		return `SELECT ` + cols + `, d.message_seq AS seq FROM delivery d` + join + strings.TrimPrefix(rest, join)
	}
	if rest, ok := strings.CutPrefix(branch, outbox); ok {
		return `SELECT ` + cols + `, m.seq AS seq FROM message m` + rest
	}
	panic("sqlite: withRows: not a listing branch")
}

func scanRow(sc interface{ Scan(...any) error }) (mailroom.Row, error) {
	return newRowScan().scan(sc)
}

// rowScan reads message rows (rowColumns, or listColumns with ids set,
// then extra columns) into one set of scan targets, made once per query: a
// page of 50 rows allocated some 600 of them, one per column per row,
// through the interfaces Scan takes.
type rowScan struct {
	r                mailroom.Row
	priority, to     string
	sent             string
	readAt, archived sql.NullString
	readBy           sql.NullString
	// With ids (listColumns), the row's sender and reader are identity
	// ids, named by the caller, who also fills in To.
	ids      bool
	senderID int64
	readByID sql.NullInt64
	dest     []any
}

func newRowScan(extra ...any) *rowScan {
	s := &rowScan{}
	s.dest = append([]any{&s.r.MessageID, &s.r.Subject, &s.r.From, &s.to, &s.priority, &s.sent, &s.readAt, &s.archived, &s.r.ThreadID, &s.r.Retracted, &s.readBy}, extra...)
	return s
}

// newListScan is newRowScan for listColumns.
func newListScan(extra ...any) *rowScan {
	s := &rowScan{ids: true}
	s.dest = append([]any{&s.r.MessageID, &s.r.Subject, &s.senderID, &s.priority, &s.sent, &s.readAt, &s.archived, &s.r.ThreadID, &s.r.Retracted, &s.readByID}, extra...)
	return s
}

// scan reads the current row of sc.
func (s *rowScan) scan(sc interface{ Scan(...any) error }) (mailroom.Row, error) {
	if err := sc.Scan(s.dest...); err != nil {
		return mailroom.Row{}, err
	}
	r := s.r
	r.Priority = mailroom.Priority(s.priority)
	if !s.ids {
		var err error
		if r.To, err = addresses(s.to); err != nil {
			return mailroom.Row{}, err
		}
	}
	r.SentAt = parseTS(s.sent)
	r.ReadAt, r.ArchivedAt = parseNullTS(s.readAt), parseNullTS(s.archived)
	if s.readBy.Valid && !s.ids {
		by := s.readBy.String
		r.ReadBy = &by
	}
	return r, nil
}

// addresses decodes the JSON array of addresses rowColumns selects. The
// addresses themselves are plain (mailroom.ParseAddress), so the array is
// split where it can be; anything else goes to encoding/json.
func addresses(to string) ([]string, error) {
	if inner, ok := strings.CutPrefix(to, "["); ok && strings.HasSuffix(inner, "]") && plain(to) {
		inner = inner[:len(inner)-1]
		if inner == "" {
			return []string{}, nil
		}
		if len(inner) >= 2 && inner[0] == '"' && inner[len(inner)-1] == '"' {
			// Without escapes every quote delimits: "a","b".
			list := strings.Split(inner[1:len(inner)-1], `","`)
			if !slices.ContainsFunc(list, func(a string) bool { return strings.Contains(a, `"`) }) {
				return list, nil
			}
		}
	}
	var list []string
	err := json.Unmarshal([]byte(to), &list)
	return list, err
}

// plain reports whether s is printable ASCII without backslashes: JSON
// strings made of it mean what they say.
func plain(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c > 0x7e || c == '\\' {
			return false
		}
	}
	return true
}

// unarchivedD is dcond of a listing that filters by nothing but the
// default archive state.
const unarchivedD = ` AND d.archived_at IS NULL`

// personalUnarchived is the personal branch's test of message seq for a
// listing filtered by nothing but the default archive state: the caller's
// delivery of it, from delivery_personal alone, and not an archived one,
// from the partial index of archived deliveries. The branch itself reads
// the delivery's row for its archived_at, a second seek into the large
// table, once per match a search examines (~10% of a selective search's
// instructions at 1,000,000 messages). A recipient has at most one
// personal delivery of a message (delivery_personal is unique), so the two
// say the same.
func personalUnarchived(seq string) string {
	return `(EXISTS (SELECT 1 FROM delivery d WHERE d.recipient_id = ?1 AND d.message_seq = ` + seq + `)
		AND NOT EXISTS (SELECT 1 FROM delivery d INDEXED BY delivery_archived WHERE d.recipient_id = ?1 AND d.message_seq = ` + seq + ` AND d.archived_at IS NOT NULL))`
}

// personalDelivery is personalUnarchived for a reader none of whose
// personal deliveries is archived: the delivery alone, without a probe of
// the archived index for each match (~8% of a selective search's walk).
func personalDelivery(seq string) string {
	return `EXISTS (SELECT 1 FROM delivery d WHERE d.recipient_id = ?1 AND d.message_seq = ` + seq + `)`
}

// inboxBranches returns the SELECTs of (seq, did) that make up the caller's
// inbox, one delivery per message, each cheap to run on its own index:
// personal deliveries, and role deliveries the caller sees (not their own
// role messages but a handoff to their own next session, not ones they also
// got personally, the oldest delivery when several of their roles got it of
// those the first rule lets through, as resolve picks it). ?1 is the
// caller's id and ?2 their roles (JSON). dcond and mcond are extra conditions on the delivery d and the
// message m; m is joined only when needed.
func inboxBranches(dcond, mcond string) []string {
	personal := `SELECT d.message_seq AS seq, d.id AS did FROM delivery d`
	if mcond != "" {
		personal += ` JOIN message m ON m.seq = d.message_seq`
	}
	// What the owner's read mark covers is read (mark.go).
	personal += ` WHERE d.recipient_id = ?1` + personalUnread(dcond) + mcond
	role := `SELECT d.message_seq AS seq, d.id AS did FROM delivery d JOIN message m ON m.seq = d.message_seq
		WHERE d.role IN (SELECT value FROM json_each(?2)) AND (m.sender_id <> ?1 OR d.role = ` + ownSuccessorRole("?1") + `)
		AND NOT EXISTS (SELECT 1 FROM delivery p WHERE p.recipient_id = ?1 AND p.message_seq = d.message_seq)` + olderRoleDelivery() + `
		AND NOT EXISTS (SELECT 1 FROM message_deleted x WHERE x.identity_id = ?1 AND x.message_seq = d.message_seq)` + roleUnread(dcond) + mcond
	return []string{personal, role}
}

// olderRoleDelivery is the role branch's test that no older delivery of
// the message to another of the caller's roles (?2) shows it first. A
// caller holding one role has no other: a queue holds a message once
// (delivery_role is unique).
func olderRoleDelivery() string {
	return `
		AND NOT EXISTS (SELECT 1 FROM delivery o WHERE o.message_seq = d.message_seq AND o.role IN (SELECT value FROM json_each(?2)) AND o.id < d.id
			AND (m.sender_id <> ?1 OR o.role = ` + ownSuccessorRole("?1") + `))`
}

// senderWalk, addressWalk and conceptWalk begin an inbox branch that walks
// the messages of the listing's sender (message_sender), to its address
// (message_to_address) or with one of its tags (message_concept_concept),
// newest first, and looks up the caller's delivery of each (drivenBy).
const (
	senderWalk  = `SELECT m.seq AS seq, d.id AS did FROM message m CROSS JOIN delivery d ON d.message_seq = m.seq`
	addressWalk = `SELECT a.message_seq AS seq, d.id AS did FROM message_to a CROSS JOIN delivery d ON d.message_seq = a.message_seq
		AND NOT EXISTS (SELECT 1 FROM message_to a2 WHERE a2.message_seq = a.message_seq AND a2.position < a.position AND a2.address = a.address)
		JOIN message m ON m.seq = d.message_seq`
	conceptWalk = `SELECT g.message_seq AS seq, d.id AS did FROM message_concept g CROSS JOIN delivery d ON d.message_seq = g.message_seq JOIN message m ON m.seq = d.message_seq`
)

// maxTagSides bounds the tags of a listing weighed by chooseWalk: each is
// a count of up to a mailbox's size.
const maxTagSides = 3

// drivenBy makes an inbox branch walk the messages walk begins with (cond,
// if any, selects them) rather than the mailbox; CROSS JOIN keeps the
// delivery after the walk in SQLite's loops. SQLite plans a statement once,
// not per sender or address, and walked the mailbox: agent-0's from:
// @agent-1 at 1M read 670k personal deliveries to count 37k, ~1 s, and to:
// role:reviewer at 100k went past the 100 ms CPU budget.
func drivenBy(branch, walk, cond string) string {
	rest, ok := strings.CutPrefix(branch, `SELECT d.message_seq AS seq, d.id AS did FROM delivery d JOIN message m ON m.seq = d.message_seq`)
	if !ok {
		panic("sqlite: drivenBy: not an inbox branch joining its message")
	}
	if cond != "" {
		rest = strings.Replace(rest, "WHERE ", "WHERE "+cond+" AND ", 1)
	}
	return walk + rest
}

// mailboxSizes returns the size of each inbox branch's mailbox of reader
// me (personal, then one per role in roles; personal and queues say which
// the listing reads, others are 0) under f's state, route and priority,
// from the counters. A walk of the smaller side costs the least, for a
// count as for a page (the matches are a share of either side), so a
// branch walks a filter's own index when it holds fewer messages than the
// branch's mailbox (drivenBy); sized by the listing's keys, an unread
// listing of a read mailbox walks its empty unread range, not a sender's
// mail.
func mailboxSizes(ctx context.Context, tx *ptx, f mailroom.ListFilter, me int64, roles []string, personal, queues bool) ([]int64, error) {
	args := []any{nil} // ?1: the mailbox
	var via, priority string
	if f.Via != "" {
		args = append(args, f.Via)
		via = "?" + itoa(len(args))
	}
	if f.Priority != "" {
		args = append(args, string(f.Priority))
		priority = "?" + itoa(len(args))
	}
	size := func(q string, box any) (n int64, err error) {
		args[0] = box
		err = tx.QueryRowContext(ctx, q, args...).Scan(&n)
		return n, err
	}
	sizes := make([]int64, 1+len(roles))
	var err error
	if personal {
		if sizes[0], err = size(personalCount(f, via, priority), me); err != nil {
			return nil, err
		}
	}
	if queues {
		for i, r := range roles {
			if sizes[i+1], err = size(`SELECT coalesce(sum(n), 0) FROM role_count WHERE role = ?1`+countKeys(f, `'role'`, via, priority), r); err != nil {
				return nil, err
			}
		}
	}
	return sizes, nil
}

// countUpTo counts the rows of SELECT 1 from (with one argument arg), at
// most limit of them.
func countUpTo(ctx context.Context, tx *ptx, from string, arg any, limit int64) (int64, error) {
	var k int64
	err := tx.QueryRowContext(ctx, `SELECT count(*) FROM (SELECT 1 `+from+` LIMIT ?)`, arg, limit).Scan(&k)
	return k, err
}

// walkSide is an index a listing's filter can walk instead of a mailbox:
// the walk (senderWalk, addressWalk or conceptWalk), its condition, and a
// count of its messages (from, the rest of a SELECT of them, with arg).
type walkSide struct {
	walk, cond, from string
	arg              any
}

// walkChoice is the side a listing walks and, per inbox branch, whether
// the branch walks it (none: every branch walks its mailbox).
type walkChoice struct {
	walkSide
	driven []bool
}

// chooseWalk weighs the sides of a listing by f against each inbox
// branch's mailbox (mailboxSizes): the side with the fewest messages, and
// the branches whose mailboxes hold more. Each count needs only to beat the
// best so far.
func chooseWalk(ctx context.Context, tx *ptx, f mailroom.ListFilter, me int64, roles []string, personal, queues bool, sides []walkSide) (walkChoice, error) {
	if len(sides) == 0 {
		return walkChoice{}, nil
	}
	sizes, err := mailboxSizes(ctx, tx, f, me, roles, personal, queues)
	if err != nil {
		return walkChoice{}, err
	}
	limit, best := slices.Max(sizes), -1
	var k int64
	for i, s := range sides {
		n, err := countUpTo(ctx, tx, s.from, s.arg, limit)
		if err != nil {
			return walkChoice{}, err
		}
		if best < 0 || n < k {
			best, k, limit = i, n, n
		}
		if k == 0 {
			break
		}
	}
	c := walkChoice{walkSide: sides[best]}
	for _, n := range sizes {
		c.driven = append(c.driven, k < n)
	}
	return c, nil
}

// perRole splits inboxBranches' role branch into one branch per role the
// caller holds (n of them; none for none). With all the roles in one IN
// list, SQLite must read and sort every delivery of those roles to find the
// newest few (0.4 s for a queue of 100,000); one role's deliveries come in
// seq order from the role index, so a page or the watermark stops early.
// Which of the caller's roles shows a message is still decided by the
// branch's own rule (the oldest delivery), so no message repeats.
func perRole(role string, n int) []string {
	const all = `d.role IN (SELECT value FROM json_each(?2))`
	if n == 0 {
		return nil
	}
	if !strings.Contains(role, all) {
		return []string{role} // unsplit: right, only slower
	}
	out := make([]string, n)
	for i := range out {
		r := perRoleName(i)
		out[i] = strings.Replace(role, all, `d.role = `+r, 1)
		// The role's mark as a constant of the statement: an unread
		// condition bounds the index range by it.
		out[i] = strings.ReplaceAll(out[i], roleMarkedThroughD, roleMarkOf(r))
	}
	return out
}

// perRoleName is the role of perRole's i-th branch, a constant of the
// statement.
func perRoleName(i int) string { return `json_extract(?2, '$[` + itoa(i) + `]')` }

// ownSuccessorRole is the SQL for the next-session-of-<self> role of the
// agent whose id is the parameter me: a handoff an agent leaves there is for
// its own next session, so it is the one role message that reaches its
// sender's inbox.
func ownSuccessorRole(me string) string {
	return `('next-session-of-' || (SELECT name FROM identity WHERE id = ` + me + ` AND kind = 'agent'))`
}

// outboxBranch selects (seq, did) of the caller's sent mail; with
// skipInbox it leaves out what the inbox branches already show.
func outboxBranch(mcond string, skipInbox bool) string {
	q := `SELECT m.seq AS seq, NULL AS did FROM message m WHERE m.sender_id = ?1
		AND NOT EXISTS (SELECT 1 FROM message_deleted x WHERE x.identity_id = ?1 AND x.message_seq = m.seq)` + mcond
	if skipInbox { // its personal copy, or its handoff to the caller's own next session
		q += ` AND NOT EXISTS (SELECT 1 FROM delivery p WHERE p.recipient_id = ?1 AND p.message_seq = m.seq)
		AND NOT EXISTS (SELECT 1 FROM delivery r WHERE r.role = ` + ownSuccessorRole("?1") + ` AND r.message_seq = m.seq
			AND r.role IN (SELECT value FROM json_each(?2)))`
	}
	return q
}

// List answers list_messages in one read snapshot: the page (a merge of
// index-ordered branches that stops after offset+limit rows), the total
// (a count per branch) and the watermark.
func (s *Store) List(ctx context.Context, f mailroom.ListFilter) (mailroom.Page, error) {
	me, err := mailroom.CallerFrom(ctx)
	if err != nil {
		return mailroom.Page{}, err
	}
	page := mailroom.Page{Messages: []mailroom.Row{}, TotalCountExact: true}
	var more bool // the page query found a row after the page
	err = s.read(ctx, func(tx *ptx) error {
		me, err := reader(ctx, tx, me, f.OfName, f.OfKind)
		if err != nil {
			return err
		}
		roles, err := rolesOf(ctx, tx, me)
		if err != nil {
			return err
		}
		rolesJSON := jsonStrings(roles)
		args := []any{me.ID, rolesJSON}
		param := func(v any) string {
			args = append(args, v)
			return "?" + strconv.Itoa(len(args))
		}
		var dcond, mcond string
		if f.ArchivedOnly {
			dcond += ` AND d.archived_at IS NOT NULL`
		} else if !f.IncludeArchived {
			dcond += ` AND d.archived_at IS NULL`
		}
		if f.UnreadOnly {
			dcond += ` AND d.read_at IS NULL`
		}
		var via, priority string // their parameters, which the count reuses
		if f.Via != "" {
			via = param(f.Via)
			dcond += ` AND d.via = ` + via
		}
		if f.Priority != "" {
			priority = param(string(f.Priority))
			mcond += ` AND m.priority = ` + priority
		}
		if f.FromHuman {
			mcond += ` AND m.sender_id IN (SELECT id FROM identity WHERE kind = 'human')`
		}
		if f.ThreadID != "" {
			mcond += ` AND m.thread_id = ` + param(f.ThreadID)
		}
		var sender int64 // the from filter's identity, 0 for none
		if f.FromMe {
			mcond += ` AND m.sender_id = ?1`
			sender = me.ID
		} else if f.FromName != "" {
			id, err := identityByName(ctx, tx, f.FromName)
			if err != nil || (f.FromKind != "" && id.Kind != f.FromKind) {
				if err == nil || mailroom.ErrorCode(err) == mailroom.ENOTFOUND {
					return mailroom.Errorf(mailroom.EINVALID, "from: unknown identity %s", mailroom.Identity{Name: f.FromName, Kind: f.FromKind}.Address())
				}
				return err
			}
			mcond += ` AND m.sender_id = ` + param(id.ID)
			sender = id.ID
		}
		if f.To == "@me" {
			f.To = me.Address() // rows hold resolved addresses
		}
		if name, kind, err := mailroom.ParseIdentityRef(f.To); f.To != "" && err == nil && name != "" {
			// Like from, an identity that does not exist is a mistake to
			// report, not an empty inbox; roles may be addressed before
			// anyone holds them.
			if id, err := identityByName(ctx, tx, name); mailroom.ErrorCode(err) == mailroom.ENOTFOUND || (err == nil && id.Kind != kind) {
				return mailroom.Errorf(mailroom.EINVALID, "to: unknown identity %s", f.To)
			} else if err != nil {
				return err
			}
		}
		// Outbox rows have no read state, archive or route of the
		// caller's, so listings by those have none of them.
		withOutbox := f.Box != mailroom.BoxInbox && !f.UnreadOnly && !f.ArchivedOnly && f.Via == ""
		var ocond string // outbox-only conditions
		// cf is the filter of the inbox side, which its counts answer.
		cf, toOwner := f.OwnersDirectMail(me)
		toMessage := ` AND EXISTS (SELECT 1 FROM message_to t WHERE t.message_seq = m.seq AND t.address = `
		var toParam string // the to filter's parameter on the inbox side
		switch {
		case toOwner:
			if withOutbox {
				ocond += toMessage + param(f.To) + `)`
			}
			if f.Via == "" {
				via = param(cf.Via)
				dcond += ` AND d.via = ` + via
			}
		case f.To != "":
			toParam = param(f.To)
			mcond += toMessage + toParam + `)`
		}
		// A cursor is a position in seq order: the page after it is the
		// same index range scan as a first page, at any depth.
		var dbefore, mbefore string
		if f.Before > 0 {
			p := param(f.Before)
			dbefore, mbefore = ` AND d.message_seq < `+p, ` AND m.seq < `+p
		}
		var search string // the full-text query's parameter, for a bounded search
		// unarchivedOnly: none of the reader's personal deliveries is
		// archived (a search knows it; see searchScopeOf).
		var unarchivedOnly bool
		if f.QueryEmpty {
			mcond += ` AND 0`
		} else if len(f.Search) > 0 && f.RelatedTo == "" {
			// The search's walk tests each match against every branch:
			// it leaves out what cannot match in this snapshot.
			sc, err := searchScopeOf(ctx, tx, me.ID, rolesJSON)
			if err != nil {
				return err
			}
			roles, args[1], unarchivedOnly = sc.live, jsonStrings(sc.live), !sc.archived
			q := textMatch(f.Search)
			narrow, err := s.searchNarrows(ctx, tx, me.ID, args[1].(string), f.Box)
			if err != nil {
				return err
			}
			if narrow {
				q += ` AND ` + audienceMatch(me.ID, roles, f.Box)
			}
			search = param(q)
		} else if len(f.Search) > 0 {
			// relatedTo bounds the candidates itself. On the delivery's
			// seq, so the personal branch need not read each match's
			// message row as well as its delivery.
			match := `IN (SELECT -rowid FROM message_fts WHERE message_fts MATCH ` + param(textMatch(f.Search)) + `)`
			dcond += ` AND d.message_seq ` + match
			ocond += ` AND m.seq ` + match
		}
		if len(f.Concepts) > 0 {
			// One condition for any number of tags (distinct, so a count
			// of len says every one is there): a statement whose size, and
			// planning time, grow with the tag list was most of the cost of
			// a 50-tag filter.
			mcond += ` AND (SELECT count(*) FROM message_concept c WHERE c.message_seq = m.seq AND c.concept_id IN (SELECT value FROM json_each(` +
				param(jsonStrings(f.Concepts)) + `))) = ` + param(len(f.Concepts))
		}
		var related string // the page's order: shared concepts first
		if f.RelatedTo != "" {
			t, err := resolve(ctx, tx, me, rolesJSON, f.RelatedTo)
			if err != nil {
				return err
			}
			related = param(t.seq)
			cs, err := strings1(ctx, tx, `SELECT concept_id FROM message_concept WHERE message_seq = ?`, t.seq)
			if err != nil {
				return err
			}
			mcond += ` AND m.seq <> ` + related + ` AND m.seq IN (` + relatedCandidates(cs, param) + `)`
		}
		// branches are the SELECTs of (seq, did) the listing unions, with
		// extra conditions on the inbox's delivery d and the outbox's
		// message m.
		nparts := 0
		if f.Box != mailroom.BoxOutbox {
			nparts = 1 + len(roles)
		}
		if withOutbox {
			nparts++
		}
		personal, queues := mailroom.ViaMailboxes(cf.Via) // the mailboxes that can hold the route
		othersMail := sender != 0 && sender != me.ID      // listed by a sender the caller's outbox cannot hold
		// The inbox branches that walk the filter's own index rather than
		// their mailbox (drivenBy), and that walk.
		var w walkChoice
		if search == "" && f.Box != mailroom.BoxOutbox {
			var sides []walkSide
			if sender != 0 {
				sides = append(sides, walkSide{senderWalk, ``, `FROM message WHERE sender_id = ?`, sender})
			}
			if toParam != "" {
				sides = append(sides, walkSide{addressWalk, `a.address = ` + toParam, `FROM message_to WHERE address = ?`, f.To})
			}
			for _, c := range f.Concepts[:min(len(f.Concepts), maxTagSides)] {
				sides = append(sides, walkSide{conceptWalk, ``, `FROM message_concept WHERE concept_id = ?`, c})
			}
			if w, err = chooseWalk(ctx, tx, cf, me.ID, roles, personal, queues, sides); err != nil {
				return err
			}
			if w.walk == conceptWalk { // the chosen tag is a parameter of its own
				w.cond = `g.concept_id = ` + param(w.arg)
			}
		}
		branches := func(dextra, mextra string) []string {
			var b []string
			if f.Box != mailroom.BoxOutbox {
				b = inboxBranches(dcond+dextra, mcond)
				b = append(b[:1], perRole(b[1], len(roles))...)
				// A branch that cannot hold the route asked for is skipped,
				// where its filter on via read every delivery it has
				// (agent-0's via: role page at 1M walked its 670k personal
				// deliveries, ~440 ms; via: direct its 100k review queue,
				// ~70 ms), and a role branch does not test the route.
				if !personal {
					b[0] += ` AND 0`
				}
				for i := 1; i < len(b); i++ {
					if !queues {
						b[i] += ` AND 0`
					} else if via != "" {
						b[i] = strings.Replace(b[i], ` AND d.via = `+via, ``, 1)
					}
				}
				for i, s := range w.driven {
					if s {
						b[i] = drivenBy(b[i], w.walk, w.cond)
					}
				}
			}
			if withOutbox {
				o := outboxBranch(mcond+ocond+mextra, f.Box == mailroom.BoxAll)
				if othersMail {
					o += ` AND 0` // the caller's sent mail is from the caller
				}
				b = append(b, o)
			}
			return b
		}
		// shape is what the statements' text depends on besides what
		// each adds (their values are all parameters).
		shape := strings.Join([]string{string(f.Box), strconv.FormatBool(withOutbox), itoa(len(roles)), dcond, mcond, ocond,
			strconv.FormatBool(personal), strconv.FormatBool(queues), fmt.Sprint(w.driven), w.walk, w.cond, strconv.FormatBool(othersMail)}, "\x00")
		// rowBranches are branches selecting the rows (listColumns) for
		// a page without an offset (withRows).
		rowBranches := func(dextra, mextra string) []string {
			b := branches(dextra, mextra)
			for i := range b {
				switch inbox := f.Box != mailroom.BoxOutbox; {
				case inbox && i == 0: // the personal branch: all the owner's
					b[i] = withRows(b[i], listColumns(readAtOwnerD))
				case inbox && i <= len(roles):
					// One role's branch (perRole): its mark is a
					// constant of the statement.
					if r := perRoleName(i - 1); strings.Contains(b[i], `d.role = `+r) {
						b[i] = withRows(b[i], listColumnsBy(roleReadAtOf(r), roleReadByOf(r)))
					} else {
						b[i] = withRows(b[i], listColumns(roleReadAtD))
					}
				default:
					b[i] = withRows(b[i], outboxColumns)
				}
			}
			return b
		}
		pdextra, pmextra := dbefore, mbefore // the page's conditions
		if nparts == 0 || search != "" {
			if page.Watermark, err = watermark(ctx, tx, me.ID, rolesJSON); err != nil {
				return err
			}
		}
		if nparts == 0 {
			return nil
		}
		offset := f.Offset
		if search != "" {
			// A bounded search (mailroom.Search): walk the words'
			// matches newest first, asking of each whether it is in the
			// listing, then read the page's rows by seq.
			mine := branches(` AND d.message_seq = w.seq`, ` AND m.seq = w.seq`)
			for i, b := range mine {
				mine[i] = `EXISTS (` + b + `)`
			}
			if f.Box != mailroom.BoxOutbox && len(roles) == 1 {
				mine[1] = strings.Replace(mine[1], olderRoleDelivery(), "", 1)
			}
			if f.Box != mailroom.BoxOutbox && dcond == unarchivedD && mcond == "" {
				if unarchivedOnly {
					mine[0] = personalDelivery(`w.seq`)
				} else {
					mine[0] = personalUnarchived(`w.seq`)
				}
			}
			// One statement keeps the caller's rows among the newest
			// matches (the FTS5 index steps newest first, as a co-routine
			// that stops at the scan bound); only when it finds fewer than
			// it needs does a second ask whether matches go on past the
			// scan. Handing every match to Go instead cost ~3 µs each.
			find := func(before int64, scan, need int) ([]int64, int64, error) {
				// The index's keys are -seq (ftsRowid): newest first is
				// its forward order, FTS5's cheaper one.
				matches := `SELECT -f.rowid AS seq FROM message_fts f WHERE message_fts MATCH ` + search
				if before > 0 {
					matches += ` AND f.rowid > ` + itoa(int(ftsRowid(before)))
				}
				matches += ` ORDER BY f.rowid`
				seqs, err := int64s(ctx, tx, `SELECT w.seq FROM (`+matches+` LIMIT `+itoa(scan)+`) w WHERE `+
					strings.Join(mine, " OR ")+` LIMIT `+itoa(need), args...)
				if err != nil || len(seqs) == need {
					return seqs, 0, err
				}
				past, err := int64s(ctx, tx, `SELECT seq FROM (`+matches+` LIMIT 2 OFFSET `+itoa(scan-1)+`)`, args...)
				if err != nil || len(past) < 2 {
					return seqs, 0, err
				}
				return seqs, past[0], nil
			}
			sp, err := mailroom.Search(f, find)
			if err != nil {
				return err
			}
			page.TotalCount, page.TotalCountExact, page.NextCursor = sp.Total, sp.Exact, sp.NextCursor
			seqs := sp.Seqs
			if len(seqs) == 0 {
				return nil
			}
			in := ` IN (SELECT value FROM json_each(` + param(jsonInts(seqs)) + `))`
			pdextra, pmextra, offset = ` AND d.message_seq`+in, ` AND m.seq`+in, 0
		} else {
			// From counts where f's filters are theirs: parts are the
			// personal branch, one branch per role (counted at once), then
			// the outbox's.
			fromCounts := f.Box != mailroom.BoxOutbox && counted(cf)
			pc, rk := personalCount(cf, via, priority), countKeys(cf, `'role'`, via, priority)
			q := s.text(shape+"\x00count\x00"+strconv.FormatBool(fromCounts)+pc+"\x00"+rk, func() string {
				var count strings.Builder
				count.WriteString(`SELECT 0`)
				for i, p := range branches("", "") {
					switch {
					case fromCounts && i == 0:
						count.WriteString(` + (` + pc + `)`)
					case fromCounts && i <= len(roles):
						// Role queues that cannot hold the route count none;
						// their candidates are the reader's (all of a hidden
						// queue's mail when they also get it personally).
						if i == 1 && queues {
							count.WriteString(` + ` + roleTotal(rk, dcond, mcond))
						}
					default:
						count.WriteString(` + (SELECT count(*) FROM (` + p + `))`)
					}
				}
				// The watermark rides along: as a statement of its own,
				// its fixed cost was about as much as its work.
				count.WriteString(`, (` + watermarkSQL(len(roles)) + `)`)
				return count.String()
			})
			// The count and page queries vary with the filters; each
			// connection keeps the shapes it ran prepared (stmtConn).
			var mark sql.NullString
			if err := tx.QueryRowContext(ctx, q, args...).Scan(&page.TotalCount, &mark); err != nil {
				return err
			}
			page.Watermark = nullString(mark)
		}
		if offset < page.TotalCount || search != "" {
			// One row more than the page says whether a next page exists.
			// (Unary plus: a bound LIMIT's value is not the plan's.)
			lim := param(f.Limit + 1)
			var q string
			switch {
			case related != "":
				q = `SELECT ` + listColumns(readAtD) + `, b.seq FROM (SELECT u.seq, u.did, (SELECT count(*) FROM message_concept x
						WHERE x.message_seq = u.seq AND x.concept_id IN (SELECT concept_id FROM message_concept WHERE message_seq = ` + related + `)) AS shared
					FROM (` + strings.Join(branches("", ""), " UNION ALL ") + `) u ORDER BY shared DESC, u.seq DESC LIMIT +` + lim + ` OFFSET +` + param(offset) + `) b
					JOIN message m ON m.seq = b.seq LEFT JOIN delivery d ON d.id = b.did ORDER BY b.shared DESC, b.seq DESC`
			case offset == 0:
				q = s.text(shape+"\x00rows\x00"+pdextra+"\x00"+pmextra+"\x00"+lim, func() string {
					return strings.Join(rowBranches(pdextra, pmextra), " UNION ALL ") + ` ORDER BY seq DESC LIMIT +` + lim
				})
			default:
				off := param(offset)
				q = s.text(shape+"\x00page\x00"+pdextra+"\x00"+pmextra+"\x00"+lim+"\x00"+off, func() string {
					return `SELECT ` + listColumns(readAtD) + `, b.seq FROM (` + strings.Join(branches(pdextra, pmextra), " UNION ALL ") +
						` ORDER BY seq DESC LIMIT +` + lim + ` OFFSET +` + off + `) b
					JOIN message m ON m.seq = b.seq LEFT JOIN delivery d ON d.id = b.did ORDER BY b.seq DESC`
				})
			}
			rows, err := tx.QueryContext(ctx, q, args...)
			if err != nil {
				return err
			}
			defer rows.Close()
			var seq, last int64
			sc := newListScan(&seq)
			page.Messages = make([]mailroom.Row, 0, f.Limit)
			ids := make([]int64, 0, f.Limit) // the rows' senders, each followed by its role reader
			seqs := make([]int64, 0, f.Limit)
			var readers []int // rows read by a role holder
			for rows.Next() {
				r, err := sc.scan(rows)
				if err != nil {
					return err
				}
				if len(page.Messages) == f.Limit {
					more = true
					if related == "" { // a cursor is a position in seq order
						c := mailroom.Cursor(last)
						page.NextCursor = &c
					}
					break
				}
				page.Messages = append(page.Messages, r)
				ids, seqs = append(ids, sc.senderID), append(seqs, seq)
				if sc.readByID.Valid {
					readers = append(readers, len(page.Messages)-1)
					ids = append(ids, sc.readByID.Int64)
				}
				last = seq
			}
			if err := rows.Err(); err != nil {
				return err
			}
			rows.Close() // before naming, which runs a statement of its own
			return s.nameRows(ctx, tx, page.Messages, ids, readers, seqs)
		}
		return nil
	})
	if err != nil {
		return mailroom.Page{}, err
	}
	if f.Before == 0 {
		total := page.TotalCount
		if more { // a search's lower bound may end at this page while rows follow
			total = max(total, f.Offset+len(page.Messages)+1)
		}
		page.NextOffset = mailroom.NextOffsetFor(f.Offset, len(page.Messages), total)
	}
	return page, nil
}

// counted reports whether mailbox_count answers the personal branch's count
// for f: it holds the caller's personal deliveries by archived and read
// state, route, priority and the sender's kind, and nothing finer.
func counted(f mailroom.ListFilter) bool {
	return f.ThreadID == "" && !f.FromMe && f.FromName == "" && f.To == "" && len(f.Search) == 0 && !f.QueryEmpty &&
		len(f.Concepts) == 0 && f.RelatedTo == ""
}

// personalCount is the count of the personal inbox branch under f's
// conditions, summed from mailbox_count (?1 is the reader's id; via and
// priority are the parameters of f's Via and Priority).
func personalCount(f mailroom.ListFilter, via, priority string) string {
	return `SELECT coalesce(sum(n), 0) FROM mailbox_count WHERE recipient_id = ?1` + countKeys(f, `via`, via, priority)
}

// countKeys are the conditions on a count table's keys that select the
// deliveries f lists; viaCol is the table's route (a column, or the one
// route it counts).
func countKeys(f mailroom.ListFilter, viaCol, via, priority string) string {
	q := ``
	if f.ArchivedOnly {
		q += ` AND archived = 1`
	} else if !f.IncludeArchived {
		q += ` AND archived = 0`
	}
	if f.UnreadOnly {
		q += ` AND unread = 1`
	}
	if via != "" {
		q += ` AND ` + viaCol + ` = ` + via
	}
	if priority != "" {
		q += ` AND priority = ` + priority
	}
	if f.FromHuman {
		q += ` AND human = 1`
	}
	return q
}

// RelatedScan bounds relatedTo: per concept of the message, only the
// RelatedScan newest messages carrying it are candidates, so a concept on
// every message costs the same as a rare one.
const RelatedScan = 1000

// relatedCandidates selects the seqs of messages sharing a concept in cs,
// the newest RelatedScan of each concept, through the concept index.
func relatedCandidates(cs []string, param func(any) string) string {
	if len(cs) == 0 {
		return `SELECT NULL WHERE 0`
	}
	parts := make([]string, len(cs))
	for i, c := range cs {
		parts[i] = `SELECT * FROM (SELECT message_seq FROM message_concept WHERE concept_id = ` + param(c) +
			` ORDER BY message_seq DESC LIMIT ` + itoa(RelatedScan) + `)`
	}
	return strings.Join(parts, " UNION ")
}

// reader returns whose mailbox a reading call reads (mailroom.Reader).
func reader(ctx context.Context, tx *ptx, me mailroom.Identity, of string, kind mailroom.Kind) (mailroom.Identity, error) {
	return mailroom.Reader(me, of, kind, byName(ctx, tx), func(owner mailroom.Identity) (bool, error) {
		var n int
		err := tx.QueryRowContext(ctx, `SELECT count(*) FROM read_grant WHERE grantee_id = ? AND owner_id = ?`, me.ID, owner.ID).Scan(&n)
		return n > 0, err
	})
}

// watermark returns the id of the newest message in the caller's inbox.
func watermark(ctx context.Context, tx *ptx, me int64, roles string) (*string, error) {
	var names []string
	if err := json.Unmarshal([]byte(roles), &names); err != nil {
		return nil, err
	}
	var id sql.NullString
	err := tx.QueryRowContext(ctx, watermarkSQL(len(names)), me, roles).Scan(&id)
	if err != nil && !isNoRows(err) {
		return nil, err
	}
	return nullString(id), nil
}

// watermarkSQL selects the id of the newest message in the inbox of ?1,
// who holds the n roles ?2 (JSON), or NULL.
func watermarkSQL(n int) string {
	b := inboxBranches("", "")
	b = append(b[:1], perRole(b[1], n)...)
	newest := make([]string, len(b))
	for i, q := range b {
		newest[i] = `SELECT * FROM (` + q + ` ORDER BY seq DESC LIMIT 1)`
	}
	return `SELECT m.id FROM message m WHERE m.seq = (SELECT max(seq) FROM (
		` + strings.Join(newest, " UNION ALL ") + `))`
}

func nullString(s sql.NullString) *string {
	if !s.Valid {
		return nil
	}
	return &s.String
}

func jsonStrings(list []string) string {
	if list == nil {
		list = []string{}
	}
	b, _ := json.Marshal(list)
	return string(b)
}

func itoa(i int) string { return strconv.Itoa(i) }

// int64s runs a listing query whose rows are one integer each.
func int64s(ctx context.Context, tx *ptx, q string, args ...any) ([]int64, error) {
	rows, err := tx.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []int64
	for rows.Next() {
		var v int64
		if err := rows.Scan(&v); err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	return out, rows.Err()
}
