package postgres

import (
	"context"
	"strconv"
	"strings"
	"time"
	"unicode"

	"github.com/jackc/pgx/v5"

	"github.com/mailroom/mailroom"
)

// rowColumns reads a message row as the caller sees it, from message m and
// the caller's delivery d (NULL when the caller only sent it); $1 is the
// mailbox owner (rowColumnsOf for another parameter).
var rowColumns = rowColumnsOf("$1")

func rowColumnsOf(owner string) string {
	return `m.id, m.subject,
	(SELECT CASE s.kind WHEN 'human' THEN 'human:' || s.name ELSE '@' || s.name END FROM identity s WHERE s.id = m.sender_id),
	ARRAY(SELECT t.address FROM message_to t WHERE t.message_seq = m.seq ORDER BY t.position),
	m.priority, m.created_at, ` + readAtOf(owner) + `, d.archived_at, m.thread_id, m.retracted,
	CASE WHEN d.via = 'role' THEN (SELECT CASE r.kind WHEN 'human' THEN 'human:' || r.name ELSE '@' || r.name END FROM identity r WHERE r.id = ` + readByD + `) END`
}

type scanner interface{ Scan(...any) error }

func scanRow(sc scanner, extra ...any) (mailroom.Row, error) {
	var r mailroom.Row
	var priority string
	var readAt, archived *time.Time
	dest := append([]any{&r.MessageID, &r.Subject, &r.From, &r.To, &priority, &r.SentAt, &readAt, &archived, &r.ThreadID, &r.Retracted, &r.ReadBy}, extra...)
	if err := sc.Scan(dest...); err != nil {
		return r, err
	}
	r.Priority = mailroom.Priority(priority)
	r.SentAt = r.SentAt.UTC()
	r.ReadAt, r.ArchivedAt = utc(readAt), utc(archived)
	return r, nil
}

func utc(t *time.Time) *time.Time {
	if t == nil {
		return nil
	}
	u := t.UTC()
	return &u
}

// inboxBranches returns the SELECTs of (seq, rcpt) that make up the
// caller's inbox, one delivery per message, each an index range on the
// delivery key (recipient, message_seq): personal deliveries, and role
// deliveries the caller sees (not their own role messages except their own
// successor's, not ones they also got personally, and the lowest mailbox
// when several of their roles got it). $1 is the caller's id, $2 their role
// mailboxes and $3 their own successor's mailbox. dcond and mcond are extra
// conditions on the delivery d and the message m; m is joined only when
// needed.
func inboxBranches(dcond, mcond string) []string {
	personal := `SELECT d.message_seq AS seq, d.recipient AS rcpt FROM delivery d`
	if mcond != "" {
		personal += ` JOIN message m ON m.seq = d.message_seq`
	}
	personal += ` WHERE d.recipient = $1` + personalUnread(dcond) + mcond
	role := `SELECT d.message_seq AS seq, d.recipient AS rcpt FROM delivery d ` + roleJoin + `
		WHERE ` + roleQueues + roleVisible + roleUnread(dcond) + mcond
	return []string{personal, role}
}

// roleQueues is inboxBranches' condition on the role queues.
const roleQueues = `d.recipient = ANY($2) AND `

// inboxBranchesFor is inboxBranches with the role branch split into one
// branch per role the caller holds (n of them; none without roles), each
// on one queue's key range (d.recipient = ($2)[i]), as sqlite's perRole:
// PostgreSQL cannot return an index range over recipient = ANY(...) in
// message_seq order, so an ordered, limited role branch walked every
// delivery newest first (delivery_message) filtering by recipient, far in
// a large store when the queues are small. Each split branch stops at the
// page. Its message is a probe of the message key per delivery (OFFSET 0):
// a merge join of the queue with message, both newest first, walked every
// message newer than the queue's newest. With byMessage (mcond has an index
// of its own to start from) the message is joined instead: probed per
// delivery, a holder's thread of one message read the whole queue, page and
// count (~0.9 s at 1M for a queue of 100k). The branches stay disjoint:
// roleVisible shows a message in the lowest of the caller's mailboxes that
// got it.
func inboxBranchesFor(dcond, mcond string, n int, byMessage bool) []string {
	b := inboxBranches(dcond, mcond)
	role := b[1]
	if !byMessage {
		role = strings.Replace(role, roleJoin, `CROSS JOIN LATERAL (SELECT * FROM message m WHERE m.seq = d.message_seq OFFSET 0) m`, 1)
	}
	out := []string{b[0]}
	for i := range n {
		out = append(out, roleBranchOf(role, i))
	}
	return out
}

// inboxWalkBranches is inboxBranchesFor for a walk of the inbox in seq
// order that stops at a page (each branch ordered and limited): each role
// branch tests its deliveries by probes of their keys (roleVisibleProbes).
// As anti-joins, the planner may answer them with a hash of the caller's
// whole personal mailbox and a sort of the whole queue (its estimate of
// the anti-joins' rows is far too low): a first page for a holder of a
// 100k queue with 670k personal deliveries cost ~0.5 s of server CPU at
// 1M, against ~3 ms walking the queue's key range (docs/benchmarks.md,
// "PostgreSQL pages of a large role queue").
func inboxWalkBranches(dcond, mcond string, n int, byMessage bool) []string {
	b := inboxBranchesFor(dcond, mcond, n, byMessage)
	for i := 1; i < len(b); i++ {
		b[i] = strings.Replace(b[i], roleVisible, roleVisibleProbes, 1)
	}
	return b
}

// roleBranchOf is the role branch b on the caller's i-th queue alone: its
// key range, and its queue's mark a constant of the statement (so an
// unread branch's range starts above the mark).
func roleBranchOf(b string, i int) string {
	q := `($2::bigint[])[` + strconv.Itoa(i+1) + `]`
	return strings.ReplaceAll(strings.Replace(b, roleQueues, `d.recipient = `+q+` AND `, 1), markOf("d.recipient"), markOf(q))
}

// roleJoin joins the role branch's delivery d with its message m.
const roleJoin = `JOIN message m ON m.seq = d.message_seq`

// roleVisible is the role branch's condition on a delivery d (of message
// m) in one of the caller's role queues: not the caller's own role message
// except to their own successor, not one they also got personally, not one
// an older delivery in another of their roles shows, not one they deleted.
var roleVisible = roleVisibleWith("")

// roleVisibleProbes is roleVisible for a few deliveries: OFFSET 0 keeps
// each NOT EXISTS a probe of its key per delivery, where the planner could
// otherwise make it an anti-join that walks the caller's whole mailbox in
// seq order to answer a walk that stops at the first row (a merge join).
var roleVisibleProbes = roleVisibleWith(" OFFSET 0")

func roleVisibleWith(end string) string {
	return `(m.sender_id <> $1 OR d.recipient = $3)
		AND NOT EXISTS (SELECT 1 FROM delivery p WHERE p.recipient = $1 AND p.message_seq = d.message_seq` + end + `)
		AND NOT EXISTS (SELECT 1 FROM delivery o WHERE o.recipient = ANY($2) AND o.message_seq = d.message_seq AND o.recipient < d.recipient
			AND (m.sender_id <> $1 OR o.recipient = $3)` + end + `)
		AND NOT EXISTS (SELECT 1 FROM message_deleted x WHERE x.identity_id = $1 AND x.message_seq = d.message_seq` + end + `)`
}

// roleCandidates selects (recipient, message_seq) of a superset of the
// caller's role deliveries that roleVisible leaves out (migration 0009):
// those of messages the caller sent, got personally (role_hint) or
// deleted, and every role delivery after its message's first (role_later).
// It costs what the caller's own activity costs, not their queues' size:
// each hinted message is one probe of the delivery key per held role
// (OFFSET 0 keeps the planner from turning the probes into a pass over the
// queues).
const roleCandidates = `SELECT c.recipient, c.message_seq FROM (
			SELECT h.message_seq FROM role_hint h WHERE h.identity_id = $1
			UNION SELECT x.message_seq FROM message_deleted x WHERE x.identity_id = $1) s
		CROSS JOIN LATERAL (SELECT d.recipient, d.message_seq FROM delivery d WHERE d.recipient = ANY($2) AND d.message_seq = s.message_seq OFFSET 0) c
	UNION SELECT l.recipient, l.message_seq FROM role_later l WHERE l.recipient = ANY($2)`

// roleHidden selects the candidate deliveries d (their keys, state and
// count keys) that the role branch leaves out; conditions on d's columns
// may follow. A delivery its queue's mark covers shows a read_at (not the
// mark's: only whether it is read counts here).
var roleHidden = `SELECT d.* FROM (` + roleCandidates + `) c CROSS JOIN LATERAL (
		SELECT d.recipient, d.message_seq, CASE WHEN ` + coveredD + ` THEN '-infinity'::timestamptz ELSE d.read_at END AS read_at, d.archived_at, d.via, d.priority, d.human
		FROM delivery d JOIN message m ON m.seq = d.message_seq
		WHERE d.recipient = c.recipient AND d.message_seq = c.message_seq AND NOT (` + roleVisibleProbes + `) OFFSET 0) d
	WHERE true`

// outboxBranch selects (seq, rcpt) of the caller's sent mail; with
// skipInbox it leaves out what the personal inbox branch already shows.
func outboxBranch(mcond string, skipInbox bool) string {
	return outboxBranchWith(mcond, skipInbox, "")
}

// outboxWalkBranch is outboxBranch for a walk in seq order that stops at
// a page: its tests are probes of their keys, as inboxWalkBranches' are.
func outboxWalkBranch(mcond string, skipInbox bool) string {
	return outboxBranchWith(mcond, skipInbox, " OFFSET 0")
}

func outboxBranchWith(mcond string, skipInbox bool, end string) string {
	q := `SELECT m.seq AS seq, NULL::bigint AS rcpt FROM message m WHERE m.sender_id = $1
		AND NOT EXISTS (SELECT 1 FROM message_deleted x WHERE x.identity_id = $1 AND x.message_seq = m.seq` + end + `)` + mcond
	if skipInbox { // its personal copy, or its handoff to the caller's own next session
		q += ` AND NOT EXISTS (SELECT 1 FROM delivery p WHERE p.recipient = $1 AND p.message_seq = m.seq` + end + `)
		AND NOT EXISTS (SELECT 1 FROM delivery r WHERE r.recipient = $3 AND r.message_seq = m.seq AND r.recipient = ANY($2)` + end + `)`
	}
	return q
}

// tsquery returns SQL for a tsquery matching every search term, with its
// words bound through param: the words are never parsed as tsquery syntax.
// Plain words go through plainto_tsquery (stemmed, ANDed, punctuation is a
// separator); a prefix term's last run of letters and digits becomes a
// prefix lexeme, which holds nothing but letters and digits.
func tsquery(terms []mailroom.SearchTerm, param func(any) string) string {
	var plain []string
	var parts []string
	for _, t := range terms {
		if !t.Prefix {
			plain = append(plain, t.Word)
			continue
		}
		runs := strings.FieldsFunc(t.Word, func(r rune) bool { return !unicode.IsLetter(r) && !unicode.IsDigit(r) })
		if len(runs) == 0 {
			plain = append(plain, t.Word)
			continue
		}
		plain = append(plain, runs[:len(runs)-1]...)
		parts = append(parts, `to_tsquery('mailroom', `+param(strings.ToLower(runs[len(runs)-1])+":*")+`)`)
	}
	if len(plain) > 0 {
		parts = append([]string{`plainto_tsquery('mailroom', ` + param(strings.Join(plain, " ")) + `)`}, parts...)
	}
	return "(" + strings.Join(parts, " && ") + ")"
}

// List answers list_messages in one read snapshot: the page (a merge of
// index-ordered branches that stops after offset+limit rows), the total and
// the watermark.
func (s *Store) List(ctx context.Context, f mailroom.ListFilter) (mailroom.Page, error) {
	me, err := mailroom.CallerFrom(ctx)
	if err != nil {
		return mailroom.Page{}, err
	}
	page := mailroom.Page{Messages: []mailroom.Row{}, TotalCountExact: true}
	var more bool // the page query found a row after the page
	err = s.read(ctx, func(tx pgx.Tx) error {
		page.Messages, page.TotalCountExact, page.NextCursor, more = page.Messages[:0], true, nil, false
		me, err := reader(ctx, tx, me, f.OfName, f.OfKind)
		if err != nil {
			return err
		}
		roles, err := rolesOf(ctx, tx, me)
		if err != nil {
			return err
		}
		args := []any{me.ID, roles.ids, roles.own}
		param := func(v any) string {
			args = append(args, v)
			return "$" + strconv.Itoa(len(args))
		}
		var dcond, mcond string
		if f.ArchivedOnly {
			dcond += ` AND d.archived_at IS NOT NULL`
		} else if !f.IncludeArchived {
			dcond += ` AND d.archived_at IS NULL`
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
		if f.UnreadOnly {
			dcond += ` AND d.read_at IS NULL`
		}
		if f.ThreadID != "" {
			mcond += ` AND m.thread_id = ` + param(f.ThreadID)
		}
		if f.FromMe {
			mcond += ` AND m.sender_id = $1`
		} else if f.FromName != "" {
			id, err := identityByName(ctx, tx, f.FromName)
			if err != nil || (f.FromKind != "" && id.Kind != f.FromKind) {
				if err == nil || mailroom.ErrorCode(err) == mailroom.ENOTFOUND {
					return mailroom.Errorf(mailroom.EINVALID, "from: unknown identity %s", mailroom.Identity{Name: f.FromName, Kind: f.FromKind}.Address())
				}
				return err
			}
			mcond += ` AND m.sender_id = ` + param(id.ID)
		}
		to := f.To
		if to == "@me" {
			to = me.Address() // rows hold resolved addresses
		}
		if name, kind, err := mailroom.ParseIdentityRef(to); to != "" && err == nil && name != "" {
			// Like from, an identity that does not exist is a mistake to
			// report, not an empty inbox; roles may be addressed before
			// anyone holds them.
			if id, err := identityByName(ctx, tx, name); mailroom.ErrorCode(err) == mailroom.ENOTFOUND || (err == nil && id.Kind != kind) {
				return mailroom.Errorf(mailroom.EINVALID, "to: unknown identity %s", to)
			} else if err != nil {
				return err
			}
		}
		// Outbox rows have no read state, archive or route of the
		// caller's, so listings by those have none of them.
		withOutbox := f.Box != mailroom.BoxInbox && !f.UnreadOnly && !f.ArchivedOnly && f.Via == ""
		var ocond string // conditions on the outbox branch alone
		// cf is the filter of the inbox side, which its counts answer.
		cf, toOwner := f.OwnersDirectMail(me)
		toMessage := ` AND EXISTS (SELECT 1 FROM message_to t WHERE t.message_seq = m.seq AND t.address = `
		switch {
		case toOwner:
			if withOutbox {
				ocond += toMessage + param(to) + `)`
			}
			if f.Via == "" {
				via = param(cf.Via)
				dcond += ` AND d.via = ` + via
			}
		case to != "":
			mcond += toMessage + param(to) + `)`
		}
		var search string // the text query, for a bounded search
		if f.QueryEmpty {
			mcond += ` AND false`
		} else if len(f.Search) > 0 && f.RelatedTo == "" {
			search = tsquery(f.Search, param)
		} else if len(f.Search) > 0 { // relatedTo bounds the candidates itself
			mcond += ` AND m.fts @@ ` + tsquery(f.Search, param)
		}
		if len(f.Concepts) > 0 {
			// One condition for any number of tags (distinct, so a count of
			// len says every one is there): one EXISTS per tag made the
			// planner search joins of up to 50 semi-joins per branch, seconds
			// of planning for a 50-tag filter on an empty store.
			mcond += ` AND (SELECT count(*) FROM message_concept c WHERE c.message_seq = m.seq AND c.concept_id = ANY(` +
				param(f.Concepts) + `::text[])) = ` + param(len(f.Concepts))
		}
		var related string // the page's order: shared concepts first
		if f.RelatedTo != "" {
			t, err := resolve(ctx, tx, me, roles, f.RelatedTo)
			if err != nil {
				return err
			}
			related = param(t.seq)
			mcond += ` AND m.seq <> ` + related + ` AND m.seq IN (` + relatedCandidates(related) + `)`
		}
		personal, queues := mailroom.ViaMailboxes(cf.Via) // the mailboxes that can hold the route
		// A filter on the message with an index of its own to start from
		// (inboxBranchesFor): not a priority, the sender's kind, or tags
		// (a count per message).
		byMessage := f.ThreadID != "" || f.FromMe || f.FromName != "" || cf.To != "" || f.RelatedTo != ""
		// branches are the SELECTs of (seq, rcpt) the listing unions, with
		// extra conditions on the inbox's delivery d and the outbox's
		// message m.
		branches := func(dextra, mextra string, walk bool) []string {
			var b []string
			if f.Box != mailroom.BoxOutbox {
				// No role branch for a caller without roles.
				inbox := inboxBranchesFor
				if walk {
					inbox = inboxWalkBranches
				}
				b = inbox(dcond+dextra, mcond, len(roles.ids), byMessage)
				// A branch that cannot hold the route asked for is planned
				// away, where its filter on via read every delivery it has
				// (agent-0's via: role page at 1M walked 670k personal
				// deliveries, 121 ms; via: direct its 100k review queue, 64
				// ms), and a role branch does not test the route (the
				// planner took the test for a rare one and sorted the whole
				// queue). The personal branch keeps its test: a prepared
				// search page must reference every parameter.
				if !personal {
					b[0] += ` AND false`
				}
				for i := 1; i < len(b); i++ {
					if !queues {
						b[i] += ` AND false`
					} else if via != "" {
						b[i] = strings.Replace(b[i], ` AND d.via = `+via, ``, 1)
					}
				}
			}
			if withOutbox {
				outbox := outboxBranch
				if walk {
					outbox = outboxWalkBranch
				}
				b = append(b, outbox(mcond+ocond+mextra, f.Box == mailroom.BoxAll))
			}
			return b
		}
		parts := branches("", "", false)
		if page.Watermark, err = watermark(ctx, tx, me, roles); err != nil {
			return err
		}
		if len(parts) == 0 {
			return nil
		}
		// The listing queries vary with the filters: run them as unnamed
		// statements typed by their Go arguments rather than fill the
		// statement cache (an outbox listing leaves $2 and $3 unused).
		var pageParts []string
		var with string // a search page's CTE typing the words' parameters
		offset := f.Offset
		if search != "" {
			// A bounded search (mailroom.Search): walk the words'
			// matches newest first, asking of each whether it is in the
			// listing, then read the page's rows by seq.
			mine := branches(` AND d.message_seq = w.seq`, ` AND m.seq = w.seq`, false)
			for i, b := range mine {
				// OFFSET 0 keeps each a probe of the delivery key: without it
				// the planner may hash every delivery of the caller's (a
				// hashed subplan; it drops a LIMIT 1) to answer the probes.
				mine[i] = `EXISTS (` + b + ` OFFSET 0)`
			}
			plan, err := s.readSearchPlan(ctx, tx, me, roles, f)
			if err != nil {
				return err
			}
			find := searchFinder(ctx, tx, args, search, mine, plan)
			sp, err := mailroom.Search(f, find)
			if err != nil {
				return err
			}
			page.TotalCount, page.TotalCountExact, page.NextCursor = sp.Total, sp.Exact, sp.NextCursor
			seqs := sp.Seqs
			if len(seqs) == 0 {
				return nil
			}
			// The page's rows match (the search found them in this
			// snapshot), so the page does not test the words again: that
			// joined each personal row's message and matched its text
			// (51 probes of message_pkey for a page). The words'
			// parameters are still typed (the server must know every one
			// given), by a CTE nothing reads.
			with = `, q AS (SELECT ` + search + ` AS q)`
			p := param(seqs)
			pageParts, offset = branches(` AND d.message_seq = ANY(`+p+`::bigint[])`, ` AND m.seq = ANY(`+p+`::bigint[])`, false), 0
		} else {
			var count strings.Builder
			count.WriteString(`SELECT 0`)
			inboxParts := 0 // the personal branch and one per role
			if f.Box != mailroom.BoxOutbox {
				inboxParts = 1 + len(roles.ids)
			}
			for i, p := range parts {
				if i < inboxParts && counted(cf) {
					if i == 0 {
						count.WriteString(` + (` + counterCount(`= $1`, cf, via, priority) + `)`)
						continue
					}
					if i > 1 || !queues {
						// The first role branch counted every queue; queues
						// that cannot hold the route count none (their
						// candidates are the reader's: all of a hidden
						// queue's mail when they also get it personally).
						continue
					}
					// The role queues' counters, less the counted deliveries
					// the role branch leaves out; the conditions are the
					// branch's, on the delivery's own keys.
					hcond := dcond
					if priority != "" {
						hcond += ` AND d.priority = ` + priority
					}
					if f.FromHuman {
						hcond += ` AND d.human`
					}
					count.WriteString(` + (` + counterCount(`= ANY($2)`, cf, via, priority) + `) - (SELECT count(*) FROM (` + roleHidden + hcond + `) h)`)
					continue
				}
				count.WriteString(` + (SELECT count(*) FROM (` + p + `) b)`)
			}
			if err := tx.QueryRow(ctx, callerArgs+count.String(), exec(args)...).Scan(&page.TotalCount); err != nil {
				return err
			}
			if f.Offset >= page.TotalCount {
				return nil
			}
			// A cursor is a position in seq order: the page after it is
			// the same index range scan as a first page, at any depth. (Its
			// parameter comes after the count's, which does not use it.)
			switch {
			case f.Before > 0:
				p := param(f.Before)
				pageParts = branches(` AND d.message_seq < `+p, ` AND m.seq < `+p, true)
			case related == "": // a page in seq order walks each branch's index
				pageParts = branches("", "", true)
			default:
				pageParts = parts
			}
		}
		// One row more than the page says whether a next page exists.
		lim, off := param(f.Limit+1), param(offset)
		var q string
		if related != "" {
			q = callerArgs + `SELECT ` + rowColumns + `, b.seq FROM (SELECT u.seq, u.rcpt, (SELECT count(*) FROM message_concept x
					WHERE x.message_seq = u.seq AND x.concept_id IN (SELECT concept_id FROM message_concept WHERE message_seq = ` + related + `)) AS shared
				FROM (` + strings.Join(parts, " UNION ALL ") + `) u ORDER BY shared DESC, u.seq DESC LIMIT ` + lim + ` OFFSET ` + off + `) b
				JOIN message m ON m.seq = b.seq LEFT JOIN delivery d ON d.recipient = b.rcpt AND d.message_seq = b.seq ORDER BY b.shared DESC, b.seq DESC`
		} else {
			end := param(f.Offset + f.Limit + 1)
			branches := make([]string, len(pageParts))
			for i, p := range pageParts {
				// Each branch stops after offset+limit rows of its own index.
				branches[i] = `(` + p + ` ORDER BY seq DESC LIMIT ` + end + `)`
			}
			q = callerArgs + with + ` SELECT ` + rowColumns + `, b.seq FROM (SELECT * FROM (` + strings.Join(branches, " UNION ALL ") + `) u ORDER BY seq DESC LIMIT ` + lim + ` OFFSET ` + off + `) b
			JOIN message m ON m.seq = b.seq LEFT JOIN delivery d ON d.recipient = b.rcpt AND d.message_seq = b.seq
			ORDER BY b.seq DESC`
		}
		qargs := exec(args)
		if search != "" {
			// A search's page reads the rows of the seqs it found: the text
			// is the same for every search of one shape, and its plan (each
			// branch probes the given seqs) does not depend on the values,
			// so it is a prepared statement, and after five custom plans the
			// server keeps a generic one: planning it cost more than running
			// it (a 51-row page at 1M: 2.5-3 ms of server CPU to plan, 1.5-2
			// to run).
			qargs = args
		}
		rows, err := tx.Query(ctx, q, qargs...)
		if err != nil {
			return err
		}
		defer rows.Close()
		var seq, last int64
		for rows.Next() {
			r, err := scanRow(rows, &seq)
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
			last = seq
			page.Messages = append(page.Messages, r)
		}
		return rows.Err()
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

// counted reports whether mailbox_count answers the inbox branches' counts
// for f: it holds each mailbox's deliveries (the caller's and each role
// queue's) by archived and read state, route, priority and the sender's
// kind, and nothing finer.
func counted(f mailroom.ListFilter) bool {
	return f.ThreadID == "" && !f.FromMe && f.FromName == "" && f.To == "" && len(f.Search) == 0 && !f.QueryEmpty &&
		len(f.Concepts) == 0 && f.RelatedTo == ""
}

// counterCount is the count of the deliveries in the mailboxes recipient
// selects (= $1: the reader's; = ANY($2): their role queues') under f's
// conditions, summed from mailbox_count (via and priority are the
// parameters of f's Via and Priority).
func counterCount(recipient string, f mailroom.ListFilter, via, priority string) string {
	q := `SELECT coalesce(sum(n), 0)::bigint FROM mailbox_count WHERE recipient ` + recipient
	if f.ArchivedOnly {
		q += ` AND archived`
	} else if !f.IncludeArchived {
		q += ` AND NOT archived`
	}
	if f.UnreadOnly {
		q += ` AND unread`
	}
	if via != "" {
		q += ` AND via = ` + via
	}
	if priority != "" {
		q += ` AND priority = ` + priority
	}
	if f.FromHuman {
		q += ` AND human`
	}
	return q
}

// RelatedScan bounds relatedTo: per concept of the message, only the
// RelatedScan newest messages carrying it are candidates, so a concept on
// every message costs the same as a rare one.
const RelatedScan = 1000

// relatedCandidates selects the seqs of messages sharing a concept with the
// message whose seq is the parameter seq, the newest RelatedScan of each
// concept, through the concept index.
func relatedCandidates(seq string) string {
	return `SELECT r.message_seq FROM message_concept c CROSS JOIN LATERAL (SELECT x.message_seq FROM message_concept x
		WHERE x.concept_id = c.concept_id ORDER BY x.message_seq DESC LIMIT ` + strconv.Itoa(RelatedScan) + `) r WHERE c.message_seq = ` + seq
}

// reader returns whose mailbox a reading call reads (mailroom.Reader).
func reader(ctx context.Context, q querier, me mailroom.Identity, of string, kind mailroom.Kind) (mailroom.Identity, error) {
	return mailroom.Reader(me, of, kind, byName(ctx, q), func(owner mailroom.Identity) (bool, error) {
		var granted bool
		err := q.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM read_grant WHERE grantee_id = $1 AND owner_id = $2)`, me.ID, owner.ID).Scan(&granted)
		return granted, err
	})
}

// watermark returns the id of the newest message in the caller's inbox.
func watermark(ctx context.Context, tx pgx.Tx, me mailroom.Identity, roles roleSet) (*string, error) {
	b := inboxWalkBranches("", "", len(roles.ids), false)
	for i := range b {
		b[i] = `(` + b[i] + ` ORDER BY d.message_seq DESC LIMIT 1)`
	}
	var id *string
	err := tx.QueryRow(ctx, callerArgs+`SELECT m.id FROM message m WHERE m.seq = (SELECT max(seq) FROM (
		`+strings.Join(b, " UNION ALL ")+`) w)`, me.ID, roles.ids, roles.own).Scan(&id)
	if isNoRows(err) {
		return nil, nil
	}
	return id, err
}

// callerArgs types the caller parameters every inbox query takes ($1 the
// caller, $2 their role mailboxes, $3 their successor mailbox), so that a
// query that leaves some unused (an outbox listing) still prepares.
const callerArgs = `WITH caller AS (SELECT $1::bigint AS me, $2::bigint[] AS roles, $3::bigint AS own) `

// descending reports whether seqs are in strictly descending order.
func descending(seqs []int64) bool {
	for i := 1; i < len(seqs); i++ {
		if seqs[i] >= seqs[i-1] {
			return false
		}
	}
	return true
}

// exec prefixes args with the unnamed-statement mode.
func exec(args []any) []any { return append([]any{pgx.QueryExecModeExec}, args...) }

// int64s runs a listing query whose rows are one integer each.
func int64s(ctx context.Context, tx pgx.Tx, q string, args []any) ([]int64, error) {
	rows, err := tx.Query(ctx, q, exec(args)...)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, pgx.RowTo[int64])
}
