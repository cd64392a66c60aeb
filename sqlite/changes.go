package sqlite

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"time"

	"github.com/mailroom/mailroom"
)

// DefaultChangePoll is how often the watcher asks SQLite whether another
// connection committed, while anyone is subscribed.
const DefaultChangePoll = 10 * time.Millisecond

// Subscribe returns a subscription to the store's change signal: it is
// signalled after commits by this store at once, and after commits by any
// other connection or process sharing the file within one poll interval.
func (s *Store) Subscribe() *mailroom.Subscription { return s.changes.Subscribe() }

// Changes returns the store's in-process hub (tests count its subscribers).
func (s *Store) Changes() *mailroom.ChangeHub { return s.changes }

// watch is the store's one watcher. SQLite has no cross-process
// notification, but PRAGMA data_version, asked on one connection, changes
// whenever any other connection commits: one pragma per interval answers
// for the whole process, however many subscribers it has. It runs only
// while someone is subscribed, so an unwatched store costs nothing.
//
// Hand-written because SQLite offers nothing else that crosses processes:
// sqlite3_update_hook and commit hooks see only their own connection, and
// file-change notification (inotify on the -wal file) misses checkpoints
// and is not portable.
func (s *Store) watch(ctx context.Context, db *sql.DB, every time.Duration) {
	defer close(s.watchDone)
	var conn *sql.Conn
	defer func() {
		if conn != nil {
			conn.Close()
		}
	}()
	var last, lastSeq int64
	t := time.NewTimer(every)
	defer t.Stop()
	for {
		active := s.changes.Active()
		select {
		case <-active:
		default:
			// Idle: nobody to tell. Forget the baseline, so the next
			// subscriber starts from a fresh one.
			if conn != nil {
				conn.Close()
				conn = nil
			}
			select {
			case <-ctx.Done():
				return
			case <-active:
			}
		}
		if conn == nil {
			c, err := db.Conn(ctx)
			if err != nil {
				s.log.Warn("change watcher: connect", "err", err)
				if !sleep(ctx, time.Second) {
					return
				}
				continue
			}
			conn = c
			if lastSeq, err = maxChangeSeq(ctx, conn); err == nil {
				last, err = dataVersion(ctx, conn)
			}
			if err != nil {
				s.log.Warn("change watcher: data_version", "err", err)
				conn.Close()
				conn = nil
				continue
			}
			// A commit between a Subscribe and this baseline would go
			// unseen: signal once instead (a spurious signal costs a
			// re-read; a missed one loses a wake-up).
			s.changes.Publish(mailroom.Change{All: true})
		}
		t.Reset(every)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		v, err := dataVersion(ctx, conn)
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			s.log.Warn("change watcher: data_version", "err", err)
			conn.Close()
			conn = nil
			// Whatever happened meanwhile is unknown: say so.
			s.changes.Publish(mailroom.Change{All: true})
			continue
		}
		if v != last {
			last = v
			c, err := s.foreignChanges(ctx, conn, &lastSeq)
			if err != nil && ctx.Err() == nil {
				s.log.Warn("change watcher: change log", "err", err)
			}
			s.publish(c)
		}
	}
}

func dataVersion(ctx context.Context, conn *sql.Conn) (int64, error) {
	var v int64
	err := conn.QueryRowContext(ctx, `PRAGMA data_version`).Scan(&v)
	return v, err
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

// foreignChanges reads the change log after seq *last and returns what
// other store instances' commits touched. A version bump with no new row
// (a writer that keeps no log) or a gap (rows pruned before this watcher
// read them) is All.
func (s *Store) foreignChanges(ctx context.Context, conn *sql.Conn, last *int64) (mailroom.Change, error) {
	rows, err := conn.QueryContext(ctx, `SELECT seq, origin, all_inboxes, identities, roles FROM change_log WHERE seq > ? ORDER BY seq LIMIT 1000`, *last)
	if err != nil {
		return mailroom.Change{All: true}, err
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
			return mailroom.Change{All: true}, err
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
		return mailroom.Change{All: true}, err
	}
	if n == 0 {
		return mailroom.Change{All: true}, nil
	}
	if n == 1000 {
		c.Merge(mailroom.Change{All: true}) // far behind: more than it read
	}
	return c, nil
}

func maxChangeSeq(ctx context.Context, conn *sql.Conn) (int64, error) {
	var seq int64
	err := conn.QueryRowContext(ctx, `SELECT coalesce(max(seq), 0) FROM change_log`).Scan(&seq)
	return seq, err
}
