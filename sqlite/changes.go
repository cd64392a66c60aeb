package sqlite

import (
	"context"
	"database/sql"
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
	var last int64
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
			if last, err = dataVersion(ctx, conn); err != nil {
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
			s.changes.Publish(mailroom.Change{All: true})
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
