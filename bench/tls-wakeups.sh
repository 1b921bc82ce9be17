#!/usr/bin/env bash
# What each generator costs nginx's one TLS worker per request, and why: nginx's CPU per
# request (its worker's run time from /proc/PID/schedstat, in ns: finer than clock ticks),
# the generator's sleeps per request (its voluntary context switches, from /usr/bin/time),
# the wake-up IPIs each CPU took per request (RES and CAL of /proc/interrupts) and the
# segments per request (nstat: ACKs of their own would show here). nginx on CPU 0
# (bench/nginx-tls.conf), every generator on CPU 1, 1 thread, 64 connections, https/1.1;
# wrk sends tailscope's request bytes. Rounds alternate the tools.
#
#   TOOLS="wrk ts ts-before ts-nospin" TS=PATH TS_BEFORE=PATH bash bench/tls-wakeups.sh [SECONDS, default 4] [ROUNDS, default 5]
#
# ts-before runs TS_BEFORE (another build, e.g. one from before --spin-before-sleep), ts-nospin
# runs TS with --spin-before-sleep 0. EXTRA is added to every tailscope run's flags (EXTRA="-q
# 1000": open loop, to see what polling before sleeping costs when there is little to do).
# Other ts-VARIANTs run TS with TS_EXP=VARIANT, which only a build with
# bench/tls-wakeups-experiment.patch applied reads: `off` (no profiler: RunProfiler samples
# nothing), `noperf` (no perf counters), `nolisten` (no sock_diag), `spin` (the worker
# thread never sleeps: a task that yields in a loop). Session 7 (BENCHMARKS.md).
set -euo pipefail
cd "$(dirname "$0")/.."
secs=${1:-4}
rounds=${2:-5}
url=https://127.0.0.1:18443/plaintext
ts=${TS:-./target/release/tailscope}
dir=/tmp/ts-nginx-tls
mkdir -p "$dir"
[ -f "$dir/cert.pem" ] || openssl req -x509 -newkey rsa:2048 -nodes -keyout "$dir/key.pem" \
  -out "$dir/cert.pem" -days 30 -subj /CN=127.0.0.1 2>/dev/null
taskset -c 0 nginx -p "$dir" -c "$PWD/bench/nginx-tls.conf" >/dev/null 2>&1 &
nginx_pid=$!
trap 'kill $nginx_pid 2>/dev/null || true; wait 2>/dev/null || true' EXIT
for _ in $(seq 50); do curl -skf -o /dev/null "$url" && break; sleep 0.1; done
worker=$(pgrep -P "$nginx_pid" | head -1)
# nginx's worker's run time so far, in seconds.
nginx_s() { awk '{print $1 / 1e9}' "/proc/$worker/schedstat"; }
# RES and CAL interrupts of CPU 0 and CPU 1 so far.
irqs() { awk '/^ *(RES|CAL):/ {a[$1]=$2" "$3} END {print a["RES:"], a["CAL:"]}' /proc/interrupts; }
echo "| round | tool | req/s | gen CPU µs/req | gen sleeps/req | nginx CPU µs/req | RES cpu1/req | CAL cpu0/req | segments/req |"
echo "|---|---|---|---|---|---|---|---|---|"
for r in $(seq "$rounds"); do
  for tool in ${TOOLS:-wrk ts}; do
    tf=$(mktemp)
    nstat -n >/dev/null
    i0=$(irqs); t0=$(nginx_s)
    case $tool in
      wrk)
        out=$(/usr/bin/time -o "$tf" -f "%U %S %w" taskset -c 1 wrk -t1 -c64 -d"${secs}s" \
          -H "User-Agent: tailscope/$("$ts" --version | awk '{print $2}')" -H "Accept: */*" "$url")
        n=$(printf '%s' "$out" | awk '/requests in/ {print $1}') ;;
      ts*)
        variant=${tool#ts}; variant=${variant#-}
        bin=$ts; flags=()
        case $variant in
          before) bin=${TS_BEFORE:?TS_BEFORE=PATH for ts-before}; variant= ;;
          nospin) flags=(--spin-before-sleep 0); variant= ;;
        esac
        # shellcheck disable=SC2086 # EXTRA is a list of flags
        out=$(TS_EXP=$variant /usr/bin/time -o "$tf" -f "%U %S %w" taskset -c 1 "$bin" run "$url" -k \
          --threads 1 -c 64 -z "${secs}s" "${flags[@]}" ${EXTRA:-} --json - 2>/dev/null)
        n=$(printf '%s' "$out" | python3 -c 'import json,sys; print(json.load(sys.stdin)["summary"]["requests"])') ;;
    esac
    t1=$(nginx_s); i1=$(irqs)
    segs=$(nstat -z TcpOutSegs | awk 'NR>1 {print $2}')
    read -r user sys sleeps < "$tf"; rm -f "$tf"
    python3 - "$r" "$tool" "$secs" "$n" "$user" "$sys" "$sleeps" "$t0" "$t1" "$i0" "$i1" "$segs" <<'PY'
import sys
r, tool, secs, n, user, sys_, sleeps, t0, t1, i0, i1, segs = sys.argv[1:]
n = int(n)
a, b = [int(x) for x in i0.split()], [int(x) for x in i1.split()]
res1, cal0 = b[1] - a[1], b[2] - a[2]
print(f"| {r} | {tool} | {n / float(secs):.0f} | {(float(user) + float(sys_)) * 1e6 / n:.2f} "
      f"| {int(sleeps) / n:.3f} | {(float(t1) - float(t0)) * 1e6 / n:.2f} | {res1 / n:.3f} "
      f"| {cal0 / n:.3f} | {int(segs or 0) / n:.2f} |")
PY
  done
done
