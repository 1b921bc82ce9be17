#!/usr/bin/env bash
# Late sends at -q RATE (default 100000), by cause, at several -c, alternating builds:
# the reference server (`tailscope serve --threads 1`) on CPU 0, one generator thread on
# CPU 1, --warmup 1s (the connect burst at the start is not in the figures). Per run: late
# sends (share, and by cause: the generator's thread waited for a CPU / no free connection /
# the generator's own), the generator's CPU per request (/usr/bin/time, over every slot, those
# of the warm-up too), the server's (/proc/PID/stat, the same), p50 and p99
# (corrected).
#
#   bash bench/late-sends.sh [SECONDS per run, default 5] [ROUNDS, default 3] [RATE]
#
# TS (default ./target/release/tailscope) is the build measured; TS_BASE, if set, a second
# build run alternately with it (e.g. the commit before a change). ENGINES (default
# "uring") and CONNS (default "64 256 1000") choose the runs. Needs python3, curl and a release build.
set -euo pipefail
cd "$(dirname "$0")/.."
secs=${1:-5}
rounds=${2:-3}
rate=${3:-100000}
ts=${TS:-./target/release/tailscope}
[ -x "$ts" ] || cargo build --release
builds="$ts${TS_BASE:+ $TS_BASE}"
port=18094
taskset -c 0 "$ts" serve --addr 127.0.0.1:$port --threads 1 --cpus 0 >/dev/null &
server_pid=$!
trap 'kill $server_pid 2>/dev/null || true; wait 2>/dev/null || true' EXIT
url=http://127.0.0.1:$port/plaintext
for _ in $(seq 50); do curl -sf -o /dev/null "$url" && break; sleep 0.1; done
ticks() { awk '{print $14 + $15}' "/proc/$server_pid/stat"; }
hz=$(getconf CLK_TCK)
echo "| round | build | engine | -c | late sends (share) | CPU wait | no free connection | own | generator CPU µs/req | server CPU µs/req | p50 | p99 |"
echo "|---|---|---|---|---|---|---|---|---|---|---|---|"
for r in $(seq "$rounds"); do
  for engine in ${ENGINES:-uring}; do
    for c in ${CONNS:-64 256 1000}; do
      for b in $builds; do
        tf=$(mktemp)
        before=$(ticks)
        out=$(/usr/bin/time -o "$tf" -f "%U %S" taskset -c 1 "$b" run "$url" --engine "$engine" --threads 1 \
                -c "$c" -q "$rate" --warmup 1s -z "${secs}s" --json - 2>/dev/null)
        after=$(ticks)
        printf '%s' "$out" | python3 -c '
import json, sys
r = json.load(sys.stdin); s = r["summary"]
u, sy = map(float, open(sys.argv[1]).read().split())
n = max(1, s["requests"]); k = s.get("late_sends", 0)
c = s.get("late_sends_by_cause") or {}
l = r["latency_us"]
# CPU per request over every slot, the warm-up slots too (the schedule is fixed: RATE a second).
slots = float(sys.argv[9]) * (1 + float(sys.argv[10]))
srv = (int(sys.argv[7]) - int(sys.argv[6])) / int(sys.argv[8]) / slots * 1e6
print("| %s | %s | %s | %s | %d (%.3f %%) | %s | %s | %s | %.2f | %.2f | %s µs | %s µs |" % (sys.argv[2], sys.argv[3], sys.argv[4], sys.argv[5], k, 100 * k / n,
      c.get("waited_for_cpu"), c.get("no_free_connection"), c.get("generator"), (u + sy) / slots * 1e6, srv, l["p50"], l["p99"]))
' "$tf" "$r" "$b" "$engine" "$c" "$before" "$after" "$hz" "$rate" "$secs"
        rm -f "$tf"
      done
    done
  done
done
