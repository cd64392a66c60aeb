package sqlite

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"strings"

	"github.com/mailroom/mailroom"
)

// ftsQuery renders search terms as a safe FTS5 query: each word becomes a
// quoted phrase (so operators, quotes and punctuation are plain text), all
// words must match, and a prefix term keeps its trailing *. It returns ""
// for no terms.
func ftsQuery(terms []mailroom.SearchTerm) string {
	parts := make([]string, 0, len(terms))
	for _, t := range terms {
		p := `"` + strings.ReplaceAll(t.Word, `"`, `""`) + `"`
		if t.Prefix {
			p += "*"
		}
		parts = append(parts, p)
	}
	return strings.Join(parts, " ")
}

// textMatch is the FTS5 query for search terms in a message's text: its
// subject and body, never its audience column.
func textMatch(terms []mailroom.SearchTerm) string {
	return `{subject body} : (` + ftsQuery(terms) + `)`
}

// ftsRowid is message seq's key in the full-text index (migration 0015):
// its negation, so that FTS5 walks a search's matches newest first in its
// forward order (stepping a doclist backwards re-parses each page it
// enters; ~40% of the walk's instructions at 1,000,000 messages).
func ftsRowid(seq int64) int64 { return -seq }

// The audience tokens of a message's full-text row (migration 0013): who
// it reaches, fixed at send time, so that a search asks FTS5 only for
// matches a listing of the caller can show.
func senderToken(id int64) string    { return "s" + itoa(int(id)) }
func recipientToken(id int64) string { return "r" + itoa(int(id)) }
func roleToken(role string) string   { return "q" + hex.EncodeToString([]byte(role)) + "0" }

const broadcastToken = "b"

// audience is the tokens of a message p plans from sender: the sender, each
// direct recipient, b for a broadcast, each role queue.
func (p sendPlan) audience(sender int64) string {
	t := []string{senderToken(sender)}
	for _, r := range p.direct {
		t = append(t, recipientToken(r.id))
	}
	if p.broadcast {
		t = append(t, broadcastToken)
	}
	for _, r := range p.roles {
		t = append(t, roleToken(r))
	}
	return strings.Join(t, " ")
}

// audienceMatch is the FTS5 condition for the messages a listing of box
// for me (holding roles) may show: the inbox's personal branch shows mail
// to me (direct or broadcast), its role branches the queues of roles, the
// outbox what me sent. It narrows the candidates only; the listing's own
// branches still decide.
func audienceMatch(me int64, roles []string, box mailroom.Box) string {
	var t []string
	if box != mailroom.BoxOutbox {
		t = append(t, `"`+recipientToken(me)+`"`, `"`+broadcastToken+`"`)
		for _, r := range roles {
			t = append(t, `"`+roleToken(r)+`"`)
		}
	}
	if box != mailroom.BoxInbox {
		t = append(t, `"`+senderToken(me)+`"`)
	}
	return `audience : (` + strings.Join(t, " OR ") + `)`
}

// searchNarrows says whether a search of box for me (holding the roles in
// rolesJSON) should ask FTS5 for the caller's audience tokens as well as
// the words. The tokens cost FTS5 ~2.7 µs per match it keeps (merging the
// caller's token lists), and save the listing's own test (~4.6 µs) of each
// match they drop: worth it unless the caller is sent most of the store
// (measured at 1M: agent-5, sent 7%, 39 -> 8 ms per search; agent-0, sent
// about 80%, 6.5 -> 8.3 ms with them). Either way the listing's branches
// decide what shows; the counts make the guess cheap.
func (s *Store) searchNarrows(ctx context.Context, tx *ptx, me int64, rolesJSON string, box mailroom.Box) (bool, error) {
	if box == mailroom.BoxOutbox || s.narrowAll {
		return true, nil
	}
	var mine, all int64
	err := tx.QueryRowContext(ctx, `SELECT (SELECT coalesce(sum(n), 0) FROM mailbox_count WHERE recipient_id = ?1)
		+ (SELECT coalesce(sum(n), 0) FROM role_count WHERE role IN (SELECT value FROM json_each(?2))),
		(SELECT coalesce(max(seq), 0) FROM message)`, me, rolesJSON).Scan(&mine, &all)
	return 2*mine < all, err
}

// searchScope is what a search's walk may leave out, read in the walk's
// own snapshot. A role whose queue holds no delivery at all can show
// nothing: its branch and its audience token go (each costs a seek per
// match the walk tests, its token FTS5's set-up in every segment; every
// agent holds two implicit roles, often empty). A reader none of whose
// personal deliveries is archived passes the default archive filter with
// every one of them.
type searchScope struct {
	live     []string // the reader's roles that have a delivery, in order
	archived bool     // the reader has an archived personal delivery
}

// searchScopeOf reads the search scope of reader me holding the roles in
// rolesJSON: a seek per role and one in the archived index.
func searchScopeOf(ctx context.Context, tx *ptx, me int64, rolesJSON string) (searchScope, error) {
	var sc searchScope
	var live string
	err := tx.QueryRowContext(ctx, `SELECT
		(SELECT json_group_array(r.value) FROM json_each(?2) r WHERE EXISTS (SELECT 1 FROM delivery d WHERE d.role = r.value)),
		EXISTS (SELECT 1 FROM delivery d INDEXED BY delivery_archived WHERE d.recipient_id = ?1 AND d.archived_at IS NOT NULL)`,
		me, rolesJSON).Scan(&live, &sc.archived)
	if err != nil {
		return sc, err
	}
	if err := json.Unmarshal([]byte(live), &sc.live); err != nil {
		return sc, err
	}
	return sc, nil
}
