package postgres

import (
	"cmp"
	"context"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/mailroom/mailroom"
)

// ClaimConceptJobs leases up to max due extraction jobs to worker. FOR
// UPDATE SKIP LOCKED lets instances claim at once without waiting on each
// other, and each job goes to one of them.
func (s *Store) ClaimConceptJobs(ctx context.Context, worker string, lease time.Duration, max int) ([]mailroom.ConceptJob, error) {
	if max < 1 {
		max = 1
	}
	var jobs []mailroom.ConceptJob
	err := s.write(ctx, func(tx pgx.Tx) error {
		at := s.now()
		rows, err := tx.Query(ctx, `UPDATE concept_job j SET locked_by = $1, locked_until = $2, attempts = j.attempts + 1
			FROM (SELECT message_seq FROM concept_job
				WHERE run_after <= $3 AND (locked_until IS NULL OR locked_until < $3)
				ORDER BY run_after, message_seq LIMIT $4 FOR UPDATE SKIP LOCKED) due, message m
			WHERE j.message_seq = due.message_seq AND m.seq = j.message_seq
			RETURNING j.message_seq, j.attempts, m.id, m.subject, m.body`, worker, at.Add(lease), at, max)
		if err != nil {
			return err
		}
		jobs, err = pgx.CollectRows(rows, func(r pgx.CollectableRow) (mailroom.ConceptJob, error) {
			job := mailroom.ConceptJob{Worker: worker}
			err := r.Scan(&job.Seq, &job.Attempts, &job.MessageID, &job.Subject, &job.Body)
			return job, err
		})
		return err
	})
	if err != nil {
		return nil, err
	}
	slices.SortFunc(jobs, func(a, b mailroom.ConceptJob) int { return cmp.Compare(a.Seq, b.Seq) })
	return jobs, nil
}

// holdsLease locks job's row and reports whether its worker still holds
// the lease: a claim by another instance either committed before (and is
// seen) or waits for this transaction.
func holdsLease(ctx context.Context, tx pgx.Tx, job mailroom.ConceptJob) error {
	var holder *string
	err := tx.QueryRow(ctx, `SELECT locked_by FROM concept_job WHERE message_seq = $1 FOR UPDATE`, job.Seq).Scan(&holder)
	if isNoRows(err) || (err == nil && (holder == nil || *holder != job.Worker)) {
		return mailroom.Errorf(mailroom.ECONFLICT, "concept job for %s: lease lost", job.MessageID)
	}
	return err
}

// CompleteConceptJobs stores the results' concepts and removes their jobs.
func (s *Store) CompleteConceptJobs(ctx context.Context, results []mailroom.ConceptResult) ([]mailroom.ConceptJob, error) {
	// Lock job rows in seq order, like every other batch writer.
	results = slices.Clone(results)
	slices.SortFunc(results, func(a, b mailroom.ConceptResult) int { return cmp.Compare(a.Job.Seq, b.Job.Seq) })
	var lost []mailroom.ConceptJob
	err := s.write(ctx, func(tx pgx.Tx) error {
		lost = lost[:0]
		var done []int64
		var tags []tagging
		df := map[string]int{}
		for _, r := range results {
			if err := holdsLease(ctx, tx, r.Job); mailroom.ErrorCode(err) == mailroom.ECONFLICT {
				lost = append(lost, r.Job)
				continue
			} else if err != nil {
				return err
			}
			done = append(done, r.Job.Seq)
			tags = append(tags, tagging{seq: r.Job.Seq, concepts: r.Concepts, source: r.Source})
			for _, t := range sortedUnique(r.Terms) { // a term counts once per message
				df[t]++
			}
		}
		if len(done) == 0 {
			return nil
		}
		if err := tagConcepts(ctx, tx, tags); err != nil {
			return err
		}
		if len(df) > 0 {
			terms := slices.Sorted(func(yield func(string) bool) {
				for t := range df {
					if !yield(t) {
						return
					}
				}
			})
			counts := make([]int32, len(terms))
			for i, t := range terms {
				counts[i] = int32(df[t])
			}
			// One statement for the batch, in term order.
			if _, err := tx.Exec(ctx, `INSERT INTO concept_term (term, df) SELECT * FROM unnest($1::text[], $2::int[]) ORDER BY 1
				ON CONFLICT (term) DO UPDATE SET df = concept_term.df + EXCLUDED.df`, terms, counts); err != nil {
				return err
			}
		}
		if _, err := tx.Exec(ctx, `DELETE FROM concept_job WHERE message_seq = ANY($1)`, done); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, `UPDATE concept_corpus SET docs = docs + $1 WHERE id = 1`, len(done))
		return err
	})
	return lost, err
}

// PendingConceptJobs counts the jobs not yet completed.
func (s *Store) PendingConceptJobs(ctx context.Context) (int, error) {
	var n int
	err := s.pool.QueryRow(ctx, `SELECT count(*) FROM concept_job`).Scan(&n)
	return n, err
}

// RetryConceptJob releases a job to run again later.
func (s *Store) RetryConceptJob(ctx context.Context, job mailroom.ConceptJob, reason string, after time.Duration) error {
	return s.write(ctx, func(tx pgx.Tx) error {
		if err := holdsLease(ctx, tx, job); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, `UPDATE concept_job SET locked_by = NULL, locked_until = NULL, run_after = $1, last_error = $2 WHERE message_seq = $3`,
			s.now().Add(after), reason, job.Seq)
		return err
	})
}

// DocFreq returns document frequencies of terms.
func (s *Store) DocFreq(ctx context.Context, terms []string) (map[string]int, int, error) {
	df := make(map[string]int, len(terms))
	total := 0
	err := s.read(ctx, func(tx pgx.Tx) error {
		if err := tx.QueryRow(ctx, `SELECT docs FROM concept_corpus WHERE id = 1`).Scan(&total); err != nil {
			return err
		}
		if terms == nil {
			terms = []string{}
		}
		rows, err := tx.Query(ctx, `SELECT term, df FROM concept_term WHERE term = ANY($1)`, terms)
		if err != nil {
			return err
		}
		var t string
		var n int
		_, err = pgx.ForEachRow(rows, []any{&t, &n}, func() error { df[t] = n; return nil })
		return err
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
	out := mailroom.ConceptList{}
	err = s.read(ctx, func(tx pgx.Tx) error {
		roles, err := rolesOf(ctx, tx, me)
		if err != nil {
			return err
		}
		b := inboxWalkBranches("", "", len(roles.ids), false)
		for i := range b {
			b[i] = `(` + b[i] + ` ORDER BY seq DESC LIMIT $4)`
		}
		window := `SELECT seq FROM (` + strings.Join(b, " UNION ALL ") + ` UNION ALL (` + outboxWalkBranch("", true) + ` ORDER BY seq DESC LIMIT $4) ORDER BY seq DESC LIMIT $4) w`
		var n int
		if err := tx.QueryRow(ctx, `SELECT count(*) FROM (`+window+`) v`, me.ID, roles.ids, roles.own, scan+1).Scan(&n); err != nil {
			return err
		}
		out.Counted, out.Complete = min(n, scan), n <= scan
		rows, err := tx.Query(ctx, `SELECT c.id, c.name, count(*) AS n
			FROM (`+window+`) v
			JOIN message_concept mc ON mc.message_seq = v.seq JOIN concept c ON c.id = mc.concept_id
			GROUP BY c.id, c.name ORDER BY n DESC, c.id LIMIT $5`, me.ID, roles.ids, roles.own, scan, limit)
		if err != nil {
			return err
		}
		out.Concepts, err = pgx.CollectRows(rows, func(r pgx.CollectableRow) (mailroom.ConceptCount, error) {
			var c mailroom.ConceptCount
			err := r.Scan(&c.ID, &c.Name, &c.Count)
			return c, err
		})
		return err
	})
	if out.Concepts == nil {
		out.Concepts = []mailroom.ConceptCount{}
	}
	return out, err
}
