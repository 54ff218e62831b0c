#!/usr/bin/env bash
# Runs the npm `openai` client (pinned in package.json / package-lock.json)
# against `belay serve`: belay is built, served on a free loopback port with
# the default models on the built-in simulator (replies scripted by
# sim-script.yaml) and a SQLite store in a temporary directory; then
# `node --test` runs belay.test.mjs, and the server is stopped on exit.
#
# BELAY_BIN=/path/to/belay skips the build and uses that binary.
set -euo pipefail

here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"
tmp="$(mktemp -d "${TMPDIR:-/tmp}/belay-node-test.XXXXXX")"
pid=""

cleanup() {
  if [ -n "$pid" ]; then
    kill "$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
  fi
  rm -rf "$tmp"
}
trap cleanup EXIT

bin="${BELAY_BIN:-}"
if [ -z "$bin" ]; then
  bin="$tmp/belay"
  (cd "$root" && go build -o "$bin" ./cmd/belay)
fi

(cd "$here" && npm ci --no-audit --no-fund --loglevel=error)

port="$(node -e 'const s=require("net").createServer().listen(0,"127.0.0.1",()=>{console.log(s.address().port);s.close()})')"
cat > "$tmp/belay.yaml" <<YAML
# The default configuration (models on the built-in simulator) plus a
# scripted simulator and an admin key for the test.
admin_key: node-test-admin
sim: {script: "$here/sim-script.yaml"}
YAML

"$bin" serve --config "$tmp/belay.yaml" --listen "127.0.0.1:$port" --store "sqlite://$tmp/belay.db" >"$tmp/serve.log" 2>&1 &
pid=$!

base="http://127.0.0.1:$port"
if ! node -e '
  const url = process.argv[1] + "/healthz";
  const until = Date.now() + 30000;
  (async () => {
    for (;;) {
      try { if ((await fetch(url)).ok) process.exit(0); } catch {}
      if (Date.now() > until) process.exit(1);
      await new Promise((r) => setTimeout(r, 100));
    }
  })();' "$base"; then
  echo "belay serve did not answer $base/healthz within 30s:" >&2
  cat "$tmp/serve.log" >&2
  exit 1
fi

status=0
BELAY_BASE_URL="$base" BELAY_ADMIN_KEY=node-test-admin node --test --test-reporter=spec "$here/belay.test.mjs" || status=$?
if [ "$status" -ne 0 ]; then
  echo "--- belay serve log (last 60 lines)" >&2
  tail -n 60 "$tmp/serve.log" >&2
fi
exit "$status"
