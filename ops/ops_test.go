package ops

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

func TestHealthAnswers503WhenTheStoreDoesNot(t *testing.T) {
	for _, tc := range []struct {
		name string
		ping func(context.Context) error
		code int
		body string
	}{
		{"store answers", func(context.Context) error { return nil }, 200, `{"status":"ok"}`},
		{"store fails", func(context.Context) error { return errors.New("disk gone") }, 503, `{"status":"unavailable"}`},
		{"store hangs", func(ctx context.Context) error { <-ctx.Done(); return ctx.Err() }, 503, `{"status":"unavailable"}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// A tenth of a second, not HealthTimeout: a hanging store's
			// answer waits for the bound.
			srv := httptest.NewServer(HealthWithin(tc.ping, 100*time.Millisecond))
			defer srv.Close()
			start := time.Now()
			resp, err := http.Get(srv.URL)
			if err != nil {
				t.Fatal(err)
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != tc.code || strings.TrimSpace(string(b)) != tc.body {
				t.Errorf("%d %s, want %d %s", resp.StatusCode, b, tc.code, tc.body)
			}
			if time.Since(start) > 2500*time.Millisecond {
				t.Errorf("a hanging store held /healthz for %v", time.Since(start))
			}
		})
	}
}

func TestEachMetricsHasItsOwnRegistry(t *testing.T) {
	a, b := NewMetrics(), NewMetrics()
	a.ToolCall("add_message", time.Millisecond, "")
	a.Delivered(2)
	page := func(m *Metrics) string {
		rec := httptest.NewRecorder()
		m.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
		return rec.Body.String()
	}
	if !strings.Contains(page(a), "mailroom_deliveries_total 2") {
		t.Errorf("a's page lacks its deliveries")
	}
	if !strings.Contains(page(b), "mailroom_deliveries_total 0") {
		t.Errorf("b counts a's deliveries")
	}
}
