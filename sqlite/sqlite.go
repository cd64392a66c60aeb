// Package sqlite is the mailroom store on an embedded SQLite database
// (modernc.org/sqlite: pure Go, FTS5 built in). Many server processes may
// share one database file; WAL, immediate write transactions and a busy
// timeout keep SQLITE_BUSY away from callers.
package sqlite

import (
	"context"
	"database/sql"
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net/url"
	"os"
	"path/filepath"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mailroom/mailroom"
	_ "modernc.org/sqlite"
)

//go:embed migrations/*.sql
var migrations embed.FS

// Memory is the --db value of an ephemeral in-memory store.
const Memory = ":memory:"

// Options configure a Store.
type Options struct {
	// BusyTimeout is how long a writer waits for another process's lock.
	BusyTimeout time.Duration
	Logger      *slog.Logger
	// Hooks are seams for tests; nil in production.
	Hooks *Hooks
	// ChangePoll is how often the change watcher polls while someone is
	// subscribed and no file events arrive (DefaultChangePoll when 0).
	ChangePoll time.Duration
	// NoFileEvents makes the change watcher poll every ChangePoll instead
	// of waiting for file events (for a file system that does not report
	// writes by other processes, and for tests of the fallback).
	NoFileEvents bool
	// Terms, when set, returns the concept terms a message contributed to
	// the document frequencies (concepts.Terms), so that a retraction can
	// take them back; without it the frequencies keep them.
	Terms func(subject, body string) []string
	// Now is the store's clock (timestamps, leases, backoffs); the wall
	// clock when nil. Tests inject one instead of sleeping.
	Now func() time.Time
	// NoSync makes commits skip fsync (synchronous=OFF): what a commit
	// wrote survives the process, not a crash of the machine. For
	// throwaway stores (tests); without it every commit is synced
	// (synchronous=FULL) before a receipt is returned. Receipts of a
	// NoSync store still say durable: never serve users from one.
	NoSync bool
	// BulkLoad opens the store to be filled through the bulk path
	// (mailroom bench seed) and closed: each connection gets a 256 MB
	// page cache and keeps statement journals in memory, and commits are
	// not synced (synchronous=OFF) until Close, which copies the WAL into
	// the database file and syncs it. The closed store is as durable as
	// one written with every commit synced; a crash of the machine during
	// the load may lose the load. Never serve from a BulkLoad store.
	BulkLoad bool
}

// Hooks let tests interleave events deterministically and inject failures.
type Hooks struct {
	// AfterSnapshot runs in MarkAllRead between taking the snapshot and
	// marking it, outside the store's transaction. A drain by a read mark
	// has no such moment (one transaction), so with it set drains mark
	// row by row.
	AfterSnapshot func()
	// FailMark, when it returns an error for a message id, makes that id's
	// write fail as a storage failure would (drains then mark row by row:
	// a mark has no per-item write to fail).
	FailMark func(messageID string) error
	// Statement, when set, sees every statement the store runs in a
	// transaction, with its arguments (the plan regression test replays
	// them under EXPLAIN QUERY PLAN).
	Statement func(query string, args []any)
	// HoldFold keeps the store's folder of read marks from running, so a
	// test folds them chunk by chunk itself (FoldStep in export_test.go).
	HoldFold bool
	// FoldPoll, when set, replaces foldPoll: how often the folder looks
	// for marks other processes left (and the merger for segments).
	FoldPoll time.Duration
	// HoldMerge keeps the store's merger of the full-text index
	// (ftsmerge.go) from running, so a test steps it itself (FTSMergeStep
	// in export_test.go).
	HoldMerge bool
	// MergeStepped, when set, runs after each step of the merger, with
	// whether it merged.
	MergeStepped func(merged bool)
	// PurgeDecided runs inside each purge batch's write transaction once
	// it has chosen the batch, before it deletes it.
	PurgeDecided func()
}

// Store is a mailroom.Store on SQLite.
type Store struct {
	db      *sql.DB
	path    string
	durable bool
	bulk    bool // Options.BulkLoad
	// narrowAll makes every search ask for the caller's audience tokens
	// (searchNarrows), so tests on small stores cover that path.
	narrowAll bool
	log       *slog.Logger
	hooks     Hooks
	terms     func(subject, body string) []string
	clock     func() time.Time
	// wlock queues this process's writers in Go (a channel of capacity
	// one: taking it is sending). SQLite admits one writer at a time anyway,
	// and its busy handler waits by sleeping in growing steps, so many
	// writers of one process contending inside SQLite starve each other;
	// only other processes need the busy timeout. A channel rather than a
	// mutex so that a grouped writer (group.go) can wait for the lock or
	// for a leader to commit its write, whichever comes first.
	wlock     chan struct{}
	fgWaiting atomic.Int32 // foreground writers waiting for wlock
	group     commitGroup
	mode      writeMode
	// names and recipients are what listings read of identities and
	// messages that never changes (names.go).
	names      frozen[int64, string]
	recipients frozen[string, []string]
	texts      frozen[string, string] // listing statements by shape (Store.text)
	// wdb is the one-connection writer pool of writePool mode
	// (kept to measure the write queue against; see group.go).
	wdb *sql.DB
	dsn string
	// statsFloor is defaultStatsFloor; tests lower it.
	statsFloor int64
	// bulkChunk is defaultBulkChunk; tests lower it.
	bulkChunk int

	changes      *mailroom.ChangeHub
	origin       string  // this instance in the change log
	logChanges   bool    // the change log exists (after migrations)
	watchDB      *sql.DB // the change watcher's own connection; nil for :memory:
	stopWatch    context.CancelFunc
	noFileEvents bool
	watchChecks  atomic.Int64 // data_version checks (tests count them)
	watching     atomic.Bool  // the watcher holds its connection (tests)
	// ownWrite wakes the watcher when this store starts a write (see
	// writing); fileEvents counts the file events it received and
	// onEvents says whether it waits for them now (tests).
	ownWrite    chan struct{}
	lastOwn     atomic.Int64 // when this store last started a write (Unix ns)
	fileEvents  atomic.Int64
	onEvents    atomic.Bool
	checkpoints atomic.Int64 // truncating checkpoints started (see checkpoint)
	// checkpointsDone counts those finished.
	checkpointsDone atomic.Int64
	// ready is closed once the watcher has its baseline (nil while it
	// has one); Subscribe waits on it.
	readyMu   sync.Mutex
	ready     chan struct{}
	readyWait time.Duration // how long Subscribe waits for it
	// lateSubscribe is set when a Subscribe gave up waiting: the watcher
	// then signals everyone once it has its baseline, since commits in
	// between went unseen.
	lateSubscribe atomic.Bool
	watchDone     chan struct{}

	// The folder of read marks (mark.go): woken by a drain that wrote one,
	// stopped by Close.
	foldWake  chan struct{}
	foldDone  chan struct{}
	stopFold  context.CancelFunc
	foldChunk int          // defaultFoldChunk; tests lower it
	marks     atomic.Int64 // drains by a mark (tests count them)
	marksOver atomic.Int64 // of them, drains through a watermark with unread mail after it
	roleMarks atomic.Int64 // role marks written by drains (tests count them)

	// The merger of the full-text index (ftsmerge.go): woken by sends,
	// stopped by Close.
	mergeWake     chan struct{}
	mergeDone     chan struct{}
	stopMerge     context.CancelFunc
	ftsMergeMin   int          // a level's segments that make a merge due (FTS5's usermerge, 4)
	ftsMergePages int          // ftsMergePages; tests lower it
	ftsRebuildMin int          // ftsRebuildFloor; tests lower it
	ftsMergePace  int          // ftsMergePace
	ftsMerges     atomic.Int64 // merge steps that merged (tests count them)
	ftsIdle       atomic.Value // string: the structure record a step last merged nothing in
}

var _ mailroom.Store = (*Store)(nil)

// Open opens (creating if needed) the database at path, or an in-memory store
// for ":memory:", and applies pending migrations.
func Open(ctx context.Context, path string, opts Options) (*Store, error) {
	if opts.BusyTimeout == 0 {
		opts.BusyTimeout = 30 * time.Second
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.ChangePoll <= 0 {
		opts.ChangePoll = DefaultChangePoll
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	s := &Store{path: path, durable: path != Memory, bulk: opts.BulkLoad, log: opts.Logger, clock: opts.Now, statsFloor: defaultStatsFloor, bulkChunk: defaultBulkChunk, foldChunk: defaultFoldChunk,
		foldWake: make(chan struct{}, 1),
		texts:    frozen[string, string]{max: maxTexts},
		wlock:    make(chan struct{}, 1),
		changes:  mailroom.NewChangeHub(), origin: newOrigin(), ownWrite: make(chan struct{}, 1),
		mergeWake: make(chan struct{}, 1), ftsMergeMin: ftsUsermerge, ftsMergePages: ftsMergePages, ftsRebuildMin: ftsRebuildFloor, ftsMergePace: ftsMergePace}
	if opts.Hooks != nil {
		s.hooks = *opts.Hooks
	}
	s.terms = opts.Terms
	s.noFileEvents = opts.NoFileEvents
	q := url.Values{}
	q.Add("_pragma", fmt.Sprintf("busy_timeout(%d)", opts.BusyTimeout.Milliseconds()))
	q.Add("_pragma", "foreign_keys(1)")
	if opts.BulkLoad {
		// Bulk inserts dirty far more pages per transaction than the
		// default 2 MB cache holds, and a multi-row INSERT journals every
		// page it changes for its own rollback (a temp file by default).
		q.Add("_pragma", "cache_size(-262144)")
		q.Add("_pragma", "temp_store(MEMORY)")
	}
	if opts.NoSync || opts.BulkLoad {
		q.Add("_pragma", "synchronous(OFF)")
	} else {
		q.Add("_pragma", "synchronous(FULL)")
	}
	// Deleted and retracted text is overwritten, not left in free space.
	q.Add("_pragma", "secure_delete(1)")
	q.Set("_txlock", "immediate")
	var dsn string
	if s.durable {
		if dir := filepath.Dir(path); dir != "" {
			if err := os.MkdirAll(dir, 0o700); err != nil {
				return nil, fmt.Errorf("create database directory: %w", err)
			}
		}
		q.Add("_pragma", "journal_mode(WAL)")
		// Mail is private: create the file owner-only (SQLite gives the
		// -wal and -shm files the same mode).
		f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
		if err != nil {
			return nil, fmt.Errorf("open database file: %w", err)
		}
		f.Close()
		if err := tighten(path, s.log); err != nil {
			return nil, err
		}
		// A URL, so that ? and # in the path stay part of the path.
		dsn = (&url.URL{Scheme: "file", Opaque: (&url.URL{Path: path}).EscapedPath(), RawQuery: q.Encode()}).String()
	} else {
		dsn = "file::memory:?" + q.Encode()
	}
	s.dsn = dsn
	openPool := func() error {
		db, err := openDB(dsn)
		if err != nil {
			return err
		}
		if !s.durable {
			// Each connection to :memory: is its own database: keep one.
			db.SetMaxOpenConns(1)
		} else {
			db.SetMaxOpenConns(8)
			// Idle connections are kept, not closed past database/sql's
			// default two: a closed connection takes its prepared copies
			// of the cached statements with it, and the next connection
			// parses and plans them again (a listing's, some 6 KB of SQL,
			// costs more than running it).
			db.SetMaxIdleConns(8)
		}
		s.db = db
		return nil
	}
	if err := openPool(); err != nil {
		return nil, err
	}
	if err := s.migrate(ctx); err != nil {
		s.db.Close()
		return nil, err
	}
	s.logChanges = true
	if err := s.refreshStats(ctx); err != nil {
		s.log.Warn("planner statistics", "err", err)
	}
	if s.durable {
		// A connection keeps the statistics it loaded first, even after
		// sqlite_stat1 changes: serve from connections that load the
		// current ones.
		s.db.Close()
		if err := openPool(); err != nil {
			return nil, err
		}
	} else if _, err := s.db.ExecContext(ctx, `ANALYZE sqlite_schema`); err != nil {
		s.db.Close()
		return nil, fmt.Errorf("load planner statistics: %w", err)
	}
	if s.durable {
		// Other processes' commits reach an in-memory store never, so only a
		// file gets a watcher, on a connection of its own (outside the pool,
		// so it never waits behind a busy pool and never takes a writer's
		// place).
		var err error
		if s.watchDB, err = openDB(dsn); err != nil {
			s.db.Close()
			return nil, err
		}
		s.watchDB.SetMaxOpenConns(1)
		wctx, cancel := context.WithCancel(context.Background())
		s.stopWatch, s.watchDone = cancel, make(chan struct{})
		s.ready = make(chan struct{})
		s.readyWait = 5 * time.Second
		go s.watch(wctx, s.watchDB, opts.ChangePoll)
	}
	if !s.hooks.HoldFold {
		// Marks a process left behind are folded from the start.
		var left bool
		if err := s.db.QueryRowContext(ctx, anyMarks).Scan(&left); err != nil {
			s.Close()
			return nil, err
		}
		fctx, cancel := context.WithCancel(context.Background())
		s.stopFold, s.foldDone = cancel, make(chan struct{})
		go s.fold(fctx)
		if left {
			s.wakeFolder()
		}
	}
	if !s.hooks.HoldMerge && !s.bulk {
		// A bulk load's segments are merged by the stores that open it
		// afterwards, from the start.
		mctx, cancel := context.WithCancel(context.Background())
		s.stopMerge, s.mergeDone = cancel, make(chan struct{})
		go s.merge(mctx)
		s.wakeMerger()
	}
	return s, nil
}

// defaultStatsFloor is the message count from which measured statistics
// replace the fixed ones of migrations 0004 and 0006: a store this large plans like
// the large mailbox those describe.
const defaultStatsFloor = 100_000

// refreshStats re-measures the planner statistics of the store's own
// tables (ANALYZE with an analysis limit, so it takes milliseconds at any
// size) once the store holds defaultStatsFloor messages and whenever it has
// doubled since the last measurement. Statistics never describe a store
// smaller than the fixed ones do, so a plan chosen for a small store never
// outlives it, and the full-text index's tables are never analyzed: their
// segment statements are planned for large tables, which they become.
// It runs at open and at close, as SQLite advises for PRAGMA optimize.
func (s *Store) refreshStats(ctx context.Context) error {
	var n, at int64
	if err := s.db.QueryRowContext(ctx, `SELECT coalesce(max(seq), 0) FROM message`).Scan(&n); err != nil {
		return err
	}
	if err := s.db.QueryRowContext(ctx, `SELECT messages FROM planner_stats`).Scan(&at); err != nil {
		return err
	}
	if n < s.statsFloor || n < 2*at {
		return nil
	}
	return s.write(ctx, func(tx *ptx) error {
		tx.touchNone() // planner statistics
		rows, err := tx.Tx.QueryContext(ctx, `SELECT name FROM sqlite_schema WHERE type = 'table'
			AND name NOT LIKE 'sqlite%' AND name NOT LIKE 'message_fts%' AND name NOT IN ('schema_migration', 'planner_stats')`)
		if err != nil {
			return err
		}
		var tables []string
		for rows.Next() {
			var t string
			if err := rows.Scan(&t); err != nil {
				rows.Close()
				return err
			}
			tables = append(tables, t)
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return err
		}
		if _, err := tx.Tx.ExecContext(ctx, `PRAGMA analysis_limit = 1000`); err != nil {
			return err
		}
		for _, t := range tables {
			if _, err := tx.Tx.ExecContext(ctx, `ANALYZE "`+t+`"`); err != nil {
				return fmt.Errorf("analyze %s: %w", t, err)
			}
		}
		_, err = tx.Tx.ExecContext(ctx, `UPDATE planner_stats SET messages = ?`, n)
		return err
	})
}

// tighten makes an existing database file, and its -wal and -shm files,
// owner-only: a file created by an older version or copied in with looser
// permissions would let other local users read the mail.
func tighten(path string, log *slog.Logger) error {
	for _, p := range []string{path, path + "-wal", path + "-shm"} {
		fi, err := os.Stat(p)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		} else if err != nil {
			return fmt.Errorf("check database file permissions: %w", err)
		}
		if mode := fi.Mode().Perm(); mode&0o077 != 0 {
			if err := os.Chmod(p, 0o600); err != nil {
				return fmt.Errorf("tighten database file permissions: %w", err)
			}
			log.Warn("tightened database file permissions to owner-only", "file", p, "was", fmt.Sprintf("%04o", mode), "now", "0600")
		}
	}
	return nil
}

// Path returns the database path the store was opened with.
func (s *Store) Path() string { return s.path }

// Durable reports whether writes outlive the process.
func (s *Store) Durable() bool { return s.durable }

// Close closes the database, re-measuring the planner statistics first if
// the store has grown enough (refreshStats).
func (s *Store) Close() error {
	if s.stopFold != nil {
		// A mark left unfolded stays correct; the next open folds it.
		s.stopFold()
		<-s.foldDone
	}
	if s.stopMerge != nil {
		// An unfinished merge is FTS5's to resume (a merge step is a
		// transaction of its own).
		s.stopMerge()
		<-s.mergeDone
	}
	if s.stopWatch != nil {
		s.stopWatch()
		<-s.watchDone
		s.watchDB.Close()
	}
	if err := s.refreshStats(context.Background()); err != nil {
		s.log.Warn("planner statistics", "err", err)
	}
	var serr error
	if s.bulk && s.durable {
		serr = s.syncBulk(context.Background())
	}
	if s.wdb != nil {
		s.wdb.Close()
	}
	return errors.Join(serr, s.db.Close())
}

// syncBulk makes a BulkLoad store durable: a truncating checkpoint with
// full syncs moves the WAL into the database file, then both files are
// synced, since the load's unsynced checkpoints may have left this one
// nothing to do (and so nothing to sync), and a reader in another process
// may keep it from finishing.
func (s *Store) syncBulk(ctx context.Context) error {
	c, err := s.db.Conn(ctx)
	if err != nil {
		return err
	}
	defer c.Close()
	if _, err := c.ExecContext(ctx, `PRAGMA synchronous = FULL`); err != nil {
		return err
	}
	var busy, logFrames, done int
	if err := c.QueryRowContext(ctx, `PRAGMA wal_checkpoint(TRUNCATE)`).Scan(&busy, &logFrames, &done); err != nil {
		return fmt.Errorf("final checkpoint: %w", err)
	}
	for _, p := range []string{s.path, s.path + "-wal"} {
		f, err := os.OpenFile(p, os.O_RDWR, 0)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		} else if err != nil {
			return err
		}
		err = f.Sync()
		f.Close()
		if err != nil {
			return fmt.Errorf("sync %s: %w", p, err)
		}
	}
	return nil
}

// migrate applies the embedded migrations not yet recorded, each in its own
// immediate transaction, so concurrent first starts apply each once.
func (s *Store) migrate(ctx context.Context) error {
	names, err := fs.Glob(migrations, "migrations/*.sql")
	if err != nil {
		return err
	}
	sort.Strings(names)
	versions, err := mailroom.MigrationVersions(names)
	if err != nil {
		return err
	}
	err = s.write(ctx, func(tx *ptx) error {
		if _, err := tx.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS schema_migration (version INTEGER PRIMARY KEY, applied_at TEXT NOT NULL)`); err != nil {
			return err
		}
		var stored int
		if err := tx.QueryRowContext(ctx, `SELECT coalesce(max(version), 0) FROM schema_migration`).Scan(&stored); err != nil {
			return err
		}
		return mailroom.CheckSchema(stored, versions[len(versions)-1])
	})
	if err != nil {
		return err
	}
	for i, name := range names {
		version := versions[i]
		body, err := migrations.ReadFile(name)
		if err != nil {
			return err
		}
		err = s.write(ctx, func(tx *ptx) error {
			var n int
			if err := tx.QueryRowContext(ctx, `SELECT count(*) FROM schema_migration WHERE version = ?`, version).Scan(&n); err != nil || n > 0 {
				return err
			}
			if version > 12 {
				// A migration is written against rows, not marks.
				if err := foldAll(ctx, tx); err != nil {
					return err
				}
			}
			// A migration runs once: its script is not kept prepared.
			if _, err := tx.Tx.ExecContext(withoutStmtCache(ctx), string(body)); err != nil {
				return fmt.Errorf("migration %s: %w", name, err)
			}
			_, err := tx.ExecContext(ctx, `INSERT INTO schema_migration (version, applied_at) VALUES (?, ?)`, version, ts(tx.now()))
			return err
		})
		if err != nil {
			return err
		}
	}
	return nil
}

// write runs fn in an immediate transaction and commits it.
func (s *Store) write(ctx context.Context, fn func(tx *ptx) error) error {
	if s.mode == writePool {
		c, err := s.inTx(ctx, fn)
		if err == nil {
			s.publish(c)
		}
		return err
	}
	s.fgWaiting.Add(1)
	s.lock()
	s.fgWaiting.Add(-1)
	c, err := s.inTx(ctx, fn)
	s.unlock()
	if err != nil {
		return err
	}
	// This process's own commits signal at once, naming whom they touch;
	// other processes learn of them through their watcher.
	s.publish(c)
	return nil
}

func (s *Store) lock()   { s.wlock <- struct{}{} }
func (s *Store) unlock() { <-s.wlock }

// writeBackground is write for work no caller waits on (the concept
// queue): it lets waiting foreground writers go first, for up to 50 ms, so
// a send rarely queues behind it and the queue still moves under load.
func (s *Store) writeBackground(ctx context.Context, fn func(tx *ptx) error) error {
	// The concept queue changes no inbox.
	run := func(tx *ptx) error { tx.touchNone(); return fn(tx) }
	if s.mode == writePool {
		_, err := s.inTx(ctx, run)
		return err
	}
	giveUp := time.Now().Add(50 * time.Millisecond)
	for {
		s.lock()
		if s.fgWaiting.Load() == 0 || time.Now().After(giveUp) {
			break
		}
		s.unlock()
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Microsecond):
		}
	}
	defer s.unlock()
	_, err := s.inTx(ctx, run)
	return err
}

// inTx runs fn in an immediate transaction and commits it; the caller holds
// wlock.
func (s *Store) inTx(ctx context.Context, fn func(tx *ptx) error) (mailroom.Change, error) {
	s.writing()
	tx, err := s.writer().BeginTx(ctx, nil)
	if err != nil {
		return mailroom.Change{}, fmt.Errorf("begin: %w", err)
	}
	defer tx.Rollback()
	t := &ptx{Tx: tx, now: s.now, trace: s.hooks.Statement}
	if err := fn(t); err != nil {
		return mailroom.Change{}, err
	}
	c := t.touched()
	if s.logChanges {
		if err := s.logChange(ctx, t, c); err != nil {
			return mailroom.Change{}, fmt.Errorf("change log: %w", err)
		}
	}
	if err := tx.Commit(); err != nil {
		return mailroom.Change{}, fmt.Errorf("commit: %w", err)
	}
	return c, nil
}

// writer is the pool write transactions run on.
func (s *Store) writer() *sql.DB {
	if s.wdb != nil {
		return s.wdb
	}
	return s.db
}

// read runs fn in a read-only (deferred) transaction: one consistent snapshot
// that never blocks writers.
func (s *Store) read(ctx context.Context, fn func(tx *ptx) error) error {
	tx, err := s.db.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
	if err != nil {
		return fmt.Errorf("begin read: %w", err)
	}
	defer tx.Rollback()
	return fn(&ptx{Tx: tx, now: s.now, trace: s.hooks.Statement})
}

const timeFormat = "2006-01-02T15:04:05.000000Z"

// now reads the store's clock at the precision timestamps are stored with.
func (s *Store) now() time.Time { return s.clock().UTC().Truncate(time.Microsecond) }

func ts(t time.Time) string { return t.UTC().Format(timeFormat) }

func parseTS(s string) time.Time {
	if t, ok := parseStoredTS(s); ok {
		return t
	}
	t, err := time.Parse(timeFormat, s)
	if err != nil {
		t, _ = time.Parse(time.RFC3339Nano, s)
	}
	return t
}

// parseStoredTS parses a timestamp as ts writes it (timeFormat) by hand: a
// page of 50 rows parses 50 to 150 of them, and time.Parse, which reads
// its layout as it goes, was a tenth of the rows' decoding.
func parseStoredTS(s string) (time.Time, bool) {
	if len(s) != len(timeFormat) || s[4] != '-' || s[7] != '-' || s[10] != 'T' || s[13] != ':' || s[16] != ':' || s[19] != '.' || s[26] != 'Z' {
		return time.Time{}, false
	}
	num := func(i, j int) (int, bool) {
		n := 0
		for ; i < j; i++ {
			c := s[i]
			if c < '0' || c > '9' {
				return 0, false
			}
			n = n*10 + int(c-'0')
		}
		return n, true
	}
	y, ok1 := num(0, 4)
	mo, ok2 := num(5, 7)
	d, ok3 := num(8, 10)
	h, ok4 := num(11, 13)
	mi, ok5 := num(14, 16)
	sec, ok6 := num(17, 19)
	us, ok7 := num(20, 26)
	if !(ok1 && ok2 && ok3 && ok4 && ok5 && ok6 && ok7) || mo < 1 || mo > 12 || d < 1 || h > 23 || mi > 59 || sec > 59 {
		return time.Time{}, false
	}
	t := time.Date(y, time.Month(mo), d, h, mi, sec, us*1000, time.UTC)
	if t.Day() != d { // time.Date normalised a day past the month's end
		return time.Time{}, false
	}
	return t, true
}

func parseNullTS(s sql.NullString) *time.Time {
	if !s.Valid {
		return nil
	}
	t := parseTS(s.String)
	return &t
}

func isNoRows(err error) bool { return errors.Is(err, sql.ErrNoRows) }
