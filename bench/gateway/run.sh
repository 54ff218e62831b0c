#!/usr/bin/env bash
# Measures belay's gateway against a direct call, a bare
# httputil.ReverseProxy and (when npm can install it) Portkey's gateway
# 1.15.2, all in one run on loopback, and prints the goals as ratios with
# PASS/FAIL. Arguments go to the Go program (see README.md): -full for the
# 1,000,000-request memory reading, -portkey=false to skip Portkey, -keep
# to keep configs, logs and stores.
set -euo pipefail

here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"
tmp="$(mktemp -d "${TMPDIR:-/tmp}/belay-bench-build.XXXXXX")"
trap 'rm -rf "$tmp"' EXIT

(cd "$root" && go build -o "$tmp/belay" ./cmd/belay)
(cd "$root/bench" && go build -o "$tmp/bench-gateway" ./gateway)
"$tmp/bench-gateway" -belay "$tmp/belay" "$@"
