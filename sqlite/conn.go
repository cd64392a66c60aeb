package sqlite

import (
	"container/list"
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"io"
	"reflect"

	sqlitedriver "modernc.org/sqlite"
)

// Bounds of a connection's statement cache. A listing's text depends only
// on which filters it has and how many roles the reader holds (values are
// parameters), so a few dozen shapes serve nearly every call; a prepared
// listing holds ~44 KB on its connection for its ~6 KB of SQL, so the SQL
// bound keeps a connection's statements to roughly 6 MB, and shapes past
// it (unusual filter mixes) push out the least recently used.
const (
	maxCachedStmts = 352
	maxCachedSQL   = 768 << 10 // bytes of SQL text a connection keeps prepared
	maxStmtSQL     = 256 << 10 // a longer statement is not kept (a listing for many roles is ~10-40 KB)
)

// openDB opens a pool whose connections keep their statements prepared
// (stmtConn).
func openDB(dsn string) (*sql.DB, error) {
	base, err := sqlitedriver.NewConnector(dsn)
	if err != nil {
		return nil, err
	}
	return sql.OpenDB(stmtConnector{base}), nil
}

type stmtConnector struct{ driver.Connector }

func (c stmtConnector) Connect(ctx context.Context) (driver.Conn, error) {
	dc, err := c.Connector.Connect(ctx)
	if err != nil {
		return nil, err
	}
	return newStmtConn(dc)
}

// innerConn is what stmtConn needs of the driver's connection: every
// connection modernc.org/sqlite opens implements these.
type innerConn interface {
	driver.Conn
	driver.ConnBeginTx
	driver.ConnPrepareContext
	driver.Pinger
	driver.SessionResetter
	driver.Validator
}

// stmtConn is a connection that keeps the statements it runs prepared, by
// their text, so each is parsed and planned once per connection. It is
// written here because database/sql's own prepared statements cannot do
// it: a statement first seen inside a transaction has to run unprepared
// (an in-memory store's one connection is the transaction's) and is then
// prepared again after it, and those two parses of the ~6 KB listing
// statements were half of the sqlite test package's CPU (session 10's
// profile), and two parses on each connection's first call in production.
//
// database/sql makes every call of a driver connection, Rows.Close
// included (also when a context ends, from its own goroutine), under that
// connection's mutex, so stmtConn needs no lock of its own.
type stmtConn struct {
	inner innerConn
	lru   list.List // of *cachedStmt, most recently used first
	bySQL map[string]*list.Element
	bytes int // SQL text of the statements in lru
}

type cachedStmt struct {
	query string
	st    driver.Stmt
	busy  bool // a run of it is in progress (its rows are open)
	gone  bool // no longer in the cache: close once not busy
}

var (
	_ driver.ConnBeginTx        = (*stmtConn)(nil)
	_ driver.ConnPrepareContext = (*stmtConn)(nil)
	_ driver.ExecerContext      = (*stmtConn)(nil)
	_ driver.QueryerContext     = (*stmtConn)(nil)
	_ driver.Pinger             = (*stmtConn)(nil)
	_ driver.SessionResetter    = (*stmtConn)(nil)
	_ driver.Validator          = (*stmtConn)(nil)
)

func newStmtConn(dc driver.Conn) (*stmtConn, error) {
	inner, ok := dc.(innerConn)
	if !ok {
		dc.Close()
		return nil, errors.New("sqlite: the driver's connection lacks a context method mailroom needs")
	}
	return &stmtConn{inner: inner, bySQL: map[string]*list.Element{}}, nil
}

// Unwrap returns the driver's connection (modernc.org/sqlite's Limit looks
// through wrappers this way).
func (c *stmtConn) Unwrap() driver.Conn { return c.inner }

func (c *stmtConn) Prepare(query string) (driver.Stmt, error) {
	return c.inner.PrepareContext(context.Background(), query)
}

// PrepareContext prepares a statement of the caller's own, outside the cache.
func (c *stmtConn) PrepareContext(ctx context.Context, query string) (driver.Stmt, error) {
	return c.inner.PrepareContext(ctx, query)
}

func (c *stmtConn) Begin() (driver.Tx, error) {
	return c.inner.BeginTx(context.Background(), driver.TxOptions{})
}

func (c *stmtConn) BeginTx(ctx context.Context, opts driver.TxOptions) (driver.Tx, error) {
	return c.inner.BeginTx(ctx, opts)
}

func (c *stmtConn) Ping(ctx context.Context) error         { return c.inner.Ping(ctx) }
func (c *stmtConn) ResetSession(ctx context.Context) error { return c.inner.ResetSession(ctx) }
func (c *stmtConn) IsValid() bool                          { return c.inner.IsValid() }

// Close finalizes the kept statements, then closes the connection.
// database/sql closes a connection only once its rows are closed, so no
// statement is busy then.
func (c *stmtConn) Close() error {
	var errs []error
	for e := c.lru.Front(); e != nil; e = e.Next() {
		errs = append(errs, e.Value.(*cachedStmt).st.Close())
	}
	c.lru.Init()
	clear(c.bySQL)
	c.bytes = 0
	return errors.Join(append(errs, c.inner.Close())...)
}

func (c *stmtConn) ExecContext(ctx context.Context, query string, args []driver.NamedValue) (driver.Result, error) {
	cs, err := c.get(ctx, query)
	if err != nil {
		return nil, err
	}
	defer c.release(cs)
	return cs.st.(driver.StmtExecContext).ExecContext(ctx, args)
}

func (c *stmtConn) QueryContext(ctx context.Context, query string, args []driver.NamedValue) (driver.Rows, error) {
	cs, err := c.get(ctx, query)
	if err != nil {
		return nil, err
	}
	rows, err := cs.st.(driver.StmtQueryContext).QueryContext(ctx, args)
	if err != nil {
		c.release(cs)
		return nil, err
	}
	return &cachedRows{Rows: rows, c: c, cs: cs}, nil
}

// get returns query's statement, marked busy: the kept one, or, while
// that one is running (its rows still open), one of its own, closed after.
func (c *stmtConn) get(ctx context.Context, query string) (*cachedStmt, error) {
	if e, ok := c.bySQL[query]; ok {
		cs := e.Value.(*cachedStmt)
		if !cs.busy {
			c.lru.MoveToFront(e)
			cs.busy = true
			return cs, nil
		}
	}
	st, err := c.inner.PrepareContext(ctx, query)
	if err != nil {
		return nil, err
	}
	cs := &cachedStmt{query: query, st: st, busy: true}
	if _, kept := c.bySQL[query]; kept || len(query) > maxStmtSQL || skipsStmtCache(ctx) {
		cs.gone = true
		return cs, nil
	}
	c.bySQL[query] = c.lru.PushFront(cs)
	c.bytes += len(query)
	for c.lru.Len() > maxCachedStmts || c.bytes > maxCachedSQL {
		old := c.lru.Back()
		o := old.Value.(*cachedStmt)
		c.lru.Remove(old)
		delete(c.bySQL, o.query)
		c.bytes -= len(o.query)
		o.gone = true
		if !o.busy {
			o.st.Close()
		}
	}
	return cs, nil
}

func (c *stmtConn) release(cs *cachedStmt) {
	cs.busy = false
	if cs.gone {
		cs.st.Close()
	}
}

// cachedRows releases its statement when closed. It forwards the
// driver's optional column-type and result-set methods, which embedding
// driver.Rows alone would hide from database/sql.
type cachedRows struct {
	driver.Rows
	c      *stmtConn
	cs     *cachedStmt
	closed bool
}

func (r *cachedRows) Close() error {
	if r.closed {
		return nil
	}
	r.closed = true
	err := r.Rows.Close()
	r.c.release(r.cs)
	return err
}

type skipStmtCacheKey struct{}

// withoutStmtCache marks ctx's statements as run once (a migration's
// script): they are prepared for the call and not kept.
func withoutStmtCache(ctx context.Context) context.Context {
	return context.WithValue(ctx, skipStmtCacheKey{}, true)
}

func skipsStmtCache(ctx context.Context) bool {
	return ctx.Value(skipStmtCacheKey{}) != nil
}

func (r *cachedRows) ColumnTypeDatabaseTypeName(i int) string {
	if t, ok := r.Rows.(driver.RowsColumnTypeDatabaseTypeName); ok {
		return t.ColumnTypeDatabaseTypeName(i)
	}
	return ""
}

func (r *cachedRows) ColumnTypeScanType(i int) reflect.Type {
	if t, ok := r.Rows.(driver.RowsColumnTypeScanType); ok {
		return t.ColumnTypeScanType(i)
	}
	return reflect.TypeFor[any]()
}

func (r *cachedRows) ColumnTypeNullable(i int) (nullable, ok bool) {
	if t, is := r.Rows.(driver.RowsColumnTypeNullable); is {
		return t.ColumnTypeNullable(i)
	}
	return false, false
}

func (r *cachedRows) ColumnTypeLength(i int) (int64, bool) {
	if t, ok := r.Rows.(driver.RowsColumnTypeLength); ok {
		return t.ColumnTypeLength(i)
	}
	return 0, false
}

func (r *cachedRows) ColumnTypePrecisionScale(i int) (precision, scale int64, ok bool) {
	if t, is := r.Rows.(driver.RowsColumnTypePrecisionScale); is {
		return t.ColumnTypePrecisionScale(i)
	}
	return 0, 0, false
}

func (r *cachedRows) HasNextResultSet() bool {
	t, ok := r.Rows.(driver.RowsNextResultSet)
	return ok && t.HasNextResultSet()
}

func (r *cachedRows) NextResultSet() error {
	if t, ok := r.Rows.(driver.RowsNextResultSet); ok {
		return t.NextResultSet()
	}
	return io.EOF
}
