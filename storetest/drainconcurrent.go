package storetest

import (
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/mailroom/mailroom"
)

// Two of bob's sessions drain at once (the whole inbox, or through the
// newest message a listing just showed) while alice and carol keep
// sending: every message is read, by one drain at that drain's readAt,
// and counted by that drain alone (the groups of messages sharing a readAt
// are the drains' reads), and counts match the listings after.
func testConcurrentDrainsReadEachMessageOnce(t *testing.T, s mailroom.Store) {
	e := newEnv(t, s)
	const senders, each, drainers, drains = 2, 30, 2, 12
	type drain struct {
		through string
		rc      mailroom.DrainReceipt
	}
	var (
		mu   sync.Mutex
		done []drain
		wg   sync.WaitGroup
	)
	errs := make(chan error, senders+drainers)
	// The drains start once every sender's first message is in: started
	// together, the drains could all end, empty, before any send (seen
	// under -race in a loaded CI run), and nothing ran concurrently.
	var first sync.WaitGroup
	first.Add(senders)
	for w := range senders {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sent := sync.OnceFunc(first.Done)
			defer sent()
			from := []string{"alice", "carol"}[w]
			for range each {
				d, _ := mailroom.SendInput{To: []string{"@bob"}, Subject: "s", Body: "b"}.Draft(0)
				d.OriginSessionID = "SESSION:c"
				if _, err := s.Send(e.as(from), d); err != nil {
					errs <- err
					return
				}
				sent()
			}
		}()
	}
	for w := range drainers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			first.Wait()
			for i := range drains {
				through := ""
				if (i+w)%2 == 1 {
					f, err := mailroom.ListInput{Limit: ptr(1)}.Filter()
					if err != nil {
						errs <- err
						return
					}
					p, err := s.List(e.as("bob"), f)
					if err != nil {
						errs <- err
						return
					}
					if len(p.Messages) == 0 {
						continue
					}
					through = p.Messages[0].MessageID
				}
				rc, err := s.MarkAllRead(e.as("bob"), through, false)
				if err != nil {
					errs <- err
					return
				}
				mu.Lock()
				done = append(done, drain{through, rc})
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	rc, err := s.MarkAllRead(e.as("bob"), "", false)
	if err != nil {
		t.Fatal(err)
	}
	done = append(done, drain{"", rc})

	f, err := mailroom.ListInput{IncludeArchived: true, Limit: ptr(200)}.Filter()
	if err != nil {
		t.Fatal(err)
	}
	p, err := s.List(e.as("bob"), f)
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Messages) != senders*each {
		t.Fatalf("bob lists %d messages, want %d", len(p.Messages), senders*each)
	}
	shown := map[time.Time]int{}
	for _, m := range p.Messages {
		if m.ReadAt == nil {
			t.Errorf("%s unread after the last drain", m.MessageID)
			continue
		}
		if got := e.readAt("bob", m.MessageID); got == nil || !got.Equal(*m.ReadAt) {
			t.Errorf("%s: get says readAt %v, the listing %v", m.MessageID, got, m.ReadAt)
		}
		shown[m.ReadAt.UTC()]++
	}
	// One readAt per drain, and each message counted by the drain whose
	// write read it: the groups of messages sharing a readAt are exactly
	// the drains' reads, and the reads add up to what was sent.
	var reads, groups []int
	total := 0
	for _, d := range done {
		total += d.rc.ReadCount
		if d.rc.ReadCount == 0 {
			continue
		}
		reads = append(reads, d.rc.ReadCount)
		if s.Durable() && d.rc.DurableCount != d.rc.ReadCount {
			t.Errorf("drain at %v (through %q): read %d, durable %d", d.rc.SnapshotAt, d.through, d.rc.ReadCount, d.rc.DurableCount)
		}
		if d.rc.MatchedCount != d.rc.ReadCount || d.rc.Status != "read" {
			t.Errorf("drain at %v (through %q): %+v", d.rc.SnapshotAt, d.through, d.rc)
		}
	}
	for _, n := range shown {
		groups = append(groups, n)
	}
	slices.Sort(reads)
	slices.Sort(groups)
	if !slices.Equal(reads, groups) {
		t.Errorf("the drains read %v; the messages share readAts in groups of %v: not one group per drain", reads, groups)
	}
	if total != senders*each {
		t.Errorf("the drains read %d in all, for the %d sent", total, senders*each)
	}
	e.checkCounts(t, "bob", "after concurrent drains")
}
