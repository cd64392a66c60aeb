package sqlite

import "context"

// FTSStructure is the full-text index's segment count, the segments an
// unfinished merge reads, and the segments' sizes in pages, per level.
func FTSStructure(ctx context.Context, s *Store) (segs, merging []int, pages [][]int, err error) {
	st, err := ftsStructureOf(ctx, s.db)
	return st.segs, st.merging, st.pages, err
}

// ChangeLogRows is the change log's row count.
func ChangeLogRows(ctx context.Context, s *Store) (n int64, err error) {
	err = s.db.QueryRowContext(ctx, `SELECT count(*) FROM change_log`).Scan(&n)
	return n, err
}

// SetFTSMergeMin sets the segments in a level that make the merger step.
func SetFTSMergeMin(s *Store, min int) { s.ftsMergeMin = min }
