package sqlite

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
	"testing"
)

// stmtConnOf runs fn on db's one connection's stmtConn.
func stmtConnOf(t *testing.T, db *sql.DB, fn func(c *stmtConn)) {
	t.Helper()
	conn, err := db.Conn(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if err := conn.Raw(func(dc any) error { fn(dc.(*stmtConn)); return nil }); err != nil {
		t.Fatal(err)
	}
}

func memDB(t *testing.T) *sql.DB {
	t.Helper()
	db, err := openDB("file::memory:")
	if err != nil {
		t.Fatal(err)
	}
	db.SetMaxOpenConns(1)
	t.Cleanup(func() { db.Close() })
	if _, err := db.Exec(`CREATE TABLE t (n INTEGER)`); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec(`INSERT INTO t VALUES (1), (2), (3)`); err != nil {
		t.Fatal(err)
	}
	return db
}

func TestStmtConnKeepsAStatementOnceAndReusesIt(t *testing.T) {
	t.Parallel()
	db := memDB(t)
	const q = `SELECT count(*) FROM t WHERE n > ?`
	var first *cachedStmt
	for i := range 3 {
		tx, err := db.Begin()
		if err != nil {
			t.Fatal(err)
		}
		var n int
		if err := tx.QueryRow(q, i).Scan(&n); err != nil || n != 3-i {
			t.Fatalf("count > %d: %d, %v", i, n, err)
		}
		tx.Rollback()
		stmtConnOf(t, db, func(c *stmtConn) {
			e, ok := c.bySQL[q]
			if !ok {
				t.Fatalf("run %d: not kept", i)
			}
			if first == nil {
				first = e.Value.(*cachedStmt)
			} else if e.Value.(*cachedStmt) != first {
				t.Fatalf("run %d: prepared again", i)
			}
			if first.busy {
				t.Fatalf("run %d: still busy after its rows closed", i)
			}
		})
	}
}

func TestStmtConnRunsAStatementInsideItsOwnRows(t *testing.T) {
	t.Parallel()
	db := memDB(t)
	const q = `SELECT n FROM t WHERE n >= ? ORDER BY n`
	tx, err := db.Begin()
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback()
	outer, err := tx.Query(q, 1)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for outer.Next() {
		var n int
		if err := outer.Scan(&n); err != nil {
			t.Fatal(err)
		}
		// The same text while its rows are open: a copy of its own, which
		// must not reset the outer rows.
		inner, err := tx.Query(q, n)
		if err != nil {
			t.Fatal(err)
		}
		k := 0
		for inner.Next() {
			k++
		}
		if err := inner.Close(); err != nil {
			t.Fatal(err)
		}
		got = append(got, fmt.Sprintf("%d:%d", n, k))
	}
	if err := outer.Err(); err != nil {
		t.Fatal(err)
	}
	outer.Close()
	if want := "1:3 2:2 3:1"; strings.Join(got, " ") != want {
		t.Fatalf("got %q, want %q", strings.Join(got, " "), want)
	}
}

func TestStmtConnStaysWithinItsBounds(t *testing.T) {
	t.Parallel()
	db := memDB(t)
	// One statement's rows stay open while the rest push it out (in a
	// transaction: open rows hold the one connection).
	tx, err := db.Begin()
	if err != nil {
		t.Fatal(err)
	}
	held, err := tx.Query(`SELECT n FROM t ORDER BY n`)
	if err != nil {
		t.Fatal(err)
	}
	pad := strings.Repeat(" ", 4<<10) // 4 KB of SQL each: the SQL bound binds first
	for i := range 400 {
		var n int
		if err := tx.QueryRow(fmt.Sprintf(`SELECT %d%s`, i, pad)).Scan(&n); err != nil || n != i {
			t.Fatalf("statement %d: %d, %v", i, n, err)
		}
	}
	// A statement pushed out while running still reads its rows, and is
	// closed after them.
	k := 0
	for held.Next() {
		k++
	}
	if err := held.Err(); err != nil || k != 3 {
		t.Fatalf("rows of an evicted statement: %d, %v", k, err)
	}
	held.Close()
	tx.Rollback()
	stmtConnOf(t, db, func(c *stmtConn) {
		if c.bytes > maxCachedSQL || c.lru.Len() > maxCachedStmts || c.lru.Len() != len(c.bySQL) {
			t.Fatalf("keeps %d statements (%d in its index), %d bytes of SQL", c.lru.Len(), len(c.bySQL), c.bytes)
		}
		if _, ok := c.bySQL[fmt.Sprintf(`SELECT %d%s`, 399, pad)]; !ok {
			t.Fatal("the last statement run is not kept")
		}
	})
	for i := range 400 { // short ones: the count bound
		if _, err := db.Exec(fmt.Sprintf(`SELECT %d`, i)); err != nil {
			t.Fatal(err)
		}
	}
	stmtConnOf(t, db, func(c *stmtConn) {
		if c.lru.Len() != maxCachedStmts {
			t.Fatalf("keeps %d statements, want %d", c.lru.Len(), maxCachedStmts)
		}
	})
}

func TestStmtConnDoesNotKeepAMigration(t *testing.T) {
	t.Parallel()
	db := memDB(t)
	script := `CREATE TABLE u (n INTEGER); INSERT INTO u VALUES (1);`
	if _, err := db.ExecContext(withoutStmtCache(context.Background()), script); err != nil {
		t.Fatal(err)
	}
	var n int
	if err := db.QueryRow(`SELECT count(*) FROM u`).Scan(&n); err != nil || n != 1 {
		t.Fatalf("the script's effect: %d, %v", n, err)
	}
	stmtConnOf(t, db, func(c *stmtConn) {
		if _, ok := c.bySQL[script]; ok {
			t.Fatal("a migration's script is kept")
		}
	})
}
