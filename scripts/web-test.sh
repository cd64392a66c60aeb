#!/usr/bin/env bash
# The web inbox in a real browser: Playwright (playwright-core from
# web/e2e/package-lock.json) drives Debian's Chromium against a freshly built
# `mailroom serve --http` with a temporary database. The screenshot of the
# inbox lands in web/e2e/artifacts/ (git-ignored).
#
# Needs go, node (>= 20), npm and Chromium (CHROMIUM, default /usr/bin/chromium;
# `apt-get install -y chromium`). Never skipped: a missing browser fails.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
E2E="$ROOT/web/e2e"
CHROMIUM="${CHROMIUM:-/usr/bin/chromium}"
die() { echo "web-test: FATAL: $*" >&2; exit 1; }
for tool in go node npm; do
  command -v "$tool" >/dev/null 2>&1 || die "'$tool' is not on PATH"
done
[ -x "$CHROMIUM" ] || die "no Chromium at $CHROMIUM (apt-get install -y chromium, or set CHROMIUM)"

TMP="$(mktemp -d "${TMPDIR:-/tmp}/mailroom-web.XXXXXX")"
trap 'rm -rf "$TMP"' EXIT
go build -o "$TMP/mailroom" "$ROOT/cmd/mailroom"
# npm ci only when the lockfile changed since the last install.
if ! cmp -s "$E2E/package-lock.json" "$E2E/node_modules/.package-lock.json.installed" 2>/dev/null; then
  (cd "$E2E" && npm ci --no-audit --no-fund --loglevel=error)
  cp "$E2E/package-lock.json" "$E2E/node_modules/.package-lock.json.installed"
fi
cd "$E2E"
MAILROOM_BIN="$TMP/mailroom" CHROMIUM="$CHROMIUM" node --test inbox.test.mjs
