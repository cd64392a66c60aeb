package ops

import (
	"net/http"
	"net/http/pprof"
)

// Profiler serves the Go runtime's profiles (net/http/pprof) under
// /debug/pprof/. It is registered on its own mux, never the default one, so
// it is reachable only on the listener it is given (serve --pprof, loopback
// only, off by default).
func Profiler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	return mux
}
