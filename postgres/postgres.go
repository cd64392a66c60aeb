// Package postgres is the mailroom store on PostgreSQL (github.com/jackc/pgx/v5),
// for several stateless mailroom instances sharing one database.
//
// Instances share nothing but the database: every call reads the database
// (no cache), sends are ordered by one transaction-level advisory lock so
// that message seq is commit order, concept jobs are claimed with FOR UPDATE
// SKIP LOCKED, and migrations run under a session advisory lock so that
// instances starting together apply each once.
package postgres

import (
	"context"
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"path"
	"regexp"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/mailroom/mailroom"
)

//go:embed migrations/*.sql
var migrations embed.FS

// IsURL reports whether a --db value names a PostgreSQL database.
func IsURL(db string) bool {
	return strings.HasPrefix(db, "postgres://") || strings.HasPrefix(db, "postgresql://")
}

// Options configure a Store.
type Options struct {
	Logger *slog.Logger
	// MaxConns bounds the connection pool (default: pgxpool's, at least 4).
	MaxConns int32
	// Terms, when set, returns the concept terms a message contributed to
	// the document frequencies (concepts.Terms), so that a retraction can
	// take them back; without it the frequencies keep them.
	Terms func(subject, body string) []string
	// Now is the store's clock (time.Now when nil): send times, read
	// times and concept-job leases. Tests move it instead of sleeping.
	Now func() time.Time
	// Hooks are seams for tests; nil in production.
	Hooks *Hooks
	// Tracer, when set, sees every query and batch the pool's connections
	// run (pgx.QueryTracer, optionally pgx.BatchTracer): tests and
	// benchmarks count round trips with it.
	Tracer pgx.QueryTracer
}

// Hooks let tests interleave events deterministically and inject failures.
type Hooks struct {
	// AfterSnapshot runs in MarkAllRead after the statement that takes the
	// snapshot and marks it, before the commit (inside the transaction).
	// A drain with it set marks rows, never by a read mark.
	AfterSnapshot func()
	// FailMark, when it returns an error for a message id, makes that id's
	// write in MarkRead fail as a storage failure would. (A drain has no
	// per-id writes: it marks its snapshot in one statement.)
	FailMark func(messageID string) error
	// AfterMark runs in MarkAllRead after the statement that writes a
	// read mark, before the commit (inside the transaction).
	AfterMark func()
	// HoldFold keeps the store's folder of read marks from running, so a
	// test folds them chunk by chunk itself (FoldStep in export_test.go).
	HoldFold bool
	// PurgeDecided runs inside each purge batch's transaction once it has
	// chosen the batch, before it deletes it.
	PurgeDecided func()
}

// Store is a mailroom.Store on PostgreSQL.
type Store struct {
	pool   *pgxpool.Pool
	url    string
	schema string // the schema the tables live in
	log    *slog.Logger
	hooks  Hooks
	terms  func(subject, body string) []string
	clock  func() time.Time
	// force, set by tests, makes every search take its stages
	// (searchPlan).
	force searchForce
	// narrow, set by tests, makes every search ask for the caller's
	// audience tokens (1; searchPlan.audience), so small stores cover that
	// path, or none (-1); 0 decides by the counts.
	narrow int
	words  wordStats // recent queries' word statistics

	changes   *mailroom.ChangeHub
	channel   string // the schema's NOTIFY channel
	stopWatch context.CancelFunc
	watchDone chan struct{}
	mu        sync.Mutex
	listening chan struct{} // closed while the listener is in LISTEN

	// The folder of read marks (mark.go): woken by a drain that wrote one.
	foldWake        chan struct{}
	foldDone        chan struct{}
	stopFold        context.CancelFunc
	foldChunk       int          // defaultFoldChunk; tests lower it
	markDrains      atomic.Int64 // drains by a mark, for tests
	queueMarkDrains atomic.Int64 // role queues' marks drains wrote, for tests
}

var _ mailroom.Store = (*Store)(nil)

// Advisory lock keys (one 64-bit key space per database). The send lock is
// taken with the schema's name, so mailroom schemas sharing a database do
// not order each other's sends.
const (
	migrateLockKey = 0x6d61696c726f6f6d // "mailroom"
)

// schemaRE bounds a schema name so that its channel name fits in 63 bytes.
var schemaRE = regexp.MustCompile(`^[a-z_][a-z0-9_]{0,52}$`)

// Open connects to the database at url (postgres://... or postgresql://...)
// and applies pending migrations. A search_path parameter in the URL puts
// mailroom's tables in that schema, created if missing, so several
// mailrooms (or test runs) can share one database.
func Open(ctx context.Context, url string, opts Options) (*Store, error) {
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		return nil, fmt.Errorf("postgres URL: %w", err)
	}
	schema := cfg.ConnConfig.RuntimeParams["search_path"]
	if schema != "" && !schemaRE.MatchString(schema) {
		return nil, fmt.Errorf("postgres URL: search_path must be one lowercase schema name (got %q)", schema)
	}
	// JIT off unless the URL asks for it: mailroom's statements are small
	// index walks, but the planner's cost estimate for a generic plan of a
	// large one (a drain over a big mailbox) crossed jit_above_cost and
	// compiling it took 370-990 ms where running it takes 2 ms.
	if _, set := cfg.ConnConfig.RuntimeParams["jit"]; !set {
		cfg.ConnConfig.RuntimeParams["jit"] = "off"
	}
	if opts.Tracer != nil {
		cfg.ConnConfig.Tracer = opts.Tracer
	}
	if opts.MaxConns > 0 {
		cfg.MaxConns = opts.MaxConns
	} else if cfg.MaxConns < 4 {
		cfg.MaxConns = 4
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("connect: %w", err)
	}
	s := &Store{pool: pool, url: url, schema: schema, log: opts.Logger, changes: mailroom.NewChangeHub(),
		foldWake: make(chan struct{}, 1), foldChunk: defaultFoldChunk}
	if opts.Hooks != nil {
		s.hooks = *opts.Hooks
	}
	s.terms = opts.Terms
	s.clock = opts.Now
	if s.clock == nil {
		s.clock = time.Now
	}
	if err := s.migrate(ctx); err != nil {
		pool.Close()
		return nil, err
	}
	if s.schema == "" {
		if err := pool.QueryRow(ctx, `SELECT current_schema()`).Scan(&s.schema); err != nil {
			pool.Close()
			return nil, err
		}
	}
	s.channel = "mailroom:" + s.schema
	s.startWatcher()
	s.startFolder()
	return s, nil
}

// URL returns the URL the store was opened with.
func (s *Store) URL() string { return s.url }

// Durable reports whether writes outlive the process: always, on a server.
func (s *Store) Durable() bool { return true }

// Close stops the change listener and closes the pool.
func (s *Store) Close() error {
	if s.stopFold != nil {
		// A mark left unfolded stays correct; any instance folds it later.
		s.stopFold()
		<-s.foldDone
	}
	s.stopWatch()
	<-s.watchDone
	s.pool.Close()
	return nil
}

// Ping reports whether the database answers.
func (s *Store) Ping(ctx context.Context) error { return s.pool.Ping(ctx) }

// migrate applies the embedded migrations not yet recorded. One session
// advisory lock around the whole run makes instances that start together
// wait for the first, which applies each migration in its own transaction.
func (s *Store) migrate(ctx context.Context) error {
	names, err := fs.Glob(migrations, "migrations/*.sql")
	if err != nil {
		return err
	}
	sort.Strings(names)
	conn, err := s.pool.Acquire(ctx)
	if err != nil {
		return fmt.Errorf("connect: %w", err)
	}
	defer conn.Release()
	if _, err := conn.Exec(ctx, `SELECT pg_advisory_lock($1)`, int64(migrateLockKey)); err != nil {
		return fmt.Errorf("migration lock: %w", err)
	}
	defer func() {
		// A fresh context: the lock must go even when ctx is done.
		if _, err := conn.Exec(context.Background(), `SELECT pg_advisory_unlock($1)`, int64(migrateLockKey)); err != nil {
			conn.Conn().Close(context.Background()) // closing the session releases it
		}
	}()
	if s.schema != "" {
		if _, err := conn.Exec(ctx, `CREATE SCHEMA IF NOT EXISTS `+pgx.Identifier{s.schema}.Sanitize()); err != nil {
			return fmt.Errorf("create schema %s: %w", s.schema, err)
		}
	}
	if _, err := conn.Exec(ctx, `CREATE TABLE IF NOT EXISTS schema_migration (version integer PRIMARY KEY, name text NOT NULL, applied_at timestamptz NOT NULL DEFAULT now())`); err != nil {
		return fmt.Errorf("migrations table: %w", err)
	}
	versions, err := mailroom.MigrationVersions(names)
	if err != nil {
		return err
	}
	var stored int
	if err := conn.QueryRow(ctx, `SELECT coalesce(max(version), 0) FROM schema_migration`).Scan(&stored); err != nil {
		return err
	}
	if err := mailroom.CheckSchema(stored, versions[len(versions)-1]); err != nil {
		return err
	}
	for i, name := range names {
		version := versions[i]
		body, err := migrations.ReadFile(name)
		if err != nil {
			return err
		}
		var applied bool
		if err := conn.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM schema_migration WHERE version = $1)`, version).Scan(&applied); err != nil {
			return err
		}
		if applied {
			continue
		}
		err = pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
			if version > 12 {
				// Later migrations see no read marks (0012): they may
				// change what reads or counts them.
				if err := foldAll(ctx, tx); err != nil {
					return err
				}
			}
			// Simple protocol: a migration is many statements.
			if _, err := tx.Exec(ctx, string(body), pgx.QueryExecModeSimpleProtocol); err != nil {
				return err
			}
			_, err := tx.Exec(ctx, `INSERT INTO schema_migration (version, name) VALUES ($1, $2)`, version, path.Base(name))
			return err
		})
		if err != nil {
			return fmt.Errorf("migration %s: %w", path.Base(name), err)
		}
		s.log.Info("applied migration", "name", path.Base(name))
	}
	return nil
}

// maxAttempts bounds how often a transaction is retried after PostgreSQL
// broke a deadlock or a serialization conflict by aborting it.
const maxAttempts = 8

// retryable reports whether err is PostgreSQL aborting a transaction that
// may simply run again: a deadlock victim or a serialization failure.
func retryable(err error) bool {
	var pe *pgconn.PgError
	return errors.As(err, &pe) && (pe.Code == "40P01" || pe.Code == "40001")
}

// write runs fn in a read-committed transaction and commits it, running it
// again (from the start) when PostgreSQL aborted it to break a deadlock, so
// that no such abort reaches a caller. fn must not keep state between runs.
func (s *Store) write(ctx context.Context, fn func(tx pgx.Tx) error) error {
	return s.retry(ctx, func() error { return pgx.BeginTxFunc(ctx, s.pool, pgx.TxOptions{}, fn) })
}

// pipeline sends the statements queue puts in a batch as one implicit
// transaction, in one round trip (a batch without BEGIN commits at its
// end, or not at all), and runs it again as write does. queue must not
// keep state between runs.
func (s *Store) pipeline(ctx context.Context, queue func(b *pgx.Batch)) error {
	return s.retry(ctx, func() error {
		b := &pgx.Batch{}
		queue(b)
		return s.pool.SendBatch(ctx, b).Close()
	})
}

// retry runs one transaction, and again after PostgreSQL aborted it as a
// deadlock victim or a serialization failure, up to maxAttempts.
func (s *Store) retry(ctx context.Context, tx func() error) error {
	for attempt := 1; ; attempt++ {
		err := tx()
		if err == nil || !retryable(err) || attempt == maxAttempts || ctx.Err() != nil {
			return err
		}
		s.log.Debug("retrying transaction", "attempt", attempt, "err", err)
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(time.Duration(attempt) * time.Millisecond):
		}
	}
}

// read runs fn in a read-only repeatable-read transaction: one consistent
// snapshot for every statement of a call (a page and its total agree).
func (s *Store) read(ctx context.Context, fn func(tx pgx.Tx) error) error {
	return pgx.BeginTxFunc(ctx, s.pool, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly}, fn)
}

// lockSends takes the send-order lock for the rest of the transaction. A
// sequence value taken at insert is not commit order when transactions run
// concurrently (seq 7 may commit after seq 8 is visible), and watermarks
// must be judged in commit order; holding this lock from before the insert
// until commit makes the two the same.
func lockSends(ctx context.Context, tx pgx.Tx) error {
	_, err := tx.Exec(ctx, lockSendsSQL)
	return err
}

const lockSendsSQL = `SELECT pg_advisory_xact_lock(hashtextextended('mailroom.send.' || current_schema(), 0))`

// now is the store's clock, in PostgreSQL's precision.
func (s *Store) now() time.Time { return s.clock().UTC().Truncate(time.Microsecond) }

func isNoRows(err error) bool { return errors.Is(err, pgx.ErrNoRows) }

// Analyze refreshes the planner's statistics (autovacuum does it in time;
// seeding tools call it after a bulk load).
func (s *Store) Analyze(ctx context.Context) error {
	_, err := s.pool.Exec(ctx, `ANALYZE message, message_to, delivery, message_concept, concept_job, mailbox_count, role_hint, role_later, role_unread`)
	return err
}
