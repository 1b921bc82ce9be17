#!/usr/bin/env bash
# What request mixes (issue 21) cost a single-URL run: the generator before and after, both
# engines, pipelining depth 1 and 16, alternated in one run, with wrk as the anchor.
#
# The reference server (`tailscope serve --threads 1`, of the AFTER build) is pinned to CPU 0,
# every generator to CPU 1 with one thread and 64 connections against /plaintext. Each round
# runs, for each depth: wrk, then before/after of each engine in alternating order (odd rounds
# before first, even rounds after first). For each run: req/s as the tool reports it and the
# generator's CPU per request = (user + sys) / requests from /usr/bin/time, which a machine
# loaded by others disturbs far less than req/s. Prints every run, then per engine and depth
# the medians (and ranges) of before and after, their ratios, and the ratios to wrk's medians.
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

# Prints "rps cpu_us_per_request" for one run of $1 (a binary or wrk) with engine $2 at depth $3.
measure() {
  local bin=$1 engine=$2 depth=$3 tf rps user sys
  tf=$(mktemp)
  if [ "$bin" = wrk ]; then
    local cmd=(wrk -t1 -c64 -d"${secs}s" "$url")
    [ "$depth" -gt 1 ] && cmd=(wrk -t1 -c64 -d"${secs}s" -s bench/pipeline.lua "$url" -- "$depth")
    rps=$(/usr/bin/time -o "$tf" -f "%U %S" taskset -c 1 "${cmd[@]}" | awk '/^Requests\/sec/ {print $2}')
  else
    rps=$(/usr/bin/time -o "$tf" -f "%U %S" taskset -c 1 "$bin" run "$url" --engine "$engine" \
      --threads 1 -c 64 --pipeline "$depth" -z "${secs}s" --no-tui --json - 2>/dev/null |
      python3 -c 'import json,sys; print(json.load(sys.stdin)["summary"]["rps"])')
  fi
  read -r user sys < "$tf"; rm -f "$tf"
  echo "$rps $(python3 -c "print(f'{($user + $sys) * 1e6 / ($rps * $secs):.3f}')")"
}

echo "server on CPU 0, generators on CPU 1, 1 thread, 64 connections, ${secs} s a run, $rounds rounds"
echo "$(nproc) CPUs, $(uname -r), load average before: $(cut -d' ' -f1-3 /proc/loadavg)"
echo
echo "| round | depth | run | req/s | gen CPU µs/req |"
echo "|---|---|---|---|---|"
results=$(mktemp)
for r in $(seq "$rounds"); do
  for depth in 1 16; do
    read -r v c < <(measure wrk - "$depth")
    printf '| %s | %s | wrk | %.0f | %s |\n' "$r" "$depth" "$v" "$c"
    echo "wrk $depth $v $c" >> "$results"
    for engine in tokio uring; do
      if [ $((r % 2)) -eq 1 ]; then order="before after"; else order="after before"; fi
      for which in $order; do
        bin=$before; [ "$which" = after ] && bin=$after
        read -r v c < <(measure "$bin" "$engine" "$depth")
        printf '| %s | %s | %s %s | %.0f | %s |\n' "$r" "$depth" "$engine" "$which" "$v" "$c"
        echo "$engine-$which $depth $v $c" >> "$results"
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
    name, depth, v, c = line.split()
    runs.setdefault((name, int(depth)), []).append((float(v), float(c)))
def col(k, i):
    return [r[i] for r in runs[k]]
def show(vals, fmt):
    return f"{fmt(statistics.median(vals))} ({fmt(min(vals))}–{fmt(max(vals))})"
rate = lambda v: f"{v:,.0f}"
cpu = lambda v: f"{v:.3f}"
for i, what, fmt in ((0, "req/s", rate), (1, "generator CPU µs per request", cpu)):
    print()
    print(f"{what}: median (range)")
    print()
    print("| depth | engine | before | after | after/before | before/wrk | after/wrk |")
    print("|---|---|---|---|---|---|---|")
    for depth in (1, 16):
        wrk = statistics.median(col(("wrk", depth), i))
        for engine in ("tokio", "uring"):
            b, a = col((f"{engine}-before", depth), i), col((f"{engine}-after", depth), i)
            mb, ma = statistics.median(b), statistics.median(a)
            print(f"| {depth} | {engine} | {show(b, fmt)} | {show(a, fmt)} | {ma / mb:.3f} | {mb / wrk:.3f} | {ma / wrk:.3f} |")
        print(f"| {depth} | wrk | {show(col(('wrk', depth), i), fmt)} | | | | |")
print()
print("after/before paired within each round (adjacent runs, so the load of the moment is shared): median (range)")
print()
print("| depth | engine | req/s | gen CPU µs/req |")
print("|---|---|---|---|")
for depth in (1, 16):
    for engine in ("tokio", "uring"):
        b, a = runs[(f"{engine}-before", depth)], runs[(f"{engine}-after", depth)]
        cells = []
        for i in (0, 1):
            ratios = [x[i] / y[i] for x, y in zip(a, b)]
            cells.append(f"{statistics.median(ratios):.3f} ({min(ratios):.3f}–{max(ratios):.3f})")
        print(f"| {depth} | {engine} | {cells[0]} | {cells[1]} |")
EOF
rm -f "$results"
