package sqlite

import (
	"cmp"
	"context"
	"slices"
	"sync"

	"github.com/mailroom/mailroom"
)

// A listing names a sender (and a role delivery's reader) and lists the
// recipients on every row; as subqueries per row they were half of a
// page's statement. What they read never changes once written, so List
// keeps it in two bounded caches, filled in the listing's own transaction:
//
//   - identities are only ever inserted (ensureIdentity: never renamed,
//     deleted or given another kind; ids are rowids, never reused);
//   - a message's recipients are written with it (send.go, bulk.go) and
//     only purged with it, and message ids are UUIDv7s, never reused.
//
// An entry never goes stale, and what another process added is read on its
// first miss.
type frozen[K comparable, V any] struct {
	mu  sync.Mutex
	m   map[K]V
	max int // past it the cache starts over; 0 for maxFrozen
}

// maxFrozen bounds a cache by default.
const maxFrozen = 8192

func (c *frozen[K, V]) get(k K) (V, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	v, ok := c.m[k]
	return v, ok
}

func (c *frozen[K, V]) put(found map[K]V) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil || len(c.m)+len(found) > cmp.Or(c.max, maxFrozen) {
		c.m = make(map[K]V, len(found))
	}
	for k, v := range found {
		c.m[k] = v
	}
}

// nameRows sets each row's From and, where the row has one, ReadBy (both
// identity ids in ids: the rows' senders in row order, each followed by
// its row's reader if readers lists the row), and each row's To (seqs are
// the rows' message seqs).
func (s *Store) nameRows(ctx context.Context, tx *ptx, rows []mailroom.Row, ids []int64, readers []int, seqs []int64) error {
	names := make([]string, len(ids))
	var missing []int64
	for i, id := range ids {
		n, ok := s.names.get(id)
		if !ok && !slices.Contains(missing, id) {
			missing = append(missing, id)
		}
		names[i] = n
	}
	if len(missing) > 0 {
		found := map[int64]string{}
		if err := scanRows(ctx, tx, `SELECT id, CASE kind WHEN 'human' THEN 'human:' || name ELSE '@' || name END
			FROM identity WHERE id IN (SELECT value FROM json_each(?))`, jsonInts(missing), func(id int64, name string) { found[id] = name }); err != nil {
			return err
		}
		s.names.put(found)
		for i, id := range ids {
			if n, ok := found[id]; ok {
				names[i] = n
			}
		}
	}
	j, k := 0, 0
	for i := range rows {
		rows[i].From = names[j]
		j++
		if k < len(readers) && readers[k] == i {
			by := names[j]
			rows[i].ReadBy = &by
			j, k = j+1, k+1
		}
	}

	var want []int64 // seqs of the rows whose recipients are not cached
	for i := range rows {
		if to, ok := s.recipients.get(rows[i].MessageID); ok {
			rows[i].To = slices.Clone(to) // the row is the caller's to change
		} else {
			want = append(want, seqs[i])
		}
	}
	if len(want) == 0 {
		return nil
	}
	to := make(map[int64][]string, len(want))
	if err := scanRows(ctx, tx, `SELECT message_seq, address FROM message_to WHERE message_seq IN (SELECT value FROM json_each(?))
		ORDER BY message_seq, position`, jsonInts(want), func(seq int64, a string) { to[seq] = append(to[seq], a) }); err != nil {
		return err
	}
	byID := make(map[string][]string, len(want))
	for i := range rows {
		if rows[i].To == nil {
			rows[i].To = to[seqs[i]]
			if rows[i].To == nil {
				rows[i].To = []string{}
			}
			byID[rows[i].MessageID] = slices.Clone(rows[i].To)
		}
	}
	s.recipients.put(byID)
	return nil
}

// scanRows runs q (a statement of the store's own, with one parameter)
// and hands each row's two columns to row.
func scanRows[A, B any](ctx context.Context, tx *ptx, q string, arg any, row func(A, B)) error {
	rows, err := tx.QueryContext(ctx, q, arg)
	if err != nil {
		return err
	}
	defer rows.Close()
	var a A
	var b B
	for rows.Next() {
		if err := rows.Scan(&a, &b); err != nil {
			return err
		}
		row(a, b)
	}
	return rows.Err()
}

// maxTexts bounds Store.texts: a listing statement's text is a few KB,
// and a store sees a few dozen shapes.
const maxTexts = 512

// text returns the listing statement key names, built on a miss: building
// the text of a page and its count (a branch per held role, each rewritten
// from inboxBranches) was a tenth of a page's CPU. The key holds everything
// the text depends on; values are always parameters.
func (s *Store) text(key string, build func() string) string {
	if q, ok := s.texts.get(key); ok {
		return q
	}
	q := build()
	s.texts.put(map[string]string{key: q})
	return q
}
