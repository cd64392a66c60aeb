package sqlite

import (
	"cmp"
	"context"
	"database/sql"
	"slices"
	"time"

	"github.com/mailroom/mailroom"
)

// ClaimConceptJobs leases up to max due extraction jobs to worker.
func (s *Store) ClaimConceptJobs(ctx context.Context, worker string, lease time.Duration, max int) ([]mailroom.ConceptJob, error) {
	if max < 1 {
		max = 1 // SQLite reads a negative LIMIT as none
	}
	// An idle queue is the usual case: look with a read before taking the
	// write lock that senders need.
	var due int
	err := s.db.QueryRowContext(ctx, `SELECT count(*) FROM (SELECT 1 FROM concept_job
		WHERE run_after <= ?1 AND (locked_until IS NULL OR locked_until < ?1) LIMIT 1)`, ts(s.now())).Scan(&due)
	if err != nil || due == 0 {
		return nil, err
	}
	var jobs []mailroom.ConceptJob
	err = s.writeBackground(ctx, func(tx *ptx) error {
		jobs = jobs[:0]
		at := tx.now()
		rows, err := tx.QueryContext(ctx, `UPDATE concept_job SET locked_by = ?1, locked_until = ?2, attempts = attempts + 1
			WHERE message_seq IN (SELECT message_seq FROM concept_job
				WHERE run_after <= ?3 AND (locked_until IS NULL OR locked_until < ?3)
				ORDER BY run_after, message_seq LIMIT ?4)
			RETURNING message_seq, attempts, (SELECT id FROM message WHERE seq = message_seq),
				(SELECT subject FROM message WHERE seq = message_seq), (SELECT body FROM message WHERE seq = message_seq)`,
			worker, ts(at.Add(lease)), ts(at), max)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			job := mailroom.ConceptJob{Worker: worker}
			if err := rows.Scan(&job.Seq, &job.Attempts, &job.MessageID, &job.Subject, &job.Body); err != nil {
				return err
			}
			jobs = append(jobs, job)
		}
		return rows.Err()
	})
	if err != nil {
		return nil, err
	}
	slices.SortFunc(jobs, func(a, b mailroom.ConceptJob) int { return cmp.Compare(a.Seq, b.Seq) })
	return jobs, nil
}

// holdsLease reports whether job's worker still holds its lease.
func holdsLease(ctx context.Context, tx *ptx, job mailroom.ConceptJob) error {
	var holder sql.NullString
	err := tx.QueryRowContext(ctx, `SELECT locked_by FROM concept_job WHERE message_seq = ?`, job.Seq).Scan(&holder)
	if isNoRows(err) || (err == nil && holder.String != job.Worker) {
		return mailroom.Errorf(mailroom.ECONFLICT, "concept job for %s: lease lost", job.MessageID)
	}
	return err
}

// CompleteConceptJobs stores the results' concepts and removes their jobs.
func (s *Store) CompleteConceptJobs(ctx context.Context, results []mailroom.ConceptResult) ([]mailroom.ConceptJob, error) {
	var lost []mailroom.ConceptJob
	err := s.writeBackground(ctx, func(tx *ptx) error {
		lost = lost[:0]
		for _, r := range results {
			if err := holdsLease(ctx, tx, r.Job); mailroom.ErrorCode(err) == mailroom.ECONFLICT {
				lost = append(lost, r.Job)
				continue
			} else if err != nil {
				return err
			}
			if err := tagConcepts(ctx, tx, r.Job.Seq, r.Concepts, r.Source); err != nil {
				return err
			}
			// One statement for all terms; DISTINCT counts a term once per message.
			if _, err := tx.ExecContext(ctx, `INSERT INTO concept_term (term, df)
				SELECT DISTINCT value, 1 FROM json_each(?) WHERE true
				ON CONFLICT (term) DO UPDATE SET df = df + 1`, jsonStrings(r.Terms)); err != nil {
				return err
			}
			if _, err := tx.ExecContext(ctx, `DELETE FROM concept_job WHERE message_seq = ?`, r.Job.Seq); err != nil {
				return err
			}
		}
		_, err := tx.ExecContext(ctx, `UPDATE concept_corpus SET docs = docs + ? WHERE id = 1`, len(results)-len(lost))
		return err
	})
	return lost, err
}

// PendingConceptJobs counts the jobs not yet completed.
func (s *Store) PendingConceptJobs(ctx context.Context) (int, error) {
	var n int
	err := s.db.QueryRowContext(ctx, `SELECT count(*) FROM concept_job`).Scan(&n)
	return n, err
}

// RetryConceptJob releases a job to run again later.
func (s *Store) RetryConceptJob(ctx context.Context, job mailroom.ConceptJob, reason string, after time.Duration) error {
	return s.writeBackground(ctx, func(tx *ptx) error {
		if err := holdsLease(ctx, tx, job); err != nil {
			return err
		}
		_, err := tx.ExecContext(ctx, `UPDATE concept_job SET locked_by = NULL, locked_until = NULL, run_after = ?, last_error = ? WHERE message_seq = ?`,
			ts(tx.now().Add(after)), reason, job.Seq)
		return err
	})
}

// DocFreq returns document frequencies of terms.
func (s *Store) DocFreq(ctx context.Context, terms []string) (map[string]int, int, error) {
	df := make(map[string]int, len(terms))
	total := 0
	err := s.read(ctx, func(tx *ptx) error {
		if err := tx.QueryRowContext(ctx, `SELECT docs FROM concept_corpus WHERE id = 1`).Scan(&total); err != nil {
			return err
		}
		rows, err := tx.QueryContext(ctx, `SELECT term, df FROM concept_term WHERE term IN (SELECT value FROM json_each(?))`, jsonStrings(terms))
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var t string
			var n int
			if err := rows.Scan(&t, &n); err != nil {
				return err
			}
			df[t] = n
		}
		return rows.Err()
	})
	return df, total, err
}

// Concepts lists the concepts of the caller's scan newest visible
// messages: a merge of the index-ordered inbox and outbox branches that stops
// after scan+1 rows (the extra one says whether there is more), then each
// message's concepts through the message_concept primary key.
func (s *Store) Concepts(ctx context.Context, limit, scan int) (mailroom.ConceptList, error) {
	me, err := mailroom.CallerFrom(ctx)
	if err != nil {
		return mailroom.ConceptList{}, err
	}
	out := mailroom.ConceptList{Concepts: []mailroom.ConceptCount{}}
	err = s.read(ctx, func(tx *ptx) error {
		out.Concepts = out.Concepts[:0]
		roles, err := rolesOf(ctx, tx, me)
		if err != nil {
			return err
		}
		b := inboxBranches("", "")
		window := `SELECT seq FROM (` + b[0] + ` UNION ALL ` + b[1] + ` UNION ALL ` + outboxBranch("", true) + ` ORDER BY seq DESC LIMIT ?3)`
		var n int
		if err := tx.QueryRowContext(ctx, `SELECT count(*) FROM (`+window+`)`, me.ID, jsonStrings(roles), scan+1).Scan(&n); err != nil {
			return err
		}
		out.Counted, out.Complete = min(n, scan), n <= scan
		// CROSS JOIN fixes the join order: the planner otherwise starts
		// from every concept's index range and filters by the window (a
		// second per call at 100k messages).
		// Names are read for the listed concepts only.
		rows, err := tx.QueryContext(ctx, `SELECT c.id, c.name, g.n FROM (SELECT mc.concept_id AS id, count(*) AS n
				FROM (`+window+`) v CROSS JOIN message_concept mc WHERE mc.message_seq = v.seq
				GROUP BY mc.concept_id ORDER BY n DESC, mc.concept_id LIMIT ?4) g
			CROSS JOIN concept c WHERE c.id = g.id ORDER BY g.n DESC, g.id`, me.ID, jsonStrings(roles), scan, limit)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var c mailroom.ConceptCount
			if err := rows.Scan(&c.ID, &c.Name, &c.Count); err != nil {
				return err
			}
			out.Concepts = append(out.Concepts, c)
		}
		return rows.Err()
	})
	return out, err
}
