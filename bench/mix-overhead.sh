#!/usr/bin/env bash
# What request mixes (issue 21) cost a single-URL run: the generator before and after, both
# engines, pipelining depth 1 and 16, alternated in one run, with wrk as the anchor.
#
# The reference server (`tailscope serve --threads 1`, of the AFTER build) is pinned to CPU 0,
# every generator to CPU 1 with one thread and 64 connections against /plaintext. Each round
# runs, for each depth: wrk, then before/after of each engine in alternating order (odd rounds
# before first, even rounds after first). Prints every run, then per engine and depth the
# median req/s (and range) of before and after and their ratio, and each one's ratio to wrk's
# median at that depth.
#
#   bash bench/mix-overhead.sh BEFORE_BINARY AFTER_BINARY [SECONDS per run, default 5] [ROUNDS, default 3]
#
# Needs: wrk (apt-get install wrk), python3, two release builds of tailscope.
set -euo pipefail
cd "$(dirname "$0")/.."
before=$1
after=$2
secs=${3:-5}
rounds=${4:-3}
port=18391
taskset -c 0 "$after" serve --addr 127.0.0.1:$port --threads 1 --cpus 0 >/dev/null &
server_pid=$!
trap 'kill $server_pid 2>/dev/null || true; wait 2>/dev/null || true' EXIT
url=http://127.0.0.1:$port/plaintext
for _ in $(seq 50); do curl -sf -o /dev/null "$url" && break; sleep 0.1; done
curl -sf -o /dev/null "$url" || { echo "no server answers at $url" >&2; exit 1; }

rps_of() { # tool engine depth
  local bin=$1 engine=$2 depth=$3
  if [ "$bin" = wrk ]; then
    local cmd=(wrk -t1 -c64 -d"${secs}s" "$url")
    [ "$depth" -gt 1 ] && cmd=(wrk -t1 -c64 -d"${secs}s" -s bench/pipeline.lua "$url" -- "$depth")
    taskset -c 1 "${cmd[@]}" | awk '/^Requests\/sec/ {print $2}'
  else
    taskset -c 1 "$bin" run "$url" --engine "$engine" --threads 1 -c 64 --pipeline "$depth" \
      -z "${secs}s" --no-tui --json - 2>/dev/null |
      python3 -c 'import json,sys; print(json.load(sys.stdin)["summary"]["rps"])'
  fi
}

echo "server on CPU 0, generators on CPU 1, 1 thread, 64 connections, ${secs} s a run, $rounds rounds"
echo "$(nproc) CPUs, $(uname -r), load average before: $(cut -d' ' -f1-3 /proc/loadavg)"
echo
echo "| round | depth | run | req/s |"
echo "|---|---|---|---|"
results=$(mktemp)
for r in $(seq "$rounds"); do
  for depth in 1 16; do
    v=$(rps_of wrk - "$depth")
    printf '| %s | %s | wrk | %.0f |\n' "$r" "$depth" "$v"
    echo "wrk $depth $v" >> "$results"
    for engine in tokio uring; do
      if [ $((r % 2)) -eq 1 ]; then order="before after"; else order="after before"; fi
      for which in $order; do
        bin=$before; [ "$which" = after ] && bin=$after
        v=$(rps_of "$bin" "$engine" "$depth")
        printf '| %s | %s | %s %s | %.0f |\n' "$r" "$depth" "$engine" "$which" "$v"
        echo "$engine-$which $depth $v" >> "$results"
      done
    done
  done
done
echo
echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
python3 - "$results" <<'EOF'
import statistics, sys
runs = {}
for line in open(sys.argv[1]):
    name, depth, v = line.split()
    runs.setdefault((name, int(depth)), []).append(float(v))
med = {k: statistics.median(v) for k, v in runs.items()}
print()
print("| depth | engine | before req/s (median, range) | after req/s (median, range) | after/before | before/wrk | after/wrk |")
print("|---|---|---|---|---|---|---|")
for depth in (1, 16):
    wrk = med[("wrk", depth)]
    for engine in ("tokio", "uring"):
        b, a = runs[(f"{engine}-before", depth)], runs[(f"{engine}-after", depth)]
        mb, ma = statistics.median(b), statistics.median(a)
        print(f"| {depth} | {engine} | {mb:,.0f} ({min(b):,.0f}–{max(b):,.0f}) | {ma:,.0f} ({min(a):,.0f}–{max(a):,.0f}) "
              f"| {ma / mb:.3f} | {mb / wrk:.3f} | {ma / wrk:.3f} |")
    print(f"| {depth} | wrk | {wrk:,.0f} ({min(runs[('wrk', depth)]):,.0f}–{max(runs[('wrk', depth)]):,.0f}) | | | | |")
EOF
rm -f "$results"
