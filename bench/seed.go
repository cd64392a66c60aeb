package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"iter"
	"math/rand/v2"
	"strings"
	"time"

	"github.com/mailroom/mailroom"
)

// SeedOptions shape a seeded dataset.
type SeedOptions struct {
	Messages int // how many messages
	Agents   int // agents agent-0 .. agent-(M-1); agent-0 holds role:reviewer and gets most mail
	Batch    int // messages per bulk call sharing one draft (default 100)
	Seed     uint64
	Progress io.Writer // a line per 10% when set
}

// SeedWords are in the seeded bodies: Common in every message, Rare in 1%.
const (
	Common = "status"
	Rare   = "zeppelin"
)

var vocabulary = strings.Fields(`checkpoint migration handoff review rollout
	gateway payments webhook billing index planner latency regression deploy
	release branch ticket incident postmortem schema budget queue retry lease
	worker session cursor inbox archive tokens benchmark profile flaky test
	ci pipeline cache vacuum replica failover shard backfill alert oncall`)

// BulkStore is a store with a bulk send path, as sqlite.Store has.
type BulkStore interface {
	mailroom.Store
	SendMany(ctx context.Context, d mailroom.Draft, n int) error
}

// SeqStore is a bulk store that takes the drafts one after another in one
// call, sharing transactions between them (sqlite.Store).
type SeqStore interface {
	SendSeq(ctx context.Context, sends iter.Seq[mailroom.BulkSend]) error
}

// Seed fills store through its bulk path (SendSeq, or SendMany): varied
// subjects and bodies, threads of replies, direct mail (most of it to
// agent-0), broadcasts and role mail.
func Seed(ctx context.Context, store BulkStore, o SeedOptions) error {
	if o.Messages < 0 || o.Agents < 2 {
		return fmt.Errorf("seed needs --messages >= 0 and --agents >= 2")
	}
	if o.Batch <= 0 {
		o.Batch = 100
	}
	rng := rand.New(rand.NewPCG(o.Seed, 42))
	agents := make([]mailroom.Identity, o.Agents)
	for i := range agents {
		id, err := store.EnsureAgent(ctx, fmt.Sprintf("agent-%d", i))
		if err != nil {
			return err
		}
		agents[i] = id
	}
	if err := store.GrantRole(ctx, agents[0].Name, "reviewer"); err != nil {
		return err
	}
	words := func(n int) string {
		w := make([]string, n)
		for i := range w {
			w[i] = vocabulary[rng.IntN(len(vocabulary))]
		}
		return strings.Join(w, " ")
	}
	start, step := time.Now(), max(1, o.Messages/10)
	var thread string // a message the next replies join
	var threadFrom mailroom.Identity
	var err error // what stopped drafts
	// drafts yields the recipe's sends in order; a thread root is one
	// message whose id (Sent) later replies name.
	drafts := func(yield func(mailroom.BulkSend) bool) {
		for done := 0; done < o.Messages; {
			k := min(o.Batch, o.Messages-done)
			from := agents[1+rng.IntN(o.Agents-1)]
			var to string
			switch x := rng.IntN(100); {
			case x < 60:
				to = "@agent-0"
			case x < 85:
				to = "@" + agents[rng.IntN(o.Agents)].Name
				if to == "@"+from.Name {
					to = "@agent-0"
				}
			case x < 95:
				to = "role:reviewer"
			default:
				to = "*"
			}
			body := words(8+rng.IntN(20)) + " " + Common + " " + words(4)
			if rng.IntN(100) == 0 {
				body += " " + Rare
			}
			in := mailroom.SendInput{To: []string{to}, Subject: words(3 + rng.IntN(4)), Body: body,
				Priority: []string{"low", "normal", "normal", "normal", "high"}[rng.IntN(5)]}
			if thread != "" && rng.IntN(4) == 0 {
				in.InReplyTo, from = thread, threadFrom // the root's sender may reply
			}
			var d mailroom.Draft
			if d, err = in.Draft(0); err != nil {
				return
			}
			d.OriginSessionID = "SESSION:seed"
			b := mailroom.BulkSend{From: from, Draft: d, Copies: k}
			if rng.IntN(20) == 0 {
				// A new thread root, on its own so that replies can name it.
				b.Copies = 1
				b.Sent = func(id string) { thread, threadFrom = id, from }
			}
			if !yield(b) {
				return
			}
			if o.Progress != nil && (done+b.Copies)/step != done/step {
				fmt.Fprintf(o.Progress, "seeded %d of %d messages in %v\n", done+b.Copies, o.Messages, time.Since(start).Round(time.Millisecond))
			}
			done += b.Copies
		}
	}
	var serr error
	if ss, ok := store.(SeqStore); ok {
		serr = ss.SendSeq(ctx, drafts)
	} else {
		for b := range drafts {
			fctx := mailroom.WithCaller(ctx, b.From)
			if b.Sent == nil {
				if serr = store.SendMany(fctx, b.Draft, b.Copies); serr != nil {
					break
				}
				continue
			}
			r, err := store.Send(fctx, b.Draft)
			if serr = err; err != nil {
				break
			}
			b.Sent(r.MessageID)
		}
	}
	return errors.Join(err, serr)
}
