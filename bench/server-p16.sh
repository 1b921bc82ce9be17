#!/usr/bin/env bash
# Issue 13's measurement: each server alone on CPU 0, the load from CPU 1, the servers
# alternated every round, nginx (1 worker, bench/nginx.conf) always the anchor. Per server and
# round, three loads of SECS seconds each (default 4):
#   p1@40k  h2load --h1 -c 64 --rps 625: a fixed 40 k req/s without pipelining (the p1 cost goal:
#           CPU 0 µs/req at most 0.85 × nginx's);
#   p1      wrk -t1 -c64, closed loop, no pipelining (the generator core is the limit);
#   p16     wrk -t1 -c64 with 16 requests per write (bench/pipeline.lua; the p16 goal: CPU 0
#           µs/req at most 0.42 on this VM class);
#   p16/ts  tailscope's own generator, io_uring engine, 1 thread, 64 connections, --pipeline 16:
#           where wrk is the limit at p16, this one is not (the issue's req/s comparison).
# Per load:
#   req/s         the generator's completed requests per second (p1@40k: below 40 k when the
#                 generator could not hold the rate, on a loaded machine);
#   CPU 0 µs/req  CPU 0's busy time (/proc/stat: all but idle and iowait, so the kernel's TCP work
#                 on that core counts) over the load, divided by the requests completed;
#   server µs/req the server's own CPU time (user + system of its process tree, /proc/PID/stat),
#                 likewise: what other work on CPU 0 cannot inflate;
#   user µs/req   its user-space part alone (what the server's code costs, not the kernel's TCP);
#   other CPU 0 % CPU 0's busy time that is not the server's, as a share of the window's wall time:
#                 softirq work done while the server slept, and everything else that ran there
#                 (other people's builds on a shared machine: then CPU 0 µs/req is inflated).
# Then medians and ranges over the rounds, and each against nginx's median.
#
#   bash bench/server-p16.sh [ROUNDS, default 3] [NAME=BINARY ...]      (SECS=4, PORT=18180)
#
# Each NAME=BINARY is a tailscope build run as `BINARY serve --threads 1 --cpus 0` (default:
# tailscope=./target/release/tailscope), so builds can be compared in one sitting; the p16/ts
# generator is GEN (default: the last build named), the same binary against every server, e.g.
#   bash bench/server-p16.sh 5 before=/tmp/server-before/tailscope after=./target/release/tailscope
# A NAME starting with "faf" is faf's example server instead (github.com/errantmind/faf-example,
# built with nightly Rust), run with one worker thread on CPU 0: FAF_PORT and FAF_THREADS are a
# local patch of its port and thread count (docs/benchmarks-history.md "faf, built here"); it
# ignores SIGTERM, so it is killed.
# Needs nginx-light, wrk, nghttp2-client (h2load).
set -euo pipefail
cd "$(dirname "$0")/.."
rounds=${1:-3}
shift $(($# < 1 ? $# : 1))
secs=${SECS:-4}
declare -A bin
names=(nginx)
if [ $# -eq 0 ]; then set -- tailscope=./target/release/tailscope; fi
for spec in "$@"; do
  names+=("${spec%%=*}")
  bin[${spec%%=*}]=${spec#*=}
  [ -x "${spec#*=}" ] || { echo "${spec#*=}: not an executable (cargo build --release?)" >&2; exit 2; }
done
gen=${GEN:-${spec#*=}}
for tool in nginx wrk h2load taskset; do
  command -v "$tool" >/dev/null || { echo "$tool not found on PATH" >&2; exit 2; }
done
# Ports of their own (PORT and PORT+1, default 18180): another nginx may hold bench/nginx.conf's.
nginx_port=${PORT:-18180}
ts_port=$((nginx_port + 1))
nginx_dir=/tmp/ts-nginx-p16
mkdir -p "$nginx_dir"
sed -e "s|127.0.0.1:18080|127.0.0.1:$nginx_port|" -e "s|/tmp/ts-nginx|$nginx_dir|g" bench/nginx.conf >"$nginx_dir/nginx.conf"
hz=$(getconf CLK_TCK)
raw=$(mktemp)
gen_json=$(mktemp)

cpu0_busy() { awk '/^cpu0 / {print $2+$3+$4+$7+$8+$9}' /proc/stat; }

# utime + stime and utime (ticks) of PID and its descendants.
tree_cpu() {
  python3 - "$1" <<'PY'
import os, sys
root = int(sys.argv[1])
stats = {}
for p in os.listdir("/proc"):
    if p.isdigit():
        try:
            s = open(f"/proc/{p}/stat").read()
        except OSError:
            continue
        f = s[s.rindex(")") + 2:].split()
        stats[int(p)] = (int(f[1]), int(f[11]) + int(f[12]), int(f[11]))
tree, grew = {root}, True
while grew:
    grew = False
    for pid, (ppid, *_) in stats.items():
        if ppid in tree and pid not in tree:
            tree.add(pid)
            grew = True
print(sum(stats[p][1] for p in tree if p in stats), sum(stats[p][2] for p in tree if p in stats))
PY
}

start_server() {
  case $1 in nginx) port=$nginx_port ;; *) port=$ts_port ;; esac
  if curl -s -o /dev/null "http://127.0.0.1:$port/"; then
    echo "something already answers on port $port: pick free ports with PORT=..." >&2; exit 2
  fi
  case $1 in
    nginx) taskset -c 0 nginx -p "$nginx_dir" -c "$nginx_dir/nginx.conf" & ;;
    faf*) FAF_PORT=$port FAF_THREADS=1 taskset -c 0 "${bin[$1]}" & ;;
    *) "${bin[$1]}" serve --addr "127.0.0.1:$port" --threads 1 --cpus 0 >/dev/null & ;;
  esac
  server_pid=$!
  for _ in $(seq 50); do curl -sf -o /dev/null "http://127.0.0.1:$port/plaintext" && return; sleep 0.1; done
  echo "$1 did not start" >&2; exit 1
}

stop_server() {
  case ${server:-} in faf*) kill -9 "$server_pid" 2>/dev/null || true ;; *) kill "$server_pid" 2>/dev/null || true ;; esac
  wait "$server_pid" 2>/dev/null || true
}
trap 'stop_server; rm -f "$raw" "$gen_json"' EXIT

# Runs one load against the server on $port; prints "requests wall_seconds".
load() {
  local url="http://127.0.0.1:$port/plaintext" out
  case $1 in
    p1@40k)
      out=$(taskset -c 1 h2load --h1 -c 64 --rps 625 -D "$secs" "$url")
      awk '/^requests:/ {n = $8} /^finished in/ {sub(/s,$/, "", $3); t = $3} END {print n, t}' <<<"$out" ;;
    p1)
      out=$(taskset -c 1 wrk -t1 -c64 -d"${secs}s" "$url")
      awk '/ requests in / {n = $1; t = $4; sub(/s,$/, "", t)} END {print n, t}' <<<"$out" ;;
    p16)
      out=$(taskset -c 1 wrk -t1 -c64 -d"${secs}s" -s bench/pipeline.lua "http://127.0.0.1:$port" -- 16)
      awk '/ requests in / {n = $1; t = $4; sub(/s,$/, "", t)} END {print n, t}' <<<"$out" ;;
    p16/ts)
      "$gen" run "$url" --pipeline 16 -c 64 --threads 1 --cpus 1 --engine uring -z "${secs}s" \
        --json "$gen_json" >/dev/null 2>&1 || { echo "$gen run failed" >&2; return 1; }
      python3 -c "import json, sys; s = json.load(open(sys.argv[1]))['summary']; print(s['successes'], s['duration_s'])" "$gen_json" ;;
  esac
}

echo "machine: $(nproc) CPUs, $(awk -F': ' '/^model name/ {print $2; exit}' /proc/cpuinfo), Linux $(uname -r)"
echo "p16/ts generator: $gen"
echo "tools: $(nginx -v 2>&1), $(wrk -v 2>&1 | head -1 | cut -d' ' -f1-2), $(h2load --version | head -1)"
echo "load average before: $(cut -d' ' -f1-3 /proc/loadavg) (the run itself adds about 2: a server and a generator)"
echo
echo "| round | server | load | req/s | CPU 0 µs/req | server µs/req | user µs/req | other CPU 0 % |"
echo "|---|---|---|---|---|---|---|---|"
for r in $(seq "$rounds"); do
  for server in "${names[@]}"; do
    start_server "$server"
    taskset -c 1 wrk -t1 -c64 -d1s "http://127.0.0.1:$port/plaintext" >/dev/null # warm-up
    for mode in p1@40k p1 p16 p16/ts; do
      read -r srv0 usr0 < <(tree_cpu "$server_pid"); t0=$(date +%s.%N); busy0=$(cpu0_busy)
      read -r reqs wall < <(load "$mode")
      busy1=$(cpu0_busy); t1=$(date +%s.%N); read -r srv1 usr1 < <(tree_cpu "$server_pid")
      if [ -z "$reqs" ] || [ "$reqs" = 0 ]; then
        echo "$server: no requests completed under $mode" >&2; exit 1
      fi
      python3 - "$r" "$server" "$mode" "$reqs" "$wall" "$((busy1 - busy0))" "$((srv1 - srv0))" "$((usr1 - usr0))" "$hz" "$t0" "$t1" >>"$raw" <<'PY'
import sys
r, name, mode, reqs, wall, busy, srv, usr, hz, t0, t1 = sys.argv[1:]
reqs, wall, hz = int(reqs), float(wall), int(hz)
us = lambda ticks: int(ticks) / hz * 1e6 / reqs
# The server's ticks are counted a moment outside the window of CPU 0's: clamp at 0.
other = max(0, int(busy) - int(srv)) / hz / (float(t1) - float(t0)) * 100
print(r, name, mode, reqs / wall, us(busy), us(srv), us(usr), other)
PY
      tail -1 "$raw" | awk '{printf "| %s | %s | %s | %.0f | %.3f | %.3f | %.3f | %.0f |\n", $1, $2, $3, $4, $5, $6, $7, $8}'
    done
    stop_server
  done
done
echo
echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
echo
python3 - "$raw" <<'PY'
import statistics, sys
rows = [l.split() for l in open(sys.argv[1])]
names = list(dict.fromkeys(r[1] for r in rows))
def col(name, mode, i):
    return [float(r[i]) for r in rows if r[1] == name and r[2] == mode]
def ratio(x, base):
    # A tick count of 0 (a run too short for CLK_TCK) has no ratio.
    return f"{x / base:.2f}×" if base else "n/a"
def cell(xs, fmt):
    return f"{statistics.median(xs):{fmt}} ({min(xs):{fmt}}–{max(xs):{fmt}})"
print("| server | load | req/s median (range) | vs nginx | CPU 0 µs/req median (range) | vs nginx "
      "| server µs/req median (range) | vs nginx | user µs/req median (range) | other CPU 0 % median |")
print("|---|---|---|---|---|---|---|---|---|---|")
for mode in ("p1@40k", "p1", "p16", "p16/ts"):
    base = [statistics.median(col("nginx", mode, i)) for i in (3, 4, 5)]
    for name in names:
        rps, cpu, srv, usr, other = (col(name, mode, i) for i in (3, 4, 5, 6, 7))
        print(f"| {name} | {mode} | {cell(rps, ',.0f')} | {ratio(statistics.median(rps), base[0])} "
              f"| {cell(cpu, '.3f')} | {ratio(statistics.median(cpu), base[1])} "
              f"| {cell(srv, '.3f')} | {ratio(statistics.median(srv), base[2])} "
              f"| {cell(usr, '.3f')} | {statistics.median(other):.0f} |")
PY
