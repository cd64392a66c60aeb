package postgres

import "github.com/jackc/pgx/v5/pgxpool"

// Pool exposes the store's pool to the package's external tests.
func (s *Store) Pool() *pgxpool.Pool { return s.pool }
