package sqlite

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"path/filepath"
	"time"

	"github.com/fsnotify/fsnotify"

	"github.com/mailroom/mailroom"
)

// Change watcher timing.
const (
	// DefaultChangePoll is how often the watcher asks SQLite whether
	// another connection committed when the file system reports no events
	// (Options.NoFileEvents, or a file watch could not be made).
	DefaultChangePoll = 25 * time.Millisecond
	// changeBackstop is how often the watcher checks while it waits for file
	// events anyway, so that a lost event (a queue overflow) costs at most
	// this much latency.
	changeBackstop = time.Second
	// A file event comes with the first page a commit writes, before the
	// commit is visible (the writer still syncs and publishes it in shared
	// memory, which makes no event). So after an event the watcher checks
	// again and again, 1 ms after it and then at doubling steps up to
	// changeStep apart, until changeHot after the last event.
	changeFirst = time.Millisecond
	changeStep  = 10 * time.Millisecond
	changeHot   = 200 * time.Millisecond
)

// Subscribe returns a subscription to the store's change signal: it is
// signalled after commits by this store at once, and after commits by any
// other connection or process sharing the file within milliseconds (one
// poll interval when there are no file events). The first subscriber waits
// (a few milliseconds; at most a few seconds) for the watcher's baseline,
// so that every commit after Subscribe returns is seen.
func (s *Store) Subscribe() *mailroom.Subscription {
	s.readyMu.Lock()
	sub := s.changes.Subscribe()
	ready := s.ready
	s.readyMu.Unlock()
	if ready != nil {
		t := time.NewTimer(s.readyWait)
		defer t.Stop()
		select {
		case <-ready:
		case <-t.C:
			// The watcher is slow or failing; it signals everyone once it
			// has a baseline.
			s.lateSubscribe.Store(true)
		}
	}
	return sub
}

// Changes returns the store's in-process hub (tests count its subscribers).
func (s *Store) Changes() *mailroom.ChangeHub { return s.changes }

// watch is the store's one watcher. SQLite has no cross-process
// notification, but PRAGMA data_version, asked on one connection, changes
// whenever any other connection commits, so one check answers for the
// whole process, however many subscribers it has. The watcher checks when
// the file system reports a write to the database or its -wal or -journal
// file (every commit writes one of them with write(2); fsnotify: inotify,
// kqueue, ReadDirectoryChangesW) and for a short while after (see
// changeHot), and once a second in case an event was lost; where no file
// watch can be made it polls every poll interval. It
// runs only while someone is subscribed, so an unwatched store costs
// nothing, and an idle watched one is a goroutine blocked on a channel.
//
// Hand-written because SQLite offers nothing else that crosses processes:
// sqlite3_update_hook and commit hooks see only their own connection. File
// events alone are not enough (a checkpoint writes without a commit, and
// events can be lost), so they only say when to ask data_version, and
// polling data_version alone cost 1.3% of a core just to wake every 10 ms on
// this project's shared machine.
func (s *Store) watch(ctx context.Context, db *sql.DB, poll time.Duration) {
	defer close(s.watchDone)
	defer s.watchReady() // a closed store keeps no subscriber waiting
	failed := false
	for {
		select {
		case <-ctx.Done():
			return
		case <-s.changes.Active():
		}
		err := s.watchActive(ctx, db, poll, failed)
		if failed = err != nil && ctx.Err() == nil; failed {
			s.log.Warn("change watcher", "err", err)
			// Whatever happened meanwhile is unknown: say so, then retry.
			s.changes.Publish(mailroom.Change{All: true})
			if !sleep(ctx, time.Second) {
				return
			}
		}
	}
}

// watchReady tells subscribers waiting in Subscribe that the watcher has
// its baseline.
func (s *Store) watchReady() {
	s.readyMu.Lock()
	defer s.readyMu.Unlock()
	if s.ready != nil {
		close(s.ready)
		s.ready = nil
	}
}

// watchStop reports whether the watcher may stop (nobody is subscribed),
// and if so makes the next subscriber wait for the next baseline; under
// readyMu, so that no Subscribe falls between.
func (s *Store) watchStop() bool {
	s.readyMu.Lock()
	defer s.readyMu.Unlock()
	if s.changes.Len() > 0 {
		return false
	}
	if s.ready == nil {
		s.ready = make(chan struct{})
	}
	return true
}

// watchActive watches until nobody is subscribed, ctx ends or the watch
// connection fails. After a failure (retry), commits may have gone unseen
// since: it signals everyone once it has its baseline again.
func (s *Store) watchActive(ctx context.Context, db *sql.DB, poll time.Duration, retry bool) error {
	s.watching.Store(true)
	defer s.watching.Store(false)
	conn, err := db.Conn(ctx)
	if err != nil {
		return err
	}
	defer conn.Close()
	// A check's two queries are prepared once: parsing them cost as much
	// as running them.
	// Idle state (the baseline) is forgotten on return, so the next
	// subscriber starts from a fresh one.
	version, err := conn.PrepareContext(ctx, `PRAGMA data_version`)
	if err != nil {
		return err
	}
	defer version.Close()
	newer, err := conn.PrepareContext(ctx, newerChangesSQL)
	if err != nil {
		return err
	}
	defer newer.Close()
	lastSeq, err := maxChangeSeq(ctx, conn)
	if err != nil {
		return err
	}
	var last int64
	lastCP := s.checkpointsDone.Load()
	if err := version.QueryRowContext(ctx).Scan(&last); err != nil {
		return err
	}
	// With file events the watcher waits for them, but not while this
	// store writes: its commits are published as they commit, and every
	// page it writes would be an event (about 15 a send, measured to cost
	// the writer a third more CPU per send, in the kernel and in waking up
	// for each), so it closes the watch and checks every changeStep, as
	// it would after an event, until the store has written nothing for
	// changeHot.
	useEvents := !s.noFileEvents
	var events *fsnotify.Watcher
	var ours func(fsnotify.Event) bool
	startEvents := func() {
		var err error
		if events, ours, err = fileEvents(s.path); err != nil {
			s.log.Warn("change watcher: no file events, polling", "every", poll, "err", err)
			events, useEvents = nil, false
		}
		s.onEvents.Store(events != nil)
	}
	stopEvents := func() {
		s.onEvents.Store(false)
		if events != nil {
			events.Close()
			events = nil
		}
	}
	defer func() { stopEvents() }()
	if useEvents {
		startEvents()
	}
	s.watchReady()
	if late := s.lateSubscribe.Swap(false); retry || late {
		s.changes.Publish(mailroom.Change{All: true})
	}
	idle := s.changes.Idle()
	every := func() time.Duration {
		if events != nil {
			return changeBackstop
		}
		return poll
	}
	t := time.NewTimer(every())
	defer t.Stop()
	var hotUntil time.Time     // a write may become visible until then
	var pendingUntil time.Time // an unexplained version change becomes All then
	step := time.Duration(0)
	for {
		var evC <-chan fsnotify.Event
		var errC <-chan error
		if events != nil {
			evC, errC = events.Events, events.Errors
		}
		select {
		case <-ctx.Done():
			return nil
		case <-idle:
			if s.watchStop() {
				return nil
			}
			idle = s.changes.Idle()
			continue
		case <-s.ownWrite:
			if events != nil && !s.ownQuiet() {
				stopEvents()
				t.Reset(changeStep)
			}
			continue
		case <-t.C:
		case ev := <-evC:
			s.fileEvents.Add(1)
			if !ours(ev) {
				continue
			}
			hotUntil = time.Now().Add(changeHot)
			if step > 0 {
				continue // a check is already due within changeStep
			}
			step = changeFirst
		case err := <-errC:
			// An overflow loses events: act as for one.
			s.log.Warn("change watcher: file events", "err", err)
			hotUntil = time.Now().Add(changeHot)
			step = max(step, changeFirst)
		}
		s.watchChecks.Add(1)
		// Read before data_version: a checkpoint running now may show as
		// more than one change (copying, then resetting the log).
		cpDone := s.checkpointsDone.Load()
		cpRunning := s.checkpoints.Load() != cpDone
		var v int64
		if err := version.QueryRowContext(ctx).Scan(&v); err != nil {
			return err
		}
		if v != last {
			last = v
			// This process's own checkpoint, running or finished since the
			// last one accounted for, explains a change without a
			// change-log row.
			c, used, rowless, err := s.foreignChanges(ctx, newer, &lastSeq, cpRunning || cpDone != lastCP)
			if used && !cpRunning {
				lastCP = cpDone
			}
			if err != nil && ctx.Err() == nil {
				s.log.Warn("change watcher: change log", "err", err)
			}
			switch {
			case rowless && pendingUntil.IsZero():
				// A version change with no change-log row is seen now and
				// then while another connection is in the middle of a
				// logged commit; wait a little for its row before taking
				// it for a writer that keeps no log.
				pendingUntil = time.Now().Add(changeHot)
				hotUntil = pendingUntil
				step = max(step, changeFirst)
			case !rowless && !used && err == nil:
				// Rows arrived: the pending change was their commit's. A
				// writer that keeps no log (none of mailroom's) followed
				// within changeHot by a logged commit is reported as that
				// commit only.
				pendingUntil = time.Time{}
			}
			s.publish(c)
		}
		if !pendingUntil.IsZero() && !time.Now().Before(pendingUntil) {
			pendingUntil = time.Time{}
			s.publish(mailroom.Change{All: true})
		}
		switch {
		case useEvents && events == nil: // paused while this store writes
			if !s.ownQuiet() {
				t.Reset(changeStep)
				continue
			}
			if startEvents(); events != nil {
				// A commit between the last check and the new watch made
				// no event: check once more.
				step = changeFirst
				t.Reset(step)
				continue
			}
			step = 0
			t.Reset(every())
		case events != nil && time.Now().Before(hotUntil):
			step = max(step, changeFirst)
			t.Reset(step)
			step = min(2*step, changeStep)
		default:
			step = 0
			t.Reset(every())
		}
	}
}

// writing tells the watcher that this store is about to write (see
// watchActive); it costs a write a clock reading and an atomic store.
func (s *Store) writing() {
	s.lastOwn.Store(time.Now().UnixNano())
	if s.onEvents.Load() {
		select {
		case s.ownWrite <- struct{}{}:
		default:
		}
	}
}

// ownQuiet reports whether this store has started no write for changeHot.
func (s *Store) ownQuiet() bool {
	return time.Since(time.Unix(0, s.lastOwn.Load())) >= changeHot
}

// fileEvents watches the directory of the database file (its -wal and
// -journal files come and go, a directory watch sees them all), resolving
// symbolic links as SQLite does; ours tells the database's events from
// those of its neighbours.
func fileEvents(path string) (w *fsnotify.Watcher, ours func(fsnotify.Event) bool, err error) {
	if p, err := filepath.EvalSymlinks(path); err == nil {
		path = p
	}
	if w, err = fsnotify.NewWatcher(); err != nil {
		return nil, nil, err
	}
	if err := w.Add(filepath.Dir(path)); err != nil {
		w.Close()
		return nil, nil, err
	}
	base := filepath.Base(path)
	return w, func(ev fsnotify.Event) bool {
		name := filepath.Base(ev.Name)
		return name == base || name == base+"-wal" || name == base+"-journal"
	}, nil
}

func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

// changeLogKeep is how many change-log rows writers keep; a watcher that
// falls further behind than that says All.
const changeLogKeep = 4096

func newOrigin() string {
	b := make([]byte, 8)
	rand.Read(b)
	return hex.EncodeToString(b)
}

// touch declares that the transaction changes the inboxes of identities ids
// and of role queues roles. A write transaction that declares nothing is
// taken to touch every inbox; one that touches none calls touchNone.
func (t *ptx) touch(ids []int64, roles []string) {
	t.declared = true
	t.change.Merge(mailroom.Change{Identities: ids, Roles: roles})
}

// touchPlan declares the inboxes a send of p delivers to.
func (t *ptx) touchPlan(p sendPlan) {
	ids := make([]int64, 0, len(p.direct))
	for _, r := range p.direct {
		ids = append(ids, r.id)
	}
	t.touch(ids, p.roles)
	if p.broadcast {
		t.touchAll()
	}
}

// touchDelivery declares the inbox a delivery is in: the caller's, and
// with a role delivery the role's.
func touchDelivery(ctx context.Context, tx *ptx, me mailroom.Identity, delivery int64) error {
	tx.touch([]int64{me.ID}, nil)
	return touchRecipients(ctx, tx, `SELECT recipient_id, role FROM delivery WHERE id = ?`, delivery)
}

// touchRecipients declares the inboxes of the deliveries query returns as
// (recipient_id, role) rows: one of the two is set.
func touchRecipients(ctx context.Context, tx *ptx, query string, args ...any) error {
	rows, err := tx.QueryContext(ctx, query, args...)
	if err != nil {
		return err
	}
	defer rows.Close()
	var ids []int64
	var roles []string
	for rows.Next() {
		var id sql.NullInt64
		var role sql.NullString
		if err := rows.Scan(&id, &role); err != nil {
			return err
		}
		if id.Valid {
			ids = append(ids, id.Int64)
		}
		if role.Valid {
			roles = append(roles, role.String)
		}
	}
	if err := rows.Err(); err != nil {
		return err
	}
	tx.touch(ids, roles)
	return nil
}

// touchAll declares that any inbox may change (a broadcast).
func (t *ptx) touchAll() { t.declared = true; t.change.Merge(mailroom.Change{All: true}) }

// touchNone declares that the transaction changes no inbox.
func (t *ptx) touchNone() { t.declared = true }

func (t *ptx) touched() mailroom.Change {
	if !t.declared {
		return mailroom.Change{All: true}
	}
	return t.change
}

// logChange writes the transaction's row of the change log, and now and
// then prunes old rows.
func (s *Store) logChange(ctx context.Context, t *ptx, c mailroom.Change) error {
	ids, roles := c.Identities, c.Roles
	if ids == nil {
		ids = []int64{}
	}
	if roles == nil {
		roles = []string{}
	}
	ij, _ := json.Marshal(ids)
	rj, _ := json.Marshal(roles)
	var seq int64
	if err := t.QueryRowContext(ctx, `INSERT INTO change_log (origin, all_inboxes, identities, roles) VALUES (?, ?, ?, ?) RETURNING seq`, s.origin, c.All, string(ij), string(rj)).Scan(&seq); err != nil {
		return err
	}
	if seq%256 == 0 {
		_, err := t.ExecContext(ctx, `DELETE FROM change_log WHERE seq <= ?`, seq-changeLogKeep)
		return err
	}
	return nil
}

// publish tells this process's subscribers of its own commit.
func (s *Store) publish(c mailroom.Change) {
	if c.All || len(c.Identities) > 0 || len(c.Roles) > 0 {
		s.changes.Publish(c)
	}
}

// newerChangesSQL reads the change log after a seq.
const newerChangesSQL = `SELECT seq, origin, all_inboxes, identities, roles FROM change_log WHERE seq > ? ORDER BY seq LIMIT 1000`

// foreignChanges reads the change log after seq *last and returns what
// other store instances' commits touched. A version bump with no new row
// (a writer that keeps no log, or another process's checkpoint) is
// rowless, unless checkpointed says this process checkpointed meanwhile; a
// gap (rows pruned before this watcher read them) is All.
func (s *Store) foreignChanges(ctx context.Context, newer *sql.Stmt, last *int64, checkpointed bool) (_ mailroom.Change, usedCheckpoint, rowless bool, _ error) {
	rows, err := newer.QueryContext(ctx, *last)
	if err != nil {
		return mailroom.Change{All: true}, false, false, err
	}
	defer rows.Close()
	var c mailroom.Change
	n := 0
	for rows.Next() {
		var (
			seq       int64
			origin    string
			all       bool
			ids, rls  string
			idl       []int64
			rolesList []string
		)
		if err := rows.Scan(&seq, &origin, &all, &ids, &rls); err != nil {
			return mailroom.Change{All: true}, false, false, err
		}
		if n == 0 && seq != *last+1 && *last != 0 {
			c.Merge(mailroom.Change{All: true})
		}
		n++
		*last = seq
		if origin == s.origin {
			continue // published when it committed
		}
		json.Unmarshal([]byte(ids), &idl)
		json.Unmarshal([]byte(rls), &rolesList)
		c.Merge(mailroom.Change{All: all, Identities: idl, Roles: rolesList})
	}
	if err := rows.Err(); err != nil {
		return mailroom.Change{All: true}, false, false, err
	}
	if n == 0 {
		if checkpointed {
			return mailroom.Change{}, true, false, nil
		}
		return mailroom.Change{}, false, true, nil
	}
	if n == 1000 {
		c.Merge(mailroom.Change{All: true}) // far behind: more than it read
	}
	return c, false, false, nil
}

func maxChangeSeq(ctx context.Context, conn *sql.Conn) (int64, error) {
	var seq int64
	err := conn.QueryRowContext(ctx, `SELECT coalesce(max(seq), 0) FROM change_log`).Scan(&seq)
	return seq, err
}
