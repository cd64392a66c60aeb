// Command seed fills a mailroom database with messages through the store's
// own Send path. The mcp tests build it without the race detector, which
// slows every SQLite statement about tenfold, so that tests needing
// thousands of messages stay fast. It prints the new ids in send order.
package main

import (
	"bufio"
	"context"
	"flag"
	"fmt"
	"log"
	"os"
	"strings"

	"github.com/mailroom/mailroom"
	"github.com/mailroom/mailroom/sqlite"
)

func main() {
	db := flag.String("db", "", "database file")
	from := flag.String("from", "", "sending agent (registered if new)")
	to := flag.String("to", "", "comma-separated addresses")
	n := flag.Int("n", 0, "how many messages")
	subject := flag.String("subject", "seed", "subject prefix; the message number follows")
	flag.Parse()

	ctx := context.Background()
	s, err := sqlite.Open(ctx, *db, sqlite.Options{})
	if err != nil {
		log.Fatal(err)
	}
	defer s.Close()
	me, err := s.EnsureAgent(ctx, *from)
	if err != nil {
		log.Fatal(err)
	}
	ctx = mailroom.WithCaller(ctx, me)
	out := bufio.NewWriter(os.Stdout)
	defer out.Flush()
	for i := range *n {
		d, err := mailroom.SendInput{To: strings.Split(*to, ","), Subject: fmt.Sprintf("%s %d", *subject, i), Body: "seeded"}.Draft(0)
		if err != nil {
			log.Fatal(err)
		}
		d.OriginSessionID = "SESSION:seed"
		r, err := s.Send(ctx, d)
		if err != nil {
			log.Fatal(err)
		}
		fmt.Fprintln(out, r.MessageID)
	}
}
