package sqlite

import (
	"context"
	"database/sql"
	"time"

	"github.com/mailroom/mailroom"
)

// ClaimConceptJob leases the next due extraction job to worker.
func (s *Store) ClaimConceptJob(ctx context.Context, worker string, lease time.Duration) (mailroom.ConceptJob, bool, error) {
	var job mailroom.ConceptJob
	// An idle queue is the usual case: look with a read before taking the
	// write lock that senders need.
	var due int
	err := s.db.QueryRowContext(ctx, `SELECT count(*) FROM (SELECT 1 FROM concept_job
		WHERE run_after <= ?1 AND (locked_until IS NULL OR locked_until < ?1) LIMIT 1)`, ts(now())).Scan(&due)
	if err != nil || due == 0 {
		return job, false, err
	}
	found := false
	err = s.write(ctx, func(tx *sql.Tx) error {
		at := now()
		err := tx.QueryRowContext(ctx, `UPDATE concept_job SET locked_by = ?1, locked_until = ?2, attempts = attempts + 1
			WHERE message_seq = (SELECT message_seq FROM concept_job
				WHERE run_after <= ?3 AND (locked_until IS NULL OR locked_until < ?3)
				ORDER BY run_after, message_seq LIMIT 1)
			RETURNING message_seq, attempts`, worker, ts(at.Add(lease)), ts(at)).Scan(&job.Seq, &job.Attempts)
		if isNoRows(err) {
			return nil
		} else if err != nil {
			return err
		}
		found = true
		job.Worker = worker
		return tx.QueryRowContext(ctx, `SELECT id, subject, body FROM message WHERE seq = ?`, job.Seq).Scan(&job.MessageID, &job.Subject, &job.Body)
	})
	return job, found, err
}

// holdsLease reports whether job's worker still holds its lease.
func holdsLease(ctx context.Context, tx *sql.Tx, job mailroom.ConceptJob) error {
	var holder sql.NullString
	err := tx.QueryRowContext(ctx, `SELECT locked_by FROM concept_job WHERE message_seq = ?`, job.Seq).Scan(&holder)
	if isNoRows(err) || (err == nil && holder.String != job.Worker) {
		return mailroom.Errorf(mailroom.ECONFLICT, "concept job for %s: lease lost", job.MessageID)
	}
	return err
}

// CompleteConceptJob stores a job's concepts and removes it.
func (s *Store) CompleteConceptJob(ctx context.Context, job mailroom.ConceptJob, concepts []mailroom.Concept, source string, terms []string) error {
	return s.write(ctx, func(tx *sql.Tx) error {
		if err := holdsLease(ctx, tx, job); err != nil {
			return err
		}
		if err := tagConcepts(ctx, tx, job.Seq, concepts, source); err != nil {
			return err
		}
		// One statement for all terms; DISTINCT counts a term once per message.
		if _, err := tx.ExecContext(ctx, `INSERT INTO concept_term (term, df)
			SELECT DISTINCT value, 1 FROM json_each(?) WHERE true
			ON CONFLICT (term) DO UPDATE SET df = df + 1`, jsonStrings(terms)); err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, `UPDATE concept_corpus SET docs = docs + 1 WHERE id = 1`); err != nil {
			return err
		}
		_, err := tx.ExecContext(ctx, `DELETE FROM concept_job WHERE message_seq = ?`, job.Seq)
		return err
	})
}

// RetryConceptJob releases a job to run again later.
func (s *Store) RetryConceptJob(ctx context.Context, job mailroom.ConceptJob, reason string, after time.Duration) error {
	return s.write(ctx, func(tx *sql.Tx) error {
		if err := holdsLease(ctx, tx, job); err != nil {
			return err
		}
		_, err := tx.ExecContext(ctx, `UPDATE concept_job SET locked_by = NULL, locked_until = NULL, run_after = ?, last_error = ? WHERE message_seq = ?`,
			ts(now().Add(after)), reason, job.Seq)
		return err
	})
}

// DocFreq returns document frequencies of terms.
func (s *Store) DocFreq(ctx context.Context, terms []string) (map[string]int, int, error) {
	df := make(map[string]int, len(terms))
	total := 0
	err := s.read(ctx, func(tx *sql.Tx) error {
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

// Concepts lists the concepts of the caller's visible mail with counts.
func (s *Store) Concepts(ctx context.Context, limit int) ([]mailroom.ConceptCount, error) {
	me, err := mailroom.CallerFrom(ctx)
	if err != nil {
		return nil, err
	}
	out := []mailroom.ConceptCount{}
	err = s.read(ctx, func(tx *sql.Tx) error {
		roles, err := rolesOf(ctx, tx, me)
		if err != nil {
			return err
		}
		b := inboxBranches("", "")
		rows, err := tx.QueryContext(ctx, `SELECT c.id, c.name, count(*) AS n
			FROM (`+b[0]+` UNION ALL `+b[1]+` UNION ALL `+outboxBranch("", true)+`) v
			JOIN message_concept mc ON mc.message_seq = v.seq JOIN concept c ON c.id = mc.concept_id
			GROUP BY c.id ORDER BY n DESC, c.id LIMIT ?3`, me.ID, jsonStrings(roles), limit)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var c mailroom.ConceptCount
			if err := rows.Scan(&c.ID, &c.Name, &c.Count); err != nil {
				return err
			}
			out = append(out, c)
		}
		return rows.Err()
	})
	return out, err
}
