#!/usr/bin/env bash
# The reference server (tailscope serve, 1 thread) vs nginx (1 worker), each pinned to CPU 0,
# load from CPU 1, alternated in one run. Per server and round:
#   cpu/req  CPU 0's busy time (/proc/stat: all but idle and iowait) per request while
#            h2load holds a fixed 40 k req/s (64 clients x 625 req/s) for SECONDS;
#   closed   wrk -t1 -c64 req/s without pipelining (the generator core saturates first);
#   pipe16   wrk -t1 -c64 req/s with 16 requests per write (bench/pipeline.lua).
#
#   bash bench/compare-servers.sh [SECONDS per measurement, default 10] [ROUNDS, default 3]
#
# Needs: nginx-light, wrk, nghttp2-client (h2load), a release build.
set -euo pipefail
cd "$(dirname "$0")/.."
secs=${1:-10}
rounds=${2:-3}
ts=./target/release/tailscope
[ -x "$ts" ] || cargo build --release
mkdir -p /tmp/ts-nginx
hz=$(getconf CLK_TCK)

cpu0_busy() { awk '/^cpu0 / {print $2+$3+$4+$7+$8+$9}' /proc/stat; }

start_server() {
  case $1 in
    nginx) taskset -c 0 nginx -p /tmp/ts-nginx -c "$PWD/bench/nginx.conf" & port=18080 ;;
    tailscope) "$ts" serve --addr 127.0.0.1:18081 --threads 1 --cpus 0 >/dev/null & port=18081 ;;
  esac
  server_pid=$!
  for _ in $(seq 50); do curl -sf -o /dev/null "http://127.0.0.1:$port/plaintext" && return; sleep 0.1; done
  echo "$1 did not start" >&2; exit 1
}

stop_server() { kill "$server_pid" 2>/dev/null || true; wait "$server_pid" 2>/dev/null || true; }
trap stop_server EXIT

echo "| round | server | CPU 0 µs/req at 40k req/s | closed req/s | pipelined x16 req/s |"
echo "|---|---|---|---|---|"
declare -A sum_cpu sum_closed sum_pipe
for r in $(seq "$rounds"); do
  for server in nginx tailscope; do
    start_server "$server"
    url="http://127.0.0.1:$port/plaintext"
    taskset -c 1 wrk -t1 -c64 -d2s "$url" >/dev/null   # warm-up
    before=$(cpu0_busy)
    done_reqs=$(taskset -c 1 h2load --h1 -c 64 --rps 625 -D "$secs" "$url" | awk '/^requests:/ {print $8}')
    after=$(cpu0_busy)
    cpu=$(python3 -c "print(f'{($after - $before) / $hz * 1e6 / $done_reqs:.2f}')")
    closed=$(taskset -c 1 wrk -t1 -c64 -d"${secs}s" "$url" | awk '/^Requests\/sec/ {print $2}')
    pipe=$(taskset -c 1 wrk -t1 -c64 -d"${secs}s" -s bench/pipeline.lua "http://127.0.0.1:$port" -- 16 | awk '/^Requests\/sec/ {print $2}')
    stop_server
    printf '| %s | %s | %s | %.0f | %.0f |\n' "$r" "$server" "$cpu" "$closed" "$pipe"
    sum_cpu[$server]=$(python3 -c "print(${sum_cpu[$server]:-0} + $cpu)")
    sum_closed[$server]=$(python3 -c "print(${sum_closed[$server]:-0} + $closed)")
    sum_pipe[$server]=$(python3 -c "print(${sum_pipe[$server]:-0} + $pipe)")
  done
done
echo
echo "| server | mean CPU 0 µs/req | vs nginx | mean closed req/s | vs nginx | mean pipelined req/s | vs nginx |"
echo "|---|---|---|---|---|---|---|"
for server in nginx tailscope; do
  python3 - "$server" "${sum_cpu[$server]}" "${sum_closed[$server]}" "${sum_pipe[$server]}" \
    "${sum_cpu[nginx]}" "${sum_closed[nginx]}" "${sum_pipe[nginx]}" "$rounds" <<'PY'
import sys
name = sys.argv[1]
cpu, closed, pipe, ncpu, nclosed, npipe, n = map(float, sys.argv[2:])
print(f"| {name} | {cpu/n:.2f} | {cpu/ncpu:.2f}× | {closed/n:,.0f} | {closed/nclosed:.2f}× | {pipe/n:,.0f} | {pipe/npipe:.2f}× |")
PY
done
