#!/usr/bin/env bash
# The reference server's user-space instructions per request, from callgrind: repeatable to a
# fraction of a percent on a noisy shared machine, where wall-clock figures are not.
#
#   bash bench/callgrind-server.sh [SERVER_BINARY] [REQUESTS, default 100000] [DEPTH, default 16]
#
# Runs `SERVER_BINARY serve --threads 1` under valgrind --tool=callgrind, warms it with 5000
# requests, zeroes the counters, sends exactly REQUESTS GET /plaintext over 64 connections with
# DEPTH requests in flight on each (tailscope's own generator, GEN=... to pick another build:
# keep it the same across the builds compared, since the request bytes it sends are what is
# parsed), dumps the counters and prints Ir (instructions executed) per request. Start-up and
# shutdown are outside the window. The profile stays in /tmp/callgrind-server.out* for
# callgrind_annotate. Needs valgrind.
set -euo pipefail
cd "$(dirname "$0")/.."
bin=${1:-./target/release/tailscope}
n=${2:-100000}
depth=${3:-16}
gen=${GEN:-./target/release/tailscope}
port=${PORT:-18699}
out=/tmp/callgrind-server.out
rm -f "$out"*
valgrind --tool=callgrind --callgrind-out-file="$out" "$bin" serve --addr "127.0.0.1:$port" --threads 1 \
  >/tmp/callgrind-server.log 2>&1 &
pid=$!
trap 'kill -9 $pid 2>/dev/null || true' EXIT
for _ in $(seq 100); do curl -sf -o /dev/null "http://127.0.0.1:$port/plaintext" && break; sleep 0.2; done
load() {
  timeout 300 "$gen" run "http://127.0.0.1:$port/plaintext" -n "$1" --pipeline "$depth" -c 64 --threads 1 \
    --json /tmp/callgrind-server.json >/dev/null 2>&1
}
load 5000
callgrind_control -z "$pid" >/dev/null
load "$n"
callgrind_control --dump=measured "$pid" >/dev/null
ok=$(python3 -c "import json; print(json.load(open('/tmp/callgrind-server.json'))['summary']['successes'])")
ir=$(awk '/^totals:/ {print $2}' "$(ls -t "$out"* | head -1)")
python3 -c "print(f'$bin, depth $depth: {$ok} responses, {$ir} Ir, {$ir / $ok:.0f} Ir per request')"
