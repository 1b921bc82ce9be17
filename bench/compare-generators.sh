#!/usr/bin/env bash
# tailscope vs wrk vs oha as HTTP/1.1 generators, alternated in one run.
#
# The server (nginx, 1 worker; bench/nginx.conf) is pinned to CPU 0 and every generator to
# CPU 1 with one thread and 64 connections. For each run: requests/s as the tool reports it,
# and the generator's CPU per request = (user + sys) / requests, from /usr/bin/time.
#
#   bash bench/compare-generators.sh [SECONDS per run, default 10] [ROUNDS, default 3]
#
# Needs: wrk and nginx-light (apt-get), oha (cargo install --locked oha), a release build.
set -euo pipefail
cd "$(dirname "$0")/.."
secs=${1:-10}
rounds=${2:-3}
url=http://127.0.0.1:18080/plaintext
ts=./target/release/tailscope
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
    tailscope) out=$(/usr/bin/time -o "$tf" -f "%U %S %M" taskset -c 1 "$ts" run "$url" --threads 1 -c 64 -z "${secs}s" --json - 2>/dev/null)
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
declare -A sum_rps sum_cpu
for r in $(seq "$rounds"); do
  for tool in wrk tailscope oha; do
    read -r rps cpu rss < <(measure "$tool")
    us=$(python3 -c "print(f'{$cpu * 1e6 / ($rps * $secs):.2f}')")
    printf '| %s | %s | %.0f | %s | %.1f |\n' "$r" "$tool" "$rps" "$us" "$(python3 -c "print($rss/1024)")"
    sum_rps[$tool]=$(python3 -c "print(${sum_rps[$tool]:-0} + $rps)")
    sum_cpu[$tool]=$(python3 -c "print(${sum_cpu[$tool]:-0} + $us)")
  done
done
echo
echo "| tool | mean req/s | vs wrk | mean CPU µs/req | vs wrk |"
echo "|---|---|---|---|---|"
for tool in wrk tailscope oha; do
  python3 - "$tool" "${sum_rps[$tool]}" "${sum_cpu[$tool]}" "${sum_rps[wrk]}" "${sum_cpu[wrk]}" "$rounds" <<'PY'
import sys
tool, rps, cpu, wrps, wcpu, n = sys.argv[1], *map(float, sys.argv[2:])
print(f"| {tool} | {rps/n:,.0f} | {rps/wrps:.2f}× | {cpu/n:.2f} | {cpu/wcpu:.2f}× |")
PY
done
