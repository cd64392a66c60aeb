package main

import (
	"context"
	"fmt"
	"log/slog"
	"net/url"
	"regexp"
	"strings"

	"github.com/mailroom/mailroom"
	"github.com/mailroom/mailroom/postgres"
	"github.com/mailroom/mailroom/sqlite"
)

// urlLike is a --db value written as a URL (scheme://...): it names a
// database server, never a file, even when mailroom does not support it.
var urlLike = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9+.-]*://`)

// openStore opens the store --db names: PostgreSQL for postgres:// and
// postgresql:// URLs, SQLite for a file path or :memory:, and an error for
// any other URL (so that a typo never becomes a directory named "mysql:").
func openStore(ctx context.Context, db string, log *slog.Logger, terms func(subject, body string) []string) (mailroom.Store, error) {
	return openStoreFor(ctx, db, log, terms, false)
}

// openStoreFor is openStore; bulk opens a SQLite store to be bulk-loaded
// and closed (sqlite.Options.BulkLoad), as bench seed does.
func openStoreFor(ctx context.Context, db string, log *slog.Logger, terms func(subject, body string) []string, bulk bool) (mailroom.Store, error) {
	switch {
	case postgres.IsURL(db):
		return postgres.Open(ctx, db, postgres.Options{Logger: log, Terms: terms})
	case urlLike.MatchString(db):
		scheme, _, _ := strings.Cut(db, "://")
		return nil, fmt.Errorf("unsupported URL scheme %q: use postgres://... (or postgresql://...) for PostgreSQL, or a file path for SQLite", scheme)
	}
	return sqlite.Open(ctx, db, sqlite.Options{Logger: log, Terms: terms, BulkLoad: bulk})
}

// displayDB is db as it may be shown or logged: a URL without its password.
func displayDB(db string) string {
	if !urlLike.MatchString(db) {
		return db
	}
	u, err := url.Parse(db)
	if err != nil {
		return regexp.MustCompile(`^([^:]+://)[^@/]*@`).ReplaceAllString(db, "$1***@")
	}
	return u.Redacted()
}
