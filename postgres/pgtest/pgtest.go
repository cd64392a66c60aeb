// Package pgtest gives tests their own empty mailroom on the PostgreSQL
// server named by MAILROOM_TEST_POSTGRES (a postgres:// URL): each call
// makes a fresh schema in that database and drops it when the test ends.
// scripts/test.sh starts a throwaway cluster and sets the variable.
package pgtest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"net/url"
	"os"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// EnvVar names the server the PostgreSQL tests run against.
const EnvVar = "MAILROOM_TEST_POSTGRES"

// BackendVar, set to "postgres", runs the MCP and command tests that open
// a store of their own against PostgreSQL instead of SQLite.
const BackendVar = "MAILROOM_TEST_STORE"

// Base returns MAILROOM_TEST_POSTGRES, or "" when it is unset.
func Base() string { return os.Getenv(EnvVar) }

// UsePostgres reports whether the MCP and command tests should open their
// stores on PostgreSQL (MAILROOM_TEST_STORE=postgres).
func UsePostgres() bool { return os.Getenv(BackendVar) == "postgres" }

// URL returns a postgres:// URL whose search_path is a new, unique schema
// (created by the store on open) and drops the schema when t ends. It skips
// t when MAILROOM_TEST_POSTGRES is unset.
func URL(t testing.TB) string {
	t.Helper()
	base := Base()
	if base == "" {
		t.Skipf("%s is not set: no PostgreSQL server to test against (scripts/test.sh starts one)", EnvVar)
	}
	u, err := url.Parse(base)
	if err != nil {
		t.Fatalf("%s: %v", EnvVar, err)
	}
	b := make([]byte, 6)
	rand.Read(b)
	schema := "t_" + hex.EncodeToString(b)
	q := u.Query()
	q.Set("search_path", schema)
	u.RawQuery = q.Encode()
	t.Cleanup(func() { Drop(t, base, schema) })
	return u.String()
}

// Drop removes a test schema and everything in it.
func Drop(t testing.TB, base, schema string) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, base)
	if err != nil {
		t.Logf("drop schema %s: %v", schema, err)
		return
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, `DROP SCHEMA IF EXISTS `+pgx.Identifier{schema}.Sanitize()+` CASCADE`); err != nil {
		t.Logf("drop schema %s: %v", schema, err)
	}
}
