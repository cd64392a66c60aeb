package postgres_test

import (
	"context"
	"testing"

	"github.com/mailroom/mailroom"
	"github.com/mailroom/mailroom/postgres"
	"github.com/mailroom/mailroom/postgres/pgtest"
	"github.com/mailroom/mailroom/storetest"
)

func open(t testing.TB, url string, opts postgres.Options) *postgres.Store {
	t.Helper()
	s, err := postgres.Open(context.Background(), url, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func TestStore(t *testing.T) {
	storetest.Run(t, func(t *testing.T) mailroom.Store {
		return open(t, pgtest.URL(t), postgres.Options{})
	})
}
