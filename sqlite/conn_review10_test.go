package sqlite

import (
	"context"
	"path/filepath"
	"sync"
	"testing"
	"time"
)

// A query whose context is canceled while its rows are open, in a
// transaction: database/sql's Rows.awaitDone closes the rows from its own
// goroutine while the transaction's goroutine keeps running the same text.
func TestReview10CancelRowsInTxThenReuse(t *testing.T) {
	db := memDB(t)
	const q = `SELECT n FROM t WHERE n >= ? ORDER BY n`
	for round := 0; round < 200; round++ {
		tx, err := db.Begin()
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		rows, err := tx.QueryContext(ctx, q, 1)
		if err != nil {
			t.Fatal(err)
		}
		rows.Next()
		var wg sync.WaitGroup
		wg.Add(1)
		go func() { defer wg.Done(); cancel() }()
		for i := 0; i < 5; i++ {
			var n int
			if err := tx.QueryRow(q, 2).Scan(&n); err != nil || n != 2 {
				t.Fatalf("round %d: %d %v", round, n, err)
			}
		}
		wg.Wait()
		rows.Close()
		tx.Rollback()
	}
}

// An interrupted step of a kept statement, then its reuse.
func TestReview10InterruptThenReuse(t *testing.T) {
	db := memDB(t)
	const q = `WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x+1 FROM c WHERE x < ?) SELECT count(*) FROM c`
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	var n int
	err := db.QueryRowContext(ctx, q, 1e9).Scan(&n)
	if err == nil {
		t.Fatal("not interrupted")
	}
	t.Logf("interrupted: %v", err)
	if err := db.QueryRow(q, 10).Scan(&n); err != nil || n != 10 {
		t.Fatalf("reuse after interrupt: %d %v", n, err)
	}
	// rows interrupted mid-iteration
	ctx2, cancel2 := context.WithCancel(context.Background())
	const q2 = `WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x+1 FROM c WHERE x < ?) SELECT x FROM c`
	rows, err := db.QueryContext(ctx2, q2, 1e6)
	if err != nil {
		t.Fatal(err)
	}
	rows.Next()
	cancel2()
	for rows.Next() {
	}
	t.Logf("rows err after cancel: %v", rows.Err())
	rows.Close()
	rows, err = db.Query(q2, 3)
	if err != nil {
		t.Fatal(err)
	}
	k := 0
	for rows.Next() {
		k++
	}
	if err := rows.Err(); err != nil || k != 3 {
		t.Fatalf("reuse after canceled rows: %d %v", k, err)
	}
	rows.Close()
}

// Step errors (constraint at Exec, runtime error mid-iteration) leave the
// kept statement reset and reusable.
func TestReview10StepErrorsThenReuse(t *testing.T) {
	db := memDB(t)
	if _, err := db.Exec(`CREATE TABLE u (k INTEGER PRIMARY KEY, v TEXT NOT NULL)`); err != nil {
		t.Fatal(err)
	}
	const ins = `INSERT INTO u (k, v) VALUES (?, ?)`
	if _, err := db.Exec(ins, 1, "a"); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec(ins, 1, "b"); err == nil {
		t.Fatal("duplicate accepted")
	}
	if _, err := db.Exec(ins, 2, nil); err == nil {
		t.Fatal("null accepted")
	}
	if _, err := db.Exec(ins, 3, "c"); err != nil {
		t.Fatalf("reuse after constraint error: %v", err)
	}
	const ret = `INSERT INTO u (k, v) VALUES (?, ?) RETURNING k`
	var k int
	if err := db.QueryRow(ret, 1, "x").Scan(&k); err == nil {
		t.Fatal("duplicate RETURNING accepted")
	}
	if err := db.QueryRow(ret, 4, "x").Scan(&k); err != nil || k != 4 {
		t.Fatalf("RETURNING reuse: %d %v", k, err)
	}
	// An error on the second row.
	const bad = `SELECT CASE WHEN n = 2 THEN json(CASE WHEN n = 2 THEN '{' ELSE '1' END) ELSE n END FROM t WHERE n >= ?`
	rows, err := db.Query(bad, 1)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
	}
	t.Logf("mid-iteration error: %v, close: %v", rows.Err(), rows.Close())
	rows, err = db.Query(bad, 3)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for rows.Next() {
		n++
	}
	if rows.Err() != nil || n != 1 {
		t.Fatalf("reuse: %d %v", n, rows.Err())
	}
	rows.Close()
}

// Another connection's schema change reaches a kept statement.
func TestReview10SchemaChangeOtherConn(t *testing.T) {
	path := filepath.Join(t.TempDir(), "x.db")
	a, err := openDB("file:" + path)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	a.SetMaxOpenConns(1)
	b, err := openDB("file:" + path)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if _, err := a.Exec(`CREATE TABLE t (n INTEGER); INSERT INTO t VALUES (1)`); err != nil {
		t.Fatal(err)
	}
	cols := func() []string {
		rows, err := a.Query(`SELECT * FROM t`)
		if err != nil {
			t.Fatal(err)
		}
		defer rows.Close()
		c, _ := rows.Columns()
		return c
	}
	if c := cols(); len(c) != 1 {
		t.Fatal(c)
	}
	if _, err := b.Exec(`ALTER TABLE t ADD COLUMN m INTEGER`); err != nil {
		t.Fatal(err)
	}
	if c := cols(); len(c) != 2 {
		t.Fatalf("kept SELECT * after ALTER: %v", c)
	}
}

// A PRAGMA that takes effect when it is prepared, not when it runs, does
// nothing the second time its kept statement runs.
func TestReview10PragmaSynchronousKept(t *testing.T) {
	db := memDB(t)
	get := func() int {
		var v int
		if err := db.QueryRow(`SELECT synchronous FROM pragma_synchronous`).Scan(&v); err != nil {
			t.Fatal(err)
		}
		return v
	}
	for _, s := range []string{`PRAGMA synchronous = FULL`, `PRAGMA synchronous = OFF`, `PRAGMA synchronous = FULL`} {
		if _, err := db.Exec(s); err != nil {
			t.Fatal(err)
		}
		t.Logf("%s -> synchronous %d", s, get())
	}
	if v := get(); v != 2 {
		t.Errorf("after a second PRAGMA synchronous = FULL (kept): synchronous %d, want 2", v)
	}
	var v int
	if err := db.QueryRow(`PRAGMA synchronous`).Scan(&v); err != nil {
		t.Fatal(err)
	}
	db.Exec(`PRAGMA synchronous = NORMAL`)
	if err := db.QueryRow(`PRAGMA synchronous`).Scan(&v); err != nil {
		t.Fatal(err)
	}
	if v != 1 {
		t.Errorf("kept PRAGMA synchronous read after setting NORMAL: %d, want 1", v)
	}
}

func TestReview10PragmaSetterKept(t *testing.T) {
	db := memDB(t)
	get := func() int {
		var v int
		// a table-valued pragma reads at run time
		if err := db.QueryRow(`SELECT cache_size FROM pragma_cache_size`).Scan(&v); err != nil {
			t.Fatal(err)
		}
		return v
	}
	for _, s := range []string{`PRAGMA cache_size = 1234`, `PRAGMA cache_size = 999`, `PRAGMA cache_size = 1234`} {
		if _, err := db.Exec(s); err != nil {
			t.Fatal(err)
		}
	}
	if v := get(); v != 1234 {
		t.Errorf("after PRAGMA cache_size = 1234 (second run, kept): cache_size %d", v)
	}
	var v int
	if err := db.QueryRow(`PRAGMA cache_size`).Scan(&v); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec(`PRAGMA cache_size = 777`); err != nil {
		t.Fatal(err)
	}
	if err := db.QueryRow(`PRAGMA cache_size`).Scan(&v); err != nil {
		t.Fatal(err)
	}
	if v != 777 {
		t.Errorf("kept PRAGMA cache_size read after setting 777: %d", v)
	}
}

// A kept statement whose table another connection drops fails, and runs
// again once the table is back (with other columns).
func TestReview10DropRecreateOtherConn(t *testing.T) {
	path := filepath.Join(t.TempDir(), "y.db")
	a, err := openDB("file:" + path)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	a.SetMaxOpenConns(1)
	b, err := openDB("file:" + path)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if _, err := b.Exec(`CREATE TABLE t2 (n INTEGER); INSERT INTO t2 VALUES (5)`); err != nil {
		t.Fatal(err)
	}
	const q = `SELECT n FROM t2 WHERE n > ?`
	var n int
	if err := a.QueryRow(q, 0).Scan(&n); err != nil || n != 5 {
		t.Fatal(n, err)
	}
	if _, err := b.Exec(`DROP TABLE t2`); err != nil {
		t.Fatal(err)
	}
	if err := a.QueryRow(q, 0).Scan(&n); err == nil {
		t.Fatal("ran on a dropped table")
	} else {
		t.Logf("dropped: %v", err)
	}
	if _, err := b.Exec(`CREATE TABLE t2 (z TEXT, n INTEGER); INSERT INTO t2 VALUES ('a', 7)`); err != nil {
		t.Fatal(err)
	}
	if err := a.QueryRow(q, 0).Scan(&n); err != nil || n != 7 {
		t.Fatalf("after recreate: %d %v", n, err)
	}
}

// SQLITE_BUSY at a kept statement's step, then its reuse; an interrupt on a
// file connection (discarded by IsValid), then the statement on a new one.
func TestReview10BusyThenReuse(t *testing.T) {
	path := filepath.Join(t.TempDir(), "z.db")
	dsn := "file:" + path + "?_pragma=busy_timeout(50)&_pragma=journal_mode(WAL)"
	a, err := openDB(dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	a.SetMaxOpenConns(1)
	b, err := openDB(dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if _, err := a.Exec(`CREATE TABLE w (n INTEGER)`); err != nil {
		t.Fatal(err)
	}
	const ins = `INSERT INTO w VALUES (?)`
	if _, err := a.Exec(ins, 1); err != nil {
		t.Fatal(err)
	}
	bc, err := b.Conn(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := bc.ExecContext(context.Background(), `BEGIN IMMEDIATE`); err != nil {
		t.Fatal(err)
	}
	if _, err := a.Exec(ins, 2); err == nil {
		t.Fatal("no SQLITE_BUSY")
	} else {
		t.Logf("busy: %v", err)
	}
	if _, err := bc.ExecContext(context.Background(), `COMMIT`); err != nil {
		t.Fatal(err)
	}
	bc.Close()
	if _, err := a.Exec(ins, 3); err != nil {
		t.Fatalf("reuse after BUSY: %v", err)
	}
	const slow = `WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x+1 FROM c WHERE x < ?) SELECT count(*) FROM c`
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	var n int
	if err := a.QueryRowContext(ctx, slow, 1e9).Scan(&n); err == nil {
		t.Fatal("not interrupted")
	}
	if err := a.QueryRow(slow, 10).Scan(&n); err != nil || n != 10 {
		t.Fatalf("after interrupt: %d %v", n, err)
	}
	var k int
	if err := a.QueryRow(`SELECT count(*) FROM w`).Scan(&k); err != nil || k != 2 {
		t.Fatalf("rows: %d %v", k, err)
	}
}

// cachedRows embeds driver.Rows, hiding modernc's ColumnType* methods: the
// same query reports its declared type through sql.Open("sqlite") only.
// (Nothing in the repository calls ColumnTypes; this pins the difference.)
func TestReview10ColumnTypesThroughWrapper(t *testing.T) {
	db := memDB(t)
	rows, err := db.Query(`SELECT n FROM t`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	ct, err := rows.ColumnTypes()
	if err != nil {
		t.Fatal(err)
	}
	_, nullOK := ct[0].Nullable()
	t.Logf("through stmtConn: DatabaseTypeName %q ScanType %v nullable-known %v", ct[0].DatabaseTypeName(), ct[0].ScanType(), nullOK)
	if ct[0].DatabaseTypeName() != "INTEGER" {
		t.Errorf("DatabaseTypeName through stmtConn %q, want INTEGER (what modernc's rows report)", ct[0].DatabaseTypeName())
	}
}
