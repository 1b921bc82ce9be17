#!/usr/bin/env bash
# tailscope vs wrk vs oha as HTTP/1.1 generators, alternated in one run.
#
# The server (nginx, 1 worker; bench/nginx.conf) is pinned to CPU 0 and every generator to
# CPU 1 with one thread and 64 connections. For each run: requests/s as the tool reports it,
# and the generator's CPU per request = (user + sys) / requests, from /usr/bin/time.
#
#   bash bench/compare-generators.sh [SECONDS per run, default 10] [ROUNDS, default 3]
#
# Needs: wrk and nginx-light (apt-get), a release build; oha (cargo install --locked oha) is
# measured when installed. TOOLS="wrk tailscope" picks the tools; TS_BEFORE=BIN adds "before", an
# older tailscope build; TS_BIN=BIN measures another build as "tailscope", and TS_ARGS adds flags to
# both tailscope runs (TS_ARGS="--engine tokio"). Medians and ranges per tool.
set -euo pipefail
cd "$(dirname "$0")/.."
secs=${1:-10}
rounds=${2:-3}
url=http://127.0.0.1:18080/plaintext
ts=${TS_BIN:-./target/release/tailscope}
oha=$(command -v oha || echo "$HOME/.cargo/bin/oha")
[ -x "$ts" ] || cargo build --release
mkdir -p /tmp/ts-nginx
nginx -p /tmp/ts-nginx -c "$PWD/bench/nginx.conf" -s stop 2>/dev/null || true
taskset -c 0 nginx -p /tmp/ts-nginx -c "$PWD/bench/nginx.conf" &
nginx_pid=$!
trap 'kill $nginx_pid 2>/dev/null || true; wait 2>/dev/null || true' EXIT
for _ in $(seq 50); do curl -sf -o /dev/null "$url" && break; sleep 0.1; done

# Prints "rps cpu_s maxrss_kb" for one run of the tool named in $1.
measure() {
  local tool=$1 out rps
  local tf; tf=$(mktemp)
  case $tool in
    tailscope|before)
               local bin=$ts; [ "$tool" = before ] && bin=$TS_BEFORE
               out=$(/usr/bin/time -o "$tf" -f "%U %S %M" taskset -c 1 "$bin" run "$url" ${TS_ARGS:-} --threads 1 -c 64 -z "${secs}s" --json - 2>/dev/null)
               rps=$(printf '%s' "$out" | python3 -c 'import json,sys; print(json.load(sys.stdin)["summary"]["rps"])') ;;
    wrk)       out=$(/usr/bin/time -o "$tf" -f "%U %S %M" taskset -c 1 wrk -t1 -c64 -d"${secs}s" "$url")
               rps=$(printf '%s' "$out" | awk '/^Requests\/sec/ {print $2}') ;;
    oha)       out=$(/usr/bin/time -o "$tf" -f "%U %S %M" taskset -c 1 "$oha" --no-tui --worker-threads 1 --output-format json -c 64 -z "${secs}s" "$url")
               rps=$(printf '%s' "$out" | python3 -c 'import json,sys; print(json.load(sys.stdin)["summary"]["requestsPerSec"])') ;;
  esac
  read -r user sys rss < "$tf"; rm -f "$tf"
  echo "$rps $(python3 -c "print($user + $sys)") $rss"
}

echo "| round | tool | req/s | gen CPU µs/req | peak RSS MiB |"
echo "|---|---|---|---|---|"
tools=${TOOLS:-wrk tailscope oha}
[ -n "${TS_BEFORE:-}" ] && tools="$tools before"
[ -x "$oha" ] || tools=${tools//oha/}
declare -A all_rps all_cpu
for r in $(seq "$rounds"); do
  for tool in $tools; do
    read -r rps cpu rss < <(measure "$tool")
    us=$(python3 -c "print(f'{$cpu * 1e6 / ($rps * $secs):.2f}')")
    printf '| %s | %s | %.0f | %s | %.1f |\n' "$r" "$tool" "$rps" "$us" "$(python3 -c "print($rss/1024)")"
    all_rps[$tool]="${all_rps[$tool]:-} $rps"
    all_cpu[$tool]="${all_cpu[$tool]:-} $us"
  done
done
echo
echo "| tool | median req/s (range) | vs wrk | median CPU µs/req (range) | vs wrk |"
echo "|---|---|---|---|---|"
for tool in $tools; do
  python3 - "$tool" "${all_rps[$tool]}" "${all_cpu[$tool]}" "${all_rps[wrk]}" "${all_cpu[wrk]}" <<'PY'
import statistics, sys
tool = sys.argv[1]
rps, cpu, wrps, wcpu = ([float(x) for x in a.split()] for a in sys.argv[2:])
m, c = statistics.median(rps), statistics.median(cpu)
print(f"| {tool} | {m:,.0f} ({min(rps):,.0f}–{max(rps):,.0f}) | {m/statistics.median(wrps):.2f}× "
      f"| {c:.2f} ({min(cpu):.2f}–{max(cpu):.2f}) | {c/statistics.median(wcpu):.2f}× |")
PY
done
