#!/usr/bin/env bash
# tailscope's io_uring engine vs its tokio engine vs wrk, as HTTP/1.1 generators, alternated
# in one run (issue 11).
#
# The server (the reference server, `tailscope serve --threads 1`, or nginx with 1 worker from
# bench/nginx.conf) is pinned to CPU 0 and every generator to CPU 1 with one thread and 64
# connections, at pipelining depth 1 and 16 (wrk pipelines with bench/pipeline.lua). For each
# run: requests/s as the tool reports it, the generator's CPU per request = (user + sys) /
# requests from /usr/bin/time, and its peak RSS. Then, for both engines: open-loop precision
# (corrected vs uncorrected p50 at -q 1000; late sends at -q 100000) and memory over time
# (the RSS of one run at 20 s against its RSS at 2 s). At -q 100000 it also reads how long the
# generator's threads and the server's waited on the run queue (ready, not running) during the
# load, so that late sends can be set against the machine not running the generator.
#
#   bash bench/uring-generator.sh [SECONDS per run, default 5] [ROUNDS, default 3]
#
# SERVER=nginx loads nginx instead of the reference server. Needs: wrk (and nginx-light for
# SERVER=nginx) from apt-get, python3, a release build. Medians and ranges per tool and depth.
set -euo pipefail
cd "$(dirname "$0")/.."
secs=${1:-5}
rounds=${2:-3}
server=${SERVER:-embedded}
# TS=path runs another build (a "before" binary kept for a side-by-side comparison);
# THROUGHPUT=0 skips the req/s table (open loop and memory only).
ts=${TS:-./target/release/tailscope}
[ -x "$ts" ] || cargo build --release
case $server in
  embedded)
    port=18090
    taskset -c 0 "$ts" serve --addr 127.0.0.1:$port --threads 1 --cpus 0 >/dev/null &
    server_pid=$! ;;
  nginx)
    port=18080
    mkdir -p /tmp/ts-nginx
    nginx -p /tmp/ts-nginx -c "$PWD/bench/nginx.conf" -s stop 2>/dev/null || true
    taskset -c 0 nginx -p /tmp/ts-nginx -c "$PWD/bench/nginx.conf" &
    server_pid=$! ;;
  *) echo "SERVER is embedded or nginx" >&2; exit 2 ;;
esac
trap 'kill $server_pid 2>/dev/null || true; wait 2>/dev/null || true' EXIT
url=http://127.0.0.1:$port/plaintext
for _ in $(seq 50); do curl -sf -o /dev/null "$url" && break; sleep 0.1; done
curl -sf -o /dev/null "$url" || { echo "no server answers at $url (port in use?)" >&2; exit 1; }

json() { python3 -c "import json,sys; r=json.load(sys.stdin); print($1)"; }

# Prints "rps cpu_s maxrss_kb" for one run of tool $1 at pipelining depth $2.
measure() {
  local tool=$1 depth=$2 out rps tf
  tf=$(mktemp)
  case $tool in
    uring|tokio)
      out=$(/usr/bin/time -o "$tf" -f "%U %S %M" taskset -c 1 "$ts" run "$url" --engine "$tool" \
              --threads 1 -c 64 --pipeline "$depth" -z "${secs}s" --json - 2>/dev/null)
      rps=$(printf '%s' "$out" | json 'r["summary"]["rps"]') ;;
    wrk)
      local cmd=(wrk -t1 -c64 -d"${secs}s" "$url")
      [ "$depth" -gt 1 ] && cmd=(wrk -t1 -c64 -d"${secs}s" -s bench/pipeline.lua "$url" -- "$depth")
      out=$(/usr/bin/time -o "$tf" -f "%U %S %M" taskset -c 1 "${cmd[@]}")
      rps=$(printf '%s' "$out" | awk '/^Requests\/sec/ {print $2}') ;;
  esac
  read -r user sys rss < "$tf"; rm -f "$tf"
  echo "$rps $(python3 -c "print($user + $sys)") $rss"
}

echo "server: $server on CPU 0; generators on CPU 1, 1 thread, 64 connections, ${secs} s a run"
echo "$(nproc) CPUs, $(uname -r), load average before: $(cut -d' ' -f1-3 /proc/loadavg)"
echo
if [ "${THROUGHPUT:-1}" != 0 ]; then
echo "| round | depth | tool | req/s | gen CPU µs/req | peak RSS MiB |"
echo "|---|---|---|---|---|---|"
tools="wrk tokio uring"
declare -A all_rps all_cpu
for r in $(seq "$rounds"); do
  for depth in 1 16; do
    for tool in $tools; do
      read -r rps cpu rss < <(measure "$tool" "$depth")
      us=$(python3 -c "print(f'{$cpu * 1e6 / ($rps * $secs):.3f}')")
      printf '| %s | %s | %s | %.0f | %s | %.1f |\n' "$r" "$depth" "$tool" "$rps" "$us" \
        "$(python3 -c "print($rss/1024)")"
      all_rps[$tool$depth]="${all_rps[$tool$depth]:-} $rps"
      all_cpu[$tool$depth]="${all_cpu[$tool$depth]:-} $us"
    done
  done
done
echo
echo "| depth | tool | median req/s (range) | vs wrk | vs tokio | median CPU µs/req (range) | vs wrk |"
echo "|---|---|---|---|---|---|---|"
for depth in 1 16; do
  for tool in $tools; do
    python3 - "$depth" "$tool" "${all_rps[$tool$depth]}" "${all_cpu[$tool$depth]}" \
      "${all_rps[wrk$depth]}" "${all_cpu[wrk$depth]}" "${all_rps[tokio$depth]}" <<'PY'
import statistics as st, sys
depth, tool = sys.argv[1:3]
rps, cpu, wrps, wcpu, trps = ([float(x) for x in a.split()] for a in sys.argv[3:])
m, c = st.median(rps), st.median(cpu)
print(f"| p{depth} | {tool} | {m:,.0f} ({min(rps):,.0f}–{max(rps):,.0f}) | {m/st.median(wrps):.2f}× "
      f"| {m/st.median(trps):.2f}× | {c:.3f} ({min(cpu):.3f}–{max(cpu):.3f}) | {c/st.median(wcpu):.2f}× |")
PY
  done
done
fi
echo
echo "Open-loop precision (16 connections at -q 1000, 64 at -q 100000; pipelining off), per round."
echo "Run-queue wait: how long the generator's threads (all of them, summed) and the server's"
echo "were ready to run but not running, from /proc/PID/task/*/schedstat, over the load's"
echo "window from 0.5 s to 1 s before its end, in ms per second: a late send while the"
echo "generator was not running is the machine's lateness, not its timer's."
echo
echo "| round | engine | -q 1000: p50 corrected − uncorrected | -q 100000: late sends | req/s | run-queue wait ms/s: generator, server |"
echo "|---|---|---|---|---|---|"
# The run-queue wait (ns) of every thread of process $1 and of its children (nginx's
# workers), summed.
run_delay() {
  local p
  for p in "$1" $(pgrep -P "$1" || true); do cat /proc/"$p"/task/*/schedstat 2>/dev/null || true; done \
    | awk '{s += $2} END {print s + 0}'
}
declare -A late_pct
for r in $(seq "$rounds"); do
  for engine in tokio uring; do
    low=$(taskset -c 1 "$ts" run "$url" --engine $engine --threads 1 -c 16 -q 1000 -z "${secs}s" \
            --json - 2>/dev/null | json 'r["latency_us"]["p50"] - r["latency_uncorrected_us"]["p50"]')
    jf=$(mktemp)
    taskset -c 1 "$ts" run "$url" --engine $engine --threads 1 -c 64 -q 100000 -z "${secs}s" \
      --json "$jf" >/dev/null 2>&1 &
    gen=$!
    sleep 0.5
    g0=$(run_delay $gen); s0=$(run_delay $server_pid); t0=$(date +%s.%N)
    # The window ends a second before the run's: read after it exits, the process is gone.
    sleep "$(python3 -c "print(max(0.1, $secs - 1.5))")"
    g1=$(run_delay $gen); s1=$(run_delay $server_pid); t1=$(date +%s.%N)
    wait $gen || true  # a run that exits non-zero still wrote its JSON
    high=$(json 'f"""{r["summary"]["late_sends"]:,} of {r["summary"]["requests"]:,} ({100*r["summary"]["late_sends"]/max(1,r["summary"]["requests"]):.3f} %) | {r["summary"]["rps"]:,.0f}"""' < "$jf")
    late_pct[$engine]="${late_pct[$engine]:-} $(json '100*r["summary"]["late_sends"]/max(1,r["summary"]["requests"])' < "$jf")"
    rm -f "$jf"
    waits=$(python3 -c "d=$t1-$t0; print(f'{($g1-$g0)/1e6/d:.1f}, {($s1-$s0)/1e6/d:.1f}')")
    echo "| $r | $engine | $low µs | $high | $waits |"
  done
done
echo
for engine in tokio uring; do
  python3 - "$engine" "${late_pct[$engine]}" <<'PY'
import statistics as st, sys
v = [float(x) for x in sys.argv[2].split()]
print(f"{sys.argv[1]}: late sends at -q 100000, median {st.median(v):.3f} % ({min(v):.3f}–{max(v):.3f} %)")
PY
done

echo
echo "Memory over time (RSS of one closed-loop run at pipeline 16, read at 2 s and at 20 s):"
echo
echo "| engine | RSS at 2 s | RSS at 20 s | ratio |"
echo "|---|---|---|---|"
for engine in tokio uring; do
  taskset -c 1 "$ts" run "$url" --engine $engine --threads 1 -c 64 --pipeline 16 -z 22s \
    --json /dev/null >/dev/null 2>&1 &
  pid=$!
  sleep 2; early=$(awk '/^VmRSS/ {print $2}' /proc/$pid/status)
  sleep 18; late=$(awk '/^VmRSS/ {print $2}' /proc/$pid/status)
  wait $pid || true
  python3 -c "a,b=$early,$late; print(f'| $engine | {a/1024:.1f} MiB | {b/1024:.1f} MiB | {b/a:.2f}× |')"
done
echo
echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
