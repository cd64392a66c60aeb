package sqlite

import (
	"context"
	"database/sql"
	"sync"
	"time"

	"github.com/mailroom/mailroom"
)

// maxCachedStmts bounds the statement cache: the store's fixed queries fit
// many times over, and listings with unusual filter mixes run unprepared.
const maxCachedStmts = 352

// maxListingStmts bounds the listing queries among them: a listing's text
// depends only on which filters it has and how many roles the reader holds
// (values are parameters), and parsing and planning one of those UNION
// statements (2-6 ms) costs more than running it on a small inbox. A mix
// of readers and filters passed 32 shapes (the store suite's role-count
// walk uses ~110); a prepared listing holds ~44 KB on each connection that
// ran it, so 128 is at most ~6 MB a connection.
const maxListingStmts = 128

// stmtCache keeps the store's statements prepared, so a send does not parse
// and plan a dozen statements each time. database/sql keeps one prepared copy
// per connection under each *sql.Stmt.
type stmtCache struct {
	mu       sync.Mutex
	stmts    map[string]*sql.Stmt
	wanted   map[string]bool // seen in a transaction, prepared after it; true for a listing
	listings int             // listing statements in stmts
}

// ptx is a transaction whose statements come from the cache. A statement
// not yet cached runs as is and is prepared once the transaction ends: an
// in-memory store has a single connection, which the transaction holds.
type ptx struct {
	*sql.Tx
	c     *stmtCache
	local map[string]*sql.Stmt           // this transaction's copies, made once each
	now   func() time.Time               // the store's clock
	trace func(query string, args []any) // Hooks.Statement

	// change is whose inboxes the transaction touches, declared by its
	// writes (see touch); undeclared means anyone's.
	change   mailroom.Change
	declared bool
}

// stmt returns the transaction's prepared statement for query, or nil.
// One statement serves every use of its query in the transaction, so no
// caller may run a query again while iterating that query's own rows.
func (t *ptx) stmt(ctx context.Context, query string) *sql.Stmt {
	return t.stmtOf(ctx, query, false)
}

// stmtOf is stmt, for a listing query if listing.
func (t *ptx) stmtOf(ctx context.Context, query string, listing bool) *sql.Stmt {
	if st, ok := t.local[query]; ok {
		return st
	}
	t.c.mu.Lock()
	st, ok := t.c.stmts[query]
	if !ok && len(t.c.stmts)+len(t.c.wanted) < maxCachedStmts && (!listing || t.c.listings < maxListingStmts) {
		t.c.wanted[query] = listing
	}
	t.c.mu.Unlock()
	if !ok {
		return nil
	}
	if t.local == nil {
		t.local = map[string]*sql.Stmt{}
	}
	t.local[query] = t.Tx.StmtContext(ctx, st)
	return t.local[query]
}

// ExecContext runs query through its prepared statement when there is one.
func (t *ptx) ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error) {
	t.traced(query, args)
	if st := t.stmt(ctx, query); st != nil {
		return st.ExecContext(ctx, args...)
	}
	return t.Tx.ExecContext(ctx, query, args...)
}

// QueryRowContext runs query through its prepared statement when there is one.
func (t *ptx) QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row {
	t.traced(query, args)
	if st := t.stmt(ctx, query); st != nil {
		return st.QueryRowContext(ctx, args...)
	}
	return t.Tx.QueryRowContext(ctx, query, args...)
}

// QueryContext runs query through its prepared statement when there is one.
func (t *ptx) QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error) {
	t.traced(query, args)
	if st := t.stmt(ctx, query); st != nil {
		return st.QueryContext(ctx, args...)
	}
	return t.Tx.QueryContext(ctx, query, args...)
}

// queryRowUncached runs a listing query, whose text varies with its
// filters: prepared from the cache if its shape is among the first
// maxListingStmts seen, else unprepared, so that unusual filter mixes do
// not fill the cache.
func (t *ptx) queryRowUncached(ctx context.Context, query string, args ...any) *sql.Row {
	t.traced(query, args)
	if st := t.stmtOf(ctx, query, true); st != nil {
		return st.QueryRowContext(ctx, args...)
	}
	return t.Tx.QueryRowContext(ctx, query, args...)
}

// queryUncached is queryRowUncached for many rows.
func (t *ptx) queryUncached(ctx context.Context, query string, args ...any) (*sql.Rows, error) {
	t.traced(query, args)
	if st := t.stmtOf(ctx, query, true); st != nil {
		return st.QueryContext(ctx, args...)
	}
	return t.Tx.QueryContext(ctx, query, args...)
}

// queryRowScan runs a one-row query outside any transaction through the
// statement cache and scans it into dest.
func (s *Store) queryRowScan(ctx context.Context, query string, args []any, dest ...any) error {
	c := &s.cache
	c.mu.Lock()
	st, ok := c.stmts[query]
	if !ok && len(c.stmts)+len(c.wanted) < maxCachedStmts {
		c.wanted[query] = false
	}
	c.mu.Unlock()
	if ok {
		return st.QueryRowContext(ctx, args...).Scan(dest...)
	}
	err := s.db.QueryRowContext(ctx, query, args...).Scan(dest...)
	s.prepareWanted(ctx)
	return err
}

func (t *ptx) traced(query string, args []any) {
	if t.trace != nil {
		t.trace(query, args)
	}
}

// prepareWanted prepares the statements transactions asked for. It runs
// outside any transaction, so it can always get a connection.
func (c *stmtCache) prepareWanted(ctx context.Context, db *sql.DB) {
	c.mu.Lock()
	todo := map[string]bool{}
	for q, listing := range c.wanted {
		todo[q] = listing
	}
	clear(c.wanted)
	c.mu.Unlock()
	for q, listing := range todo {
		st, err := db.PrepareContext(ctx, q)
		if err != nil {
			continue // it runs unprepared next time too; its own error shows there
		}
		c.mu.Lock()
		if _, dup := c.stmts[q]; dup || (listing && c.listings >= maxListingStmts) {
			st.Close()
		} else {
			c.stmts[q] = st
			if listing {
				c.listings++
			}
		}
		c.mu.Unlock()
	}
}

// close closes every cached statement.
func (c *stmtCache) close() {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, st := range c.stmts {
		st.Close()
	}
	clear(c.stmts)
	c.listings = 0
}
