package mcp_test

import (
	"bufio"
	"context"
	"flag"
	"fmt"
	"log"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/mailroom/mailroom"
	"github.com/mailroom/mailroom/postgres"
	"github.com/mailroom/mailroom/sqlite"
)

// seedMain is the seed program (see seedProgram): it fills a mailroom
// database with messages through the store's bulk path (SendMany: the send
// path, many messages per transaction) and prints the new ids in send
// order, or with -stamp sends one at a time through Send.
func seedMain(args []string) {
	flag := flag.NewFlagSet("seed", flag.ExitOnError)
	db := flag.String("db", "", "database file or postgres:// URL")
	from := flag.String("from", "", "sending agent (registered if new)")
	to := flag.String("to", "", "comma-separated addresses")
	n := flag.Int("n", 0, "how many messages")
	subject := flag.String("subject", "seed", "subject")
	every := flag.Duration("every", 0, "with -stamp: pause between sends")
	stamp := flag.Bool("stamp", false, "send one message at a time through Send, printing each id with its commit time (Unix ns) at once (latency benchmarks)")
	flag.Parse(args)

	ctx := context.Background()
	var s interface {
		mailroom.Store
		SendMany(ctx context.Context, d mailroom.Draft, n int) error
	}
	var err error
	if postgres.IsURL(*db) {
		s, err = postgres.Open(ctx, *db, postgres.Options{})
	} else {
		s, err = sqlite.Open(ctx, *db, sqlite.Options{})
	}
	if err != nil {
		log.Fatal(err)
	}
	defer s.Close()
	me, err := s.EnsureAgent(ctx, *from)
	if err != nil {
		log.Fatal(err)
	}
	ctx = mailroom.WithCaller(ctx, me)
	d, err := mailroom.SendInput{To: strings.Split(*to, ","), Subject: *subject, Body: "seeded"}.Draft(0)
	if err != nil {
		log.Fatal(err)
	}
	d.OriginSessionID = "SESSION:seed"
	if *stamp {
		for range *n {
			r, err := s.Send(ctx, d)
			if err != nil {
				log.Fatal(err)
			}
			fmt.Println(r.MessageID, time.Now().UnixNano())
			time.Sleep(*every)
		}
		return
	}
	for left := *n; left > 0; left -= 10000 {
		if err := s.SendMany(ctx, d, min(left, 10000)); err != nil {
			log.Fatal(err)
		}
	}
	// The new ids are the newest n of the sender's outbox.
	ids := make([]string, 0, *n)
	for len(ids) < *n {
		p, err := s.List(ctx, mailroom.ListFilter{Box: mailroom.BoxOutbox, IncludeArchived: true, Limit: min(*n-len(ids), mailroom.MaxLimit), Offset: len(ids)})
		if err != nil {
			log.Fatal(err)
		}
		if len(p.Messages) == 0 {
			log.Fatalf("outbox holds %d messages, want %d", len(ids), *n)
		}
		for _, r := range p.Messages {
			ids = append(ids, r.MessageID)
		}
	}
	slices.Reverse(ids)
	out := bufio.NewWriter(os.Stdout)
	defer out.Flush()
	for _, id := range ids {
		fmt.Fprintln(out, id)
	}
}
