// Package ops serves what an operator watches: GET /healthz and GET /metrics
// in the Prometheus text format (github.com/prometheus/client_golang). Each
// Metrics has its own registry, so two servers in one process (tests) never
// share counters, and nothing registers with the library's global default.
package ops

import (
	"context"
	"net/http"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// Metrics are one server's metrics. It implements mcp.Observer.
type Metrics struct {
	reg        *prometheus.Registry
	calls      *prometheus.CounterVec
	errors     *prometheus.CounterVec
	latency    *prometheus.HistogramVec
	deliveries prometheus.Counter
	drains     prometheus.Counter
	drained    prometheus.Counter
	byTool     sync.Map // tool name -> *toolSeries
}

// toolSeries are one tool's series, looked up once: WithLabelValues hashes
// the labels and takes a lock on every call.
type toolSeries struct {
	calls   prometheus.Counter
	latency prometheus.Observer
}

func (m *Metrics) series(tool string) *toolSeries {
	if v, ok := m.byTool.Load(tool); ok {
		return v.(*toolSeries)
	}
	v, _ := m.byTool.LoadOrStore(tool, &toolSeries{calls: m.calls.WithLabelValues(tool), latency: m.latency.WithLabelValues(tool)})
	return v.(*toolSeries)
}

// NewMetrics returns metrics on a fresh registry, with the Go runtime and
// process collectors.
func NewMetrics() *Metrics {
	m := &Metrics{
		reg: prometheus.NewRegistry(),
		calls: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "mailroom_tool_calls_total", Help: "MCP tool calls, by tool.",
		}, []string{"tool"}),
		errors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "mailroom_tool_errors_total", Help: "MCP tool calls that answered isError, by tool and error code.",
		}, []string{"tool", "code"}),
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "mailroom_tool_duration_seconds",
			Help:    "MCP tool call latency inside the server, by tool.",
			Buckets: []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 10, 60},
		}, []string{"tool"}),
		deliveries: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "mailroom_deliveries_total", Help: "Delivery rows written by sends (a role queue counts once).",
		}),
		drains: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "mailroom_drains_total", Help: "mark_read({all: true}) calls that succeeded.",
		}),
		drained: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "mailroom_drained_messages_total", Help: "Messages marked read by drains.",
		}),
	}
	m.reg.MustRegister(m.calls, m.errors, m.latency, m.deliveries, m.drains, m.drained,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return m
}

// Tools starts the per-tool series at zero, so a scrape shows every tool
// (and a rate() has a baseline) before its first call.
func (m *Metrics) Tools(names []string) {
	for _, n := range names {
		m.series(n)
	}
}

// ToolCall records one tool call; code is "" on success, else the error code.
func (m *Metrics) ToolCall(tool string, d time.Duration, code string) {
	ts := m.series(tool)
	ts.calls.Inc()
	ts.latency.Observe(d.Seconds())
	if code != "" {
		m.errors.WithLabelValues(tool, code).Inc()
	}
}

// Delivered records the delivery rows of one send.
func (m *Metrics) Delivered(n int) { m.deliveries.Add(float64(n)) }

// Drained records one drain and the messages it marked read.
func (m *Metrics) Drained(n int) {
	m.drains.Inc()
	m.drained.Add(float64(n))
}

// Gauge registers a gauge read at scrape time from f; an error from f
// leaves the gauge out of that scrape.
func (m *Metrics) Gauge(name, help string, f func(ctx context.Context) (float64, error)) {
	m.reg.MustRegister(&gaugeFunc{desc: prometheus.NewDesc(name, help, nil, nil), f: f})
}

// gaugeFunc is prometheus.GaugeFunc with a context and a way to fail:
// a store that does not answer is not reported as zero.
type gaugeFunc struct {
	desc *prometheus.Desc
	f    func(ctx context.Context) (float64, error)
}

func (g *gaugeFunc) Describe(ch chan<- *prometheus.Desc) { ch <- g.desc }

func (g *gaugeFunc) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if v, err := g.f(ctx); err == nil {
		ch <- prometheus.MustNewConstMetric(g.desc, prometheus.GaugeValue, v)
	}
}

// Handler serves the metrics in the Prometheus text format.
func (m *Metrics) Handler() http.Handler {
	return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{ErrorHandling: promhttp.ContinueOnError})
}

// HealthTimeout is how long Health waits for the store's ping.
const HealthTimeout = 2 * time.Second

// Health answers GET /healthz: 200 {"status":"ok"} when ping succeeds
// within HealthTimeout, else 503 {"status":"unavailable"}. It needs no token
// and says nothing more about why.
func Health(ping func(ctx context.Context) error) http.Handler {
	return HealthWithin(ping, HealthTimeout)
}

// HealthWithin is Health with another bound on the ping (tests of a
// hanging store need not wait two seconds).
func HealthWithin(ping func(ctx context.Context) error, timeout time.Duration) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			w.Header().Set("Allow", "GET, HEAD")
			http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
			return
		}
		ctx, cancel := context.WithTimeout(r.Context(), timeout)
		defer cancel()
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Cache-Control", "no-store")
		if err := ping(ctx); err != nil {
			w.WriteHeader(http.StatusServiceUnavailable)
			w.Write([]byte(`{"status":"unavailable"}` + "\n"))
			return
		}
		w.Write([]byte(`{"status":"ok"}` + "\n"))
	})
}
