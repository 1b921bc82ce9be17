#!/usr/bin/env bash
# Issue 13's measurement: servers alone on CPU 0, wrk -t1 -c64 on CPU 1, without pipelining (p1)
# and with 16 requests per write (p16, bench/pipeline.lua), the servers alternated each round.
# Per server, round and depth:
#   req/s       wrk's Requests/sec;
#   cpu0 µs/req CPU 0's busy time (/proc/stat: all but idle and iowait, so the kernel's TCP work
#               on that core counts) over the run, divided by the requests wrk completed;
#   srv µs/req  the server's own CPU time (user + system of its whole process tree, from
#               /proc/PID/stat), divided likewise: what other work on CPU 0 cannot inflate;
#   user µs/req its user-space part alone (what the server's code costs, not the kernel's TCP).
# Then the median and range of each over the rounds.
#
#   bash bench/pipeline-servers.sh [SECONDS, default 5] [ROUNDS, default 3] [NAME=BINARY ...]
#
# Each NAME=BINARY is a tailscope build run as `BINARY serve --threads 1 --cpus 0` (default:
# tailscope=./target/release/tailscope), so two builds can be compared in one sitting; nginx
# (1 worker, bench/nginx.conf) is always the anchor. Needs nginx-light and wrk.
set -euo pipefail
cd "$(dirname "$0")/.."
secs=${1:-5}
rounds=${2:-3}
shift $(($# < 2 ? $# : 2))
declare -A bin
names=(nginx)
if [ $# -eq 0 ]; then set -- tailscope=./target/release/tailscope; fi
for spec in "$@"; do
  names+=("${spec%%=*}")
  bin[${spec%%=*}]=${spec#*=}
  [ -x "${spec#*=}" ] || { echo "${spec#*=}: not an executable (cargo build --release?)" >&2; exit 2; }
done
mkdir -p /tmp/ts-nginx
hz=$(getconf CLK_TCK)
raw=$(mktemp)

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
  case $1 in
    nginx) taskset -c 0 nginx -p /tmp/ts-nginx -c "$PWD/bench/nginx.conf" & port=18080 ;;
    *) "${bin[$1]}" serve --addr 127.0.0.1:18081 --threads 1 --cpus 0 >/dev/null & port=18081 ;;
  esac
  server_pid=$!
  for _ in $(seq 50); do curl -sf -o /dev/null "http://127.0.0.1:$port/plaintext" && return; sleep 0.1; done
  echo "$1 did not start" >&2; exit 1
}

stop_server() { kill "$server_pid" 2>/dev/null || true; wait "$server_pid" 2>/dev/null || true; }
trap 'stop_server; rm -f "$raw"' EXIT

echo "uptime before: $(uptime)"
echo
echo "| round | server | depth | req/s | CPU 0 µs/req | server µs/req | user µs/req |"
echo "|---|---|---|---|---|---|---|"
for r in $(seq "$rounds"); do
  for server in "${names[@]}"; do
    start_server "$server"
    taskset -c 1 wrk -t1 -c64 -d1s "http://127.0.0.1:$port/plaintext" >/dev/null # warm-up
    for depth in 1 16; do
      if [ "$depth" = 1 ]; then
        args=("http://127.0.0.1:$port/plaintext")
      else
        args=(-s bench/pipeline.lua "http://127.0.0.1:$port" -- 16)
      fi
      busy0=$(cpu0_busy); read -r srv0 usr0 < <(tree_cpu "$server_pid")
      out=$(taskset -c 1 wrk -t1 -c64 -d"${secs}s" "${args[@]}")
      busy1=$(cpu0_busy); read -r srv1 usr1 < <(tree_cpu "$server_pid")
      reqs=$(awk '/ requests in / {print $1}' <<<"$out")
      rps=$(awk '/^Requests\/sec/ {print $2}' <<<"$out")
      python3 - "$r" "$server" "$depth" "$rps" "$reqs" "$((busy1 - busy0))" "$((srv1 - srv0))" "$((usr1 - usr0))" "$hz" >>"$raw" <<'PY'
import sys
r, name, depth, rps, reqs, busy, srv, usr, hz = sys.argv[1:]
reqs, hz = int(reqs), int(hz)
us = lambda ticks: int(ticks) / hz * 1e6 / reqs
print(r, name, depth, float(rps), us(busy), us(srv), us(usr))
PY
      tail -1 "$raw" | awk '{printf "| %s | %s | p%s | %.0f | %.3f | %.3f | %.3f |\n", $1, $2, $3, $4, $5, $6, $7}'
    done
    stop_server
  done
done
echo
echo "uptime after: $(uptime)"
echo
python3 - "$raw" <<'PY'
import statistics, sys
rows = [l.split() for l in open(sys.argv[1])]
names = list(dict.fromkeys(r[1] for r in rows))
def col(name, depth, i):
    return [float(r[i]) for r in rows if r[1] == name and r[2] == depth]
print("| server | depth | req/s median (range) | vs nginx | CPU 0 µs/req median (range) | vs nginx | server µs/req median (range) | user µs/req median (range) |")
print("|---|---|---|---|---|---|---|---|")
for depth in ("1", "16"):
    base_rps = statistics.median(col("nginx", depth, 3))
    base_cpu = statistics.median(col("nginx", depth, 4))
    for name in names:
        rps, cpu, srv, usr = (col(name, depth, i) for i in (3, 4, 5, 6))
        print(f"| {name} | p{depth} | {statistics.median(rps):,.0f} ({min(rps):,.0f}–{max(rps):,.0f}) "
              f"| {statistics.median(rps) / base_rps:.2f}× "
              f"| {statistics.median(cpu):.3f} ({min(cpu):.3f}–{max(cpu):.3f}) "
              f"| {statistics.median(cpu) / base_cpu:.2f}× "
              f"| {statistics.median(srv):.3f} ({min(srv):.3f}–{max(srv):.3f}) "
              f"| {statistics.median(usr):.3f} ({min(usr):.3f}–{max(usr):.3f}) |")
PY
