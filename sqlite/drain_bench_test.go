package sqlite

import (
	"context"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
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
	tmpl, _, bob, _, _ := unreadTemplate(b, n)
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
				args := []any{ts(time.Now()), bob.ID, snap}
				if strings.Contains(tc.q, "?4") {
					args = append(args, anyTime) // markPersonal's bound
				}
				res, err := tx.ExecContext(ctx, tc.q, args...)
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

// unreadTemplate is a closed store file where alice has sent bob n unread
// messages of draft d (carol is an agent too), for benchmarks to copy.
func unreadTemplate(b *testing.B, n int) (path string, alice, bob, carol mailroom.Identity, d mailroom.Draft) {
	b.Helper()
	ctx := context.Background()
	path = filepath.Join(b.TempDir(), "tmpl.db")
	s, err := Open(ctx, path, Options{NoSync: true})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	alice, _ = s.EnsureAgent(ctx, "alice")
	bob, _ = s.EnsureAgent(ctx, "bob")
	carol, _ = s.EnsureAgent(ctx, "carol")
	d, _ = mailroom.SendInput{To: []string{"@bob"}, Subject: "s", Body: "b"}.Draft(0)
	d.OriginSessionID = "SESSION:bench"
	if err := s.SendMany(mailroom.WithCaller(ctx, alice), d, n); err != nil {
		b.Fatal(err)
	}
	return path, alice, bob, carol, d
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

// BenchmarkDrainFold is the deferred half of a drain by a read mark: on a
// fresh copy of a store with 100,000 unread for bob, a drain writes the
// mark, then the fold writes it into the rows chunk by chunk (as the
// store's folder does, stepped here). "fold" reports the fold's CPU and
// wall per 100,000 (fold-cpu-ms/op, fold-ms/op); "send" reports the wall
// latency of sends from another agent while a fold runs beside them
// (send-p50-ms, send-p99-ms, send-max-ms; fold-ms the fold's wall
// meanwhile), and "send-idle" 400 of the same sends with no fold.
func BenchmarkDrainFold(b *testing.B) {
	const n = 100_000
	ctx := context.Background()
	tmpl, _, bob, carol, d := unreadTemplate(b, n)
	drained := func(b *testing.B) *Store {
		path := filepath.Join(b.TempDir(), "d.db")
		copyFile(b, tmpl, path)
		s, err := Open(ctx, path, Options{Hooks: &Hooks{HoldFold: true}})
		if err != nil {
			b.Fatal(err)
		}
		rc, err := s.MarkAllRead(mailroom.WithCaller(ctx, bob), "", false)
		if err != nil || rc.DurableCount != n || s.marks.Load() != 1 {
			b.Fatalf("%+v %v", rc, err)
		}
		return s
	}
	foldAll := func(b *testing.B, s *Store) {
		for {
			more, err := s.foldStep(ctx)
			if err != nil {
				b.Error(err)
				return
			}
			if !more {
				return
			}
		}
	}
	b.Run("fold", func(b *testing.B) {
		var cpu, wall time.Duration
		for b.Loop() {
			b.StopTimer()
			s := drained(b)
			b.StartTimer()
			c0, t0 := processCPU(), time.Now()
			foldAll(b, s)
			cpu, wall = cpu+processCPU()-c0, wall+time.Since(t0)
			b.StopTimer()
			var left int
			if err := s.db.QueryRowContext(ctx, `SELECT count(*) FROM delivery WHERE recipient_id = ? AND read_at IS NULL`, bob.ID).Scan(&left); err != nil || left != 0 {
				b.Fatalf("%d left unread %v", left, err)
			}
			s.Close()
			b.StartTimer()
		}
		b.ReportMetric(float64(cpu.Microseconds())/1000/float64(b.N), "fold-cpu-ms/op")
		b.ReportMetric(float64(wall.Microseconds())/1000/float64(b.N), "fold-ms/op")
	})
	sends := func(b *testing.B, fold bool) {
		var s *Store // each round's drained copy
		var lat []time.Duration
		var wall time.Duration
		carolCtx := mailroom.WithCaller(ctx, carol)
		send := func() {
			t0 := time.Now()
			if _, err := s.Send(carolCtx, d); err != nil {
				b.Fatal(err)
			}
			lat = append(lat, time.Since(t0))
		}
		for b.Loop() {
			b.StopTimer()
			s = drained(b)
			if _, err := s.Send(carolCtx, d); err != nil { // warm: statements prepared
				b.Fatal(err)
			}
			b.StartTimer()
			if !fold {
				for range 400 {
					send()
				}
			} else {
				done := make(chan time.Duration)
				go func() {
					t0 := time.Now()
					foldAll(b, s)
					done <- time.Since(t0)
				}()
			loop:
				for {
					select {
					case w := <-done:
						wall += w
						break loop
					default:
					}
					send()
				}
			}
			b.StopTimer()
			s.Close()
			b.StartTimer()
		}
		slices.Sort(lat)
		b.ReportMetric(float64(lat[len(lat)/2].Microseconds())/1000, "send-p50-ms")
		b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds())/1000, "send-p99-ms")
		b.ReportMetric(float64(lat[len(lat)-1].Microseconds())/1000, "send-max-ms")
		b.ReportMetric(float64(len(lat))/float64(b.N), "sends/op")
		if fold {
			b.ReportMetric(float64(wall.Microseconds())/1000/float64(b.N), "fold-ms/op")
		}
	}
	b.Run("send", func(b *testing.B) { sends(b, true) })
	b.Run("send-idle", func(b *testing.B) { sends(b, false) })
}

// BenchmarkSecondDrain is a small drain right after a drain by a mark: on
// a fresh copy of a store with 100,000 unread for bob, a drain writes the
// mark (the folder held, so none of it is folded), carol sends bob one
// message, and bob drains again. It reports the second drain's CPU
// (cpu-ms/op): it used to fold the first mark's 100,000 rows in its own
// request.
func BenchmarkSecondDrain(b *testing.B) {
	const n = 100_000
	ctx := context.Background()
	tmpl, _, bob, carol, d := unreadTemplate(b, n)
	bobCtx := mailroom.WithCaller(ctx, bob)
	var cpu time.Duration
	for b.Loop() {
		b.StopTimer()
		path := filepath.Join(b.TempDir(), "d.db")
		copyFile(b, tmpl, path)
		s, err := Open(ctx, path, Options{Hooks: &Hooks{HoldFold: true}})
		if err != nil {
			b.Fatal(err)
		}
		if rc, err := s.MarkAllRead(bobCtx, "", false); err != nil || rc.DurableCount != n || s.marks.Load() != 1 {
			b.Fatalf("%+v %v", rc, err)
		}
		if _, err := s.Send(mailroom.WithCaller(ctx, carol), d); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
		c0 := processCPU()
		rc, err := s.MarkAllRead(bobCtx, "", false)
		cpu += processCPU() - c0
		b.StopTimer()
		if err != nil || rc.ReadCount != 1 || rc.DurableCount != 1 {
			b.Fatalf("%+v %v", rc, err)
		}
		s.Close()
		b.StartTimer()
	}
	b.ReportMetric(float64(cpu.Microseconds())/1000/float64(b.N), "cpu-ms/op")
}
