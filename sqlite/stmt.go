package sqlite

import (
	"context"
	"database/sql"
	"time"

	"github.com/mailroom/mailroom"
)

// ptx is a transaction of the store: its connection keeps the statements
// it runs prepared (stmtConn).
type ptx struct {
	*sql.Tx
	now   func() time.Time               // the store's clock
	trace func(query string, args []any) // Hooks.Statement

	// change is whose inboxes the transaction touches, declared by its
	// writes (see touch); undeclared means anyone's.
	change   mailroom.Change
	declared bool
}

// ExecContext runs query, reporting it to Hooks.Statement.
func (t *ptx) ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error) {
	t.traced(query, args)
	return t.Tx.ExecContext(ctx, query, args...)
}

// QueryRowContext runs query, reporting it to Hooks.Statement.
func (t *ptx) QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row {
	t.traced(query, args)
	return t.Tx.QueryRowContext(ctx, query, args...)
}

// QueryContext runs query, reporting it to Hooks.Statement.
func (t *ptx) QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error) {
	t.traced(query, args)
	return t.Tx.QueryContext(ctx, query, args...)
}

// queryRowScan runs a one-row query outside any transaction and scans it
// into dest.
func (s *Store) queryRowScan(ctx context.Context, query string, args []any, dest ...any) error {
	return s.db.QueryRowContext(ctx, query, args...).Scan(dest...)
}

func (t *ptx) traced(query string, args []any) {
	if t.trace != nil {
		t.trace(query, args)
	}
}
