package bench_test

import (
	"context"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/mailroom/mailroom"
	"github.com/mailroom/mailroom/sqlite"
)

// cpuTime is this process's CPU time so far (user and system): on a shared
// machine it says what an operation costs where wall time says how busy the
// machine was.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// drainStore is a fresh store where alice has sent n unread messages of
// draft d to the address to (bob holds role:ops when it is to it).
func drainStore(b *testing.B, n int, to string) (*sqlite.Store, mailroom.Identity, mailroom.Identity, mailroom.Draft) {
	b.Helper()
	ctx := context.Background()
	s, err := sqlite.Open(ctx, filepath.Join(b.TempDir(), "d.db"), sqlite.Options{})
	if err != nil {
		b.Fatal(err)
	}
	alice, _ := s.EnsureAgent(ctx, "alice")
	bob, _ := s.EnsureAgent(ctx, "bob")
	if to == "role:ops" {
		if err := s.GrantRole(ctx, "bob", "ops"); err != nil {
			b.Fatal(err)
		}
	}
	d, _ := mailroom.SendInput{To: []string{to}, Subject: "s", Body: "b"}.Draft(0)
	d.OriginSessionID = "SESSION:bench"
	if err := s.SendMany(mailroom.WithCaller(ctx, alice), d, n); err != nil {
		b.Fatal(err)
	}
	return s, alice, bob, d
}

// BenchmarkDrainCPU is mark_read({all: true}) over 100,000 unread messages
// in process, reporting the process CPU per drain next to the wall time.
func BenchmarkDrainCPU(b *testing.B) {
	benchDrain(b, func(*sqlite.Store, context.Context, context.Context, mailroom.Draft) string { return "" })
}

// BenchmarkDrainRowsCPU is BenchmarkDrainCPU through a watermark with one
// message after it: a drain that is not of the whole inbox (until session
// 6 it marked its rows; now a read mark through the watermark), with CPU
// per drain.
func BenchmarkDrainRowsCPU(b *testing.B) {
	benchDrain(b, func(s *sqlite.Store, alice, bob context.Context, d mailroom.Draft) string {
		f, _ := mailroom.ListInput{}.Filter()
		p, err := s.List(bob, f)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := s.Send(alice, d); err != nil {
			b.Fatal(err)
		}
		return *p.Watermark
	})
}

// BenchmarkDrainThroughCPU is BenchmarkDrainRowsCPU with 1,000 messages
// after the watermark (a burst since the listing): their counts are moved
// back one by one.
func BenchmarkDrainThroughCPU(b *testing.B) {
	benchDrain(b, func(s *sqlite.Store, alice, bob context.Context, d mailroom.Draft) string {
		f, _ := mailroom.ListInput{}.Filter()
		p, err := s.List(bob, f)
		if err != nil {
			b.Fatal(err)
		}
		if err := s.SendMany(alice, d, 1000); err != nil {
			b.Fatal(err)
		}
		return *p.Watermark
	})
}

// BenchmarkDrainRolesCPU is mark_read({all: true, includeRoles: true})
// by bob, who holds role:ops, over 100,000 unread messages to the role and
// none personal: the role queue's own read state, with CPU per drain.
func BenchmarkDrainRolesCPU(b *testing.B) {
	benchDrainOf(b, "role:ops", true, func(*sqlite.Store, context.Context, context.Context, mailroom.Draft) string { return "" })
}

// benchDrain drains bob's 100,000 unread through the watermark through
// returns (called untimed on each fresh store) and reports the process CPU
// per drain.
func benchDrain(b *testing.B, through func(s *sqlite.Store, alice, bob context.Context, d mailroom.Draft) string) {
	benchDrainOf(b, "@bob", false, through)
}

// benchDrainOf is benchDrain of 100,000 messages to the address to, with
// includeRoles roles.
func benchDrainOf(b *testing.B, to string, roles bool, through func(s *sqlite.Store, alice, bob context.Context, d mailroom.Draft) string) {
	const n = 100_000
	ctx := context.Background()
	var cpu time.Duration
	for b.Loop() {
		b.StopTimer()
		s, alice, bob, d := drainStore(b, n, to)
		w := through(s, mailroom.WithCaller(ctx, alice), mailroom.WithCaller(ctx, bob), d)
		b.StartTimer()
		c0 := cpuTime()
		rc, err := s.MarkAllRead(mailroom.WithCaller(ctx, bob), w, roles)
		cpu += cpuTime() - c0
		b.StopTimer()
		if err != nil || rc.DurableCount != n || rc.Status != "read" {
			b.Fatalf("%+v %v", rc, err)
		}
		s.Close()
		b.StartTimer()
	}
	b.ReportMetric(float64(cpu.Milliseconds())/float64(b.N), "cpu-ms/op")
}
