package sqlite

import (
	"context"
	"io"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/mailroom/mailroom"
)

// BenchmarkDrainStatement is the drain's marking statement alone, with its
// commit, on a fresh copy of one store holding 100,000 unread messages for
// bob, beside the statement it replaced and an in-place rewrite of the same
// rows (a same-size column, no index touched): the floor for any drain that
// changes every delivery row. It reports CPU per statement (cpu-ms/op).
func BenchmarkDrainStatement(b *testing.B) {
	const n = 100_000
	ctx := context.Background()
	tmpl := filepath.Join(b.TempDir(), "tmpl.db")
	s, err := Open(ctx, tmpl, Options{NoSync: true})
	if err != nil {
		b.Fatal(err)
	}
	alice, _ := s.EnsureAgent(ctx, "alice")
	bob, _ := s.EnsureAgent(ctx, "bob")
	d, _ := mailroom.SendInput{To: []string{"@bob"}, Subject: "s", Body: "b"}.Draft(0)
	d.OriginSessionID = "SESSION:bench"
	if err := s.SendMany(mailroom.WithCaller(ctx, alice), d, n); err != nil {
		b.Fatal(err)
	}
	s.Close()
	list := ` WHERE id IN (SELECT value FROM json_each(?3)) AND read_at IS NULL AND archived_at IS NULL AND +recipient_id = ?2`
	for _, tc := range []struct{ name, q string }{
		{"read_by", `UPDATE delivery SET read_at = ?1, read_by = ?2` + list},
		{"now", markPersonal + ` AND archived_at IS NULL AND +recipient_id = ?2`},
		{"in-place", `UPDATE delivery SET delivered_at = ?1` + list},
	} {
		b.Run(tc.name, func(b *testing.B) {
			var cpu time.Duration
			for b.Loop() {
				b.StopTimer()
				path := filepath.Join(b.TempDir(), "d.db")
				copyFile(b, tmpl, path)
				s, err := Open(ctx, path, Options{})
				if err != nil {
					b.Fatal(err)
				}
				var snap string
				if err := s.db.QueryRowContext(ctx, `SELECT json_group_array(id) FROM delivery WHERE recipient_id = ? AND read_at IS NULL AND archived_at IS NULL`, bob.ID).Scan(&snap); err != nil {
					b.Fatal(err)
				}
				b.StartTimer()
				c0 := processCPU()
				tx, err := s.db.BeginTx(ctx, nil)
				if err != nil {
					b.Fatal(err)
				}
				res, err := tx.ExecContext(ctx, tc.q, ts(time.Now()), bob.ID, snap)
				if err != nil {
					b.Fatal(err)
				}
				if err := tx.Commit(); err != nil {
					b.Fatal(err)
				}
				cpu += processCPU() - c0
				b.StopTimer()
				if k, _ := res.RowsAffected(); k != n {
					b.Fatalf("%d rows", k)
				}
				s.Close()
				b.StartTimer()
			}
			b.ReportMetric(float64(cpu.Microseconds())/1000/float64(b.N), "cpu-ms/op")
		})
	}
}

func copyFile(tb testing.TB, from, to string) {
	in, err := os.Open(from)
	if err != nil {
		tb.Fatal(err)
	}
	defer in.Close()
	out, err := os.Create(to)
	if err != nil {
		tb.Fatal(err)
	}
	if _, err := io.Copy(out, in); err != nil {
		tb.Fatal(err)
	}
	if err := out.Close(); err != nil {
		tb.Fatal(err)
	}
}
