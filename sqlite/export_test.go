package sqlite

import "context"

// ExplainQueryPlan returns the plan of query with args on one of the
// store's own connections, one detail line per step.
func ExplainQueryPlan(ctx context.Context, s *Store, query string, args []any) ([]string, error) {
	rows, err := s.db.QueryContext(ctx, "EXPLAIN QUERY PLAN "+query, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var plan []string
	for rows.Next() {
		var id, parent, unused int
		var detail string
		if err := rows.Scan(&id, &parent, &unused, &detail); err != nil {
			return nil, err
		}
		plan = append(plan, detail)
	}
	return plan, rows.Err()
}

// VacuumInto writes a copy of the store's database to path.
func VacuumInto(ctx context.Context, s *Store, path string) error {
	_, err := s.db.ExecContext(ctx, `VACUUM INTO ?`, path)
	return err
}

// SetStatsFloor sets the message count from which refreshStats measures.
func SetStatsFloor(s *Store, n int64) { s.statsFloor = n }

// WatchChecks returns how many data_version checks the change watcher made.
func WatchChecks(s *Store) int64 { return s.watchChecks.Load() }

// Watching reports whether the change watcher is watching (holds its
// connection and file watch).
func Watching(s *Store) bool { return s.watching.Load() }
