package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/mailroom/mailroom"
)

// The change signal on PostgreSQL: every transaction that may change an
// inbox calls pg_notify on the schema's channel with whose inboxes it
// touched; PostgreSQL delivers the notification at commit (and drops it on
// rollback) to every session listening, on any instance. Each store has one
// listening connection, only while someone is subscribed, and fans out
// in-process through a mailroom.ChangeHub.

// changePayload is a notification's payload: identity ids and role names,
// or all when the commit cannot say (a broadcast).
type changePayload struct {
	All        bool     `json:"a,omitempty"`
	Identities []int64  `json:"i,omitempty"`
	Roles      []string `json:"r,omitempty"`
}

// maxPayloadEntries keeps a payload short; maxPayloadBytes keeps it below
// PostgreSQL's 8,000-byte limit (pg_notify fails the transaction above it),
// which 200 long role names pass.
const (
	maxPayloadEntries = 200
	maxPayloadBytes   = 7000
)

// notify queues a change notification in tx; it is sent if tx commits.
func (s *Store) notify(ctx context.Context, tx pgx.Tx, c mailroom.Change) error {
	if !c.All && len(c.Identities)+len(c.Roles) == 0 {
		return nil // no inbox changed: nobody to wake
	}
	_, err := tx.Exec(ctx, notifySQL, s.channel, s.payload(c))
	return err
}

// notifySQL takes the channel and the payload.
const notifySQL = `SELECT pg_notify($1, $2)`

// payload is the notification payload for c.
func (s *Store) payload(c mailroom.Change) string {
	p := changePayload{All: c.All, Identities: c.Identities, Roles: c.Roles}
	if p.All || len(p.Identities)+len(p.Roles) > maxPayloadEntries {
		p = changePayload{All: true}
	}
	b, _ := json.Marshal(p)
	if len(b) > maxPayloadBytes {
		b, _ = json.Marshal(changePayload{All: true})
	}
	return string(b)
}

// deliveriesChange is whose inboxes the deliveries of messages seqs are in:
// a recipient mailbox is an identity's or a role's (one id space).
func deliveriesChange(ctx context.Context, tx pgx.Tx, seqs []int64) (mailroom.Change, error) {
	rows, err := tx.Query(ctx, `SELECT DISTINCT d.recipient, r.name FROM delivery d LEFT JOIN role r ON r.mailbox_id = d.recipient WHERE d.message_seq = ANY($1)`, seqs)
	if err != nil {
		return mailroom.Change{}, err
	}
	defer rows.Close()
	var c mailroom.Change
	for rows.Next() {
		var mailbox int64
		var role *string
		if err := rows.Scan(&mailbox, &role); err != nil {
			return mailroom.Change{}, err
		}
		if role != nil {
			c.Roles = append(c.Roles, *role)
		} else {
			c.Identities = append(c.Identities, mailbox)
		}
	}
	return c, rows.Err()
}

// Subscribe returns a subscription to the store's change signal: it is
// signalled after every commit that may change an inbox, by this instance
// or any other sharing the database. The first subscriber waits (up to a
// few seconds) for the listener's LISTEN, so that no commit after Subscribe
// returns goes unseen.
func (s *Store) Subscribe() *mailroom.Subscription {
	sub := s.changes.Subscribe()
	s.mu.Lock()
	ready := s.listening
	s.mu.Unlock()
	select {
	case <-ready:
	case <-time.After(5 * time.Second):
		// The listener is failing; it signals everyone once it is back.
	}
	return sub
}

// Changes returns the store's in-process hub (tests count its subscribers).
func (s *Store) Changes() *mailroom.ChangeHub { return s.changes }

// listenIdleCheck is how often a listening watcher checks whether anyone
// is still subscribed; it costs one wake-up per interval, only while
// listening.
const listenIdleCheck = time.Second

// watch is the store's one listener. It sleeps until the hub has a
// subscriber, then holds one pooled connection in LISTEN and publishes each
// notification; when the last subscriber leaves it gives the connection
// back. Hand-written over pgx's WaitForNotification: the loop is small, and
// it must cooperate with the hub's idle state.
func (s *Store) watch(ctx context.Context) {
	defer close(s.watchDone)
	for {
		select {
		case <-ctx.Done():
			return
		case <-s.changes.Active():
		}
		if err := s.listen(ctx); err != nil && ctx.Err() == nil {
			s.log.Warn("change listener", "err", err)
			// Whatever committed meanwhile is unknown: say so, and retry.
			s.changes.Publish(mailroom.Change{All: true})
			select {
			case <-ctx.Done():
				return
			case <-time.After(time.Second):
			}
		}
	}
}

// listen holds one LISTEN session until nobody is subscribed, ctx ends or
// the connection fails.
func (s *Store) listen(ctx context.Context) error {
	conn, err := s.pool.Acquire(ctx)
	if err != nil {
		return err
	}
	healthy := false
	defer func() {
		if !healthy {
			conn.Conn().Close(context.Background()) // never back to the pool in LISTEN
		}
		conn.Release()
	}()
	channel := pgx.Identifier{s.channel}.Sanitize()
	if _, err := conn.Exec(ctx, `LISTEN `+channel); err != nil {
		return err
	}
	s.mu.Lock()
	close(s.listening)
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		s.listening = make(chan struct{})
		s.mu.Unlock()
	}()
	for {
		wctx, cancel := context.WithTimeout(ctx, listenIdleCheck)
		n, err := conn.Conn().WaitForNotification(wctx)
		cancel()
		switch {
		case err == nil:
			s.changes.Publish(parseChange(n.Payload))
			continue
		case ctx.Err() != nil:
			return nil
		case !errors.Is(err, context.DeadlineExceeded) || conn.Conn().IsClosed():
			return err
		}
		if s.changes.Len() == 0 {
			if _, err := conn.Exec(ctx, `UNLISTEN `+channel); err != nil {
				return err
			}
			healthy = true
			return nil
		}
	}
}

func parseChange(payload string) mailroom.Change {
	var p changePayload
	if err := json.Unmarshal([]byte(payload), &p); err != nil || p.All || len(p.Identities)+len(p.Roles) == 0 {
		return mailroom.Change{All: true}
	}
	return mailroom.Change{Identities: p.Identities, Roles: p.Roles}
}

// startWatcher runs the listener for the store's lifetime.
func (s *Store) startWatcher() {
	ctx, cancel := context.WithCancel(context.Background())
	s.stopWatch = cancel
	s.listening = make(chan struct{})
	s.watchDone = make(chan struct{})
	go s.watch(ctx)
}

// sendChange is the change a send makes: its personal recipients, its
// role queues, or everyone for a broadcast.
func (p sendPlan) change() mailroom.Change {
	if p.broadcast {
		return mailroom.Change{All: true}
	}
	return mailroom.Change{Identities: slices.Clone(p.direct), Roles: slices.Clone(p.roles)}
}
