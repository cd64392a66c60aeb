package sqlite

import (
	"context"
	"slices"
	"sync"
)

// maxNames bounds nameCache; past it the cache starts over.
const maxNames = 4096

// nameCache keeps identities' addresses by id for listings, which name a
// sender (and a role delivery's reader) on every row: a subquery per row
// was a tenth of a page's statement. Identities are only ever inserted
// (ensureIdentity; never renamed, deleted or given another kind, and ids are
// rowids that are never reused), so an entry never goes stale, and one
// another process added is read on its first miss.
type nameCache struct {
	mu sync.Mutex
	m  map[int64]string
}

// name sets names[i] to the address of identity ids[i], reading the ids
// it lacks in tx (one statement).
func (c *nameCache) name(ctx context.Context, tx *ptx, ids []int64, names []string) error {
	var missing []int64
	c.mu.Lock()
	for i, id := range ids {
		n, ok := c.m[id]
		if !ok && !slices.Contains(missing, id) {
			missing = append(missing, id)
		}
		names[i] = n
	}
	c.mu.Unlock()
	if len(missing) == 0 {
		return nil
	}
	rows, err := tx.QueryContext(ctx, `SELECT id, CASE kind WHEN 'human' THEN 'human:' || name ELSE '@' || name END
		FROM identity WHERE id IN (SELECT value FROM json_each(?))`, jsonInts(missing))
	if err != nil {
		return err
	}
	defer rows.Close()
	found := map[int64]string{}
	for rows.Next() {
		var id int64
		var name string
		if err := rows.Scan(&id, &name); err != nil {
			return err
		}
		found[id] = name
	}
	if err := rows.Err(); err != nil {
		return err
	}
	for i, id := range ids {
		if n, ok := found[id]; ok {
			names[i] = n
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil || len(c.m)+len(found) > maxNames {
		c.m = make(map[int64]string, len(found))
	}
	for id, name := range found {
		c.m[id] = name
	}
	return nil
}
