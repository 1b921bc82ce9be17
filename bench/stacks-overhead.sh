#!/usr/bin/env bash
# What --stacks costs: the same run with the samplers off and on, alternated in one session.
#
# The embedded reference server launched by tailscope (CPU 0), one generator thread on CPU 1,
# 50 connections, closed loop, SECONDS per run. Reads from each run's JSON: req/s (the
# generator's throughput), the server's CPU time per request (service_demand_us: the on-CPU
# sampler's interrupts and the sched_switch tracer's callchain walks are charged to the
# server's threads), tailscope's own CPU time per request (the ring-buffer drains and the
# naming at the end), and the server's voluntary context switches (one tracer record each).
#
#   bash bench/stacks-overhead.sh [SECONDS per run, default 8] [ROUNDS, default 3]
#
# Needs: root (perf), io_uring, a release build.
set -euo pipefail
cd "$(dirname "$0")/.."
secs=${1:-8}
rounds=${2:-3}
ts=$PWD/target/release/tailscope
[ -x "$ts" ] || cargo build --release
one() { # mode json
  "$ts" run --target embedded -z "${secs}s" -c 50 --threads 1 --no-tui --stacks "$1" --json "$2" >/dev/null 2>&1
}
row() { python3 - "$1" "$2" <<'PY'
import json, sys
r = json.load(open(sys.argv[2]))
p = r["profile"]
t, g = p["target"], p["generator"]
inside = r.get("stacks", {}).get("off_cpu_sampler") or "-"
print(f"| {sys.argv[1]} | {r['summary']['rps']:.0f} | {t['service_demand_us']:.2f} | {g['cpu_us_per_request']:.2f} | {t['voluntary_ctx_switches']} | {inside} |")
PY
}
echo "| run | req/s | server µs/req | tailscope µs/req | server voluntary switches | off-CPU sampler |"
echo "|---|---|---|---|---|---|"
for round in $(seq "$rounds"); do
  if (( round % 2 )); then order="off on"; else order="on off"; fi
  for mode in $order; do
    one "$mode" "/tmp/ts-stacks-$mode.json"
    row "$round $mode" "/tmp/ts-stacks-$mode.json"
  done
done
