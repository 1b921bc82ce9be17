#!/usr/bin/env bash
# The io_uring engine with and without --spin-before-sleep (auto vs 0), alternated in one run:
# the reference server (`tailscope serve --threads 1`) on CPU 0, the generator on CPU 1, one
# thread, 64 connections. Per run: req/s, the generator's CPU per request (/usr/bin/time),
# the server's CPU per request (/proc/PID/stat before and after), and at -q RATE the late
# sends with their causes (summary.late_sends_by_cause).
#
#   bash bench/uring-spin.sh [SECONDS per run, default 5] [ROUNDS, default 3]
#
# The poll was reverted after this measurement (it did not pay, BENCHMARKS.md): on main the
# io_uring engine ignores --spin-before-sleep, so run it against a build of commit 30d15e8:
#   git worktree add /tmp/ts-30d15e8 30d15e8 && (cd /tmp/ts-30d15e8 && cargo build --release)
#   TS=/tmp/ts-30d15e8/target/release/tailscope bash bench/uring-spin.sh 5 3
# Needs python3 and a release build.
set -euo pipefail
cd "$(dirname "$0")/.."
secs=${1:-5}
rounds=${2:-3}
ts=${TS:-./target/release/tailscope}
[ -x "$ts" ] || cargo build --release
port=18093
taskset -c 0 "$ts" serve --addr 127.0.0.1:$port --threads 1 --cpus 0 >/dev/null &
server_pid=$!
trap 'kill $server_pid 2>/dev/null || true; wait 2>/dev/null || true' EXIT
url=http://127.0.0.1:$port/plaintext
for _ in $(seq 50); do curl -sf -o /dev/null "$url" && break; sleep 0.1; done
ticks() { awk '{print $14 + $15}' "/proc/$server_pid/stat"; }
hz=$(getconf CLK_TCK)
echo "| round | load | spin | req/s | generator CPU µs/req | server CPU µs/req | late sends: total (CPU wait, no free connection, own) | p50 |"
echo "|---|---|---|---|---|---|---|---|"
for r in $(seq "$rounds"); do
  for load in "--pipeline 1" "--pipeline 16" "-q 100000"; do
    for spin in auto 0; do
      tf=$(mktemp)
      before=$(ticks)
      out=$(/usr/bin/time -o "$tf" -f "%U %S" taskset -c 1 "$ts" run "$url" --engine uring --threads 1 -c 64 \
              $load -z "${secs}s" --spin-before-sleep $spin --json - 2>/dev/null)
      after=$(ticks)
      printf '%s' "$out" | python3 -c '
import json, sys
r = json.load(sys.stdin); s = r["summary"]
u, sy = map(float, open(sys.argv[1]).read().split())
n = max(1, s["requests"])
c = s.get("late_sends_by_cause") or {}
k = s.get("late_sends", 0)
late = "%s (%.2f %%; %s, %s, %s)" % (k, 100 * k / n, c.get("waited_for_cpu"), c.get("no_free_connection"), c.get("generator")) if c else "n/a"
srv = (int(sys.argv[3]) - int(sys.argv[2])) / int(sys.argv[4]) / n * 1e6
print("| %s | %s | %s | %.0f | %.2f | %.2f | %s | %s µs |" % (sys.argv[5], sys.argv[6], sys.argv[7], s["rps"], (u + sy) / n * 1e6, srv, late, r["latency_us"]["p50"]))
' "$tf" "$before" "$after" "$hz" "$r" "$load" "$spin"
      rm -f "$tf"
    done
  done
done
