#!/usr/bin/env bash
# What --stacks costs a server that switches often: nginx with 2 workers (tailscope's nginx:2
# target, on CPU 0), -n REQUESTS over 8 connections, the samplers off and on alternated.
# Columns as bench/stacks-overhead.sh, plus the server's voluntary switches a second (each is
# a sched_switch record out and one back in).
#
#   bash bench/stacks-nginx.sh [REQUESTS per run, default 300000] [ROUNDS, default 3]
#
# Needs: root (perf), nginx, a release build.
set -euo pipefail
cd "$(dirname "$0")/.."
n=${1:-300000}
rounds=${2:-3}
ts=$PWD/target/release/tailscope
[ -x "$ts" ] || cargo build --release
echo "| run | req/s | server µs/req | tailscope µs/req | server voluntary switches/s |"
echo "|---|---|---|---|---|"
for round in $(seq "$rounds"); do
  if (( round % 2 )); then order="off on"; else order="on off"; fi
  for mode in $order; do
    "$ts" run --target nginx:2 -n "$n" -c 8 --stacks "$mode" --no-tui --json "/tmp/ts-ngx-$mode.json" >/dev/null 2>&1
    python3 - "$round $mode" "/tmp/ts-ngx-$mode.json" <<'PY'
import json, sys
r = json.load(open(sys.argv[2]))
p = r["profile"]; t = p["target"]
print(f"| {sys.argv[1]} | {r['summary']['rps']:.0f} | {t['service_demand_us']:.2f} | {p['generator']['cpu_us_per_request']:.2f} | {t['voluntary_ctx_switches'] / p['duration_s']:.0f} |")
PY
  done
done
