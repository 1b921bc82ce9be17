#!/usr/bin/env bash
# tailscope over TLS vs wrk (https, HTTP/1.1) and vs h2load (h2), alternated in one run.
#
# nginx (1 worker; bench/nginx-tls.conf, a throw-away openssl certificate) is pinned to CPU 0 and
# every generator to CPU 1 with one thread and 64 connections; h2 runs STREAMS streams per
# connection in both tools (h2load -m). Nobody verifies the certificate (wrk and h2load do not;
# tailscope gets -k). For each run: requests/s as the tool reports it, and the generator's CPU
# per request = (user + sys) / requests, from /usr/bin/time. Medians and ranges per tool.
#
#   bash bench/compare-tls.sh [SECONDS per run, default 10] [ROUNDS, default 3] [STREAMS, default 8]
#
# Needs: wrk, nghttp2-client (h2load), nginx-light, openssl (apt-get), a release build
# (TS_BIN=PATH to use another).
set -euo pipefail
cd "$(dirname "$0")/.."
secs=${1:-10}
rounds=${2:-3}
streams=${3:-8}
url=https://127.0.0.1:18443/plaintext
ts=${TS_BIN:-./target/release/tailscope}
[ -x "$ts" ] || cargo build --release
dir=/tmp/ts-nginx-tls
mkdir -p "$dir"
rm -f "$dir"/raw-*.log
[ -f "$dir/cert.pem" ] || openssl req -x509 -newkey rsa:2048 -nodes -keyout "$dir/key.pem" \
  -out "$dir/cert.pem" -days 30 -subj /CN=127.0.0.1 2>/dev/null
taskset -c 0 nginx -p "$dir" -c "$PWD/bench/nginx-tls.conf" &
nginx_pid=$!
trap 'kill $nginx_pid 2>/dev/null || true; wait 2>/dev/null || true' EXIT
for _ in $(seq 50); do curl -skf -o /dev/null "$url" && break; sleep 0.1; done

# Prints "rps cpu_s" for one run of the tool named in $1.
measure() {
  local tool=$1 out rps
  local tf; tf=$(mktemp)
  case $tool in
    tailscope-h1)
      out=$(/usr/bin/time -o "$tf" -f "%U %S" taskset -c 1 "$ts" run "$url" -k --threads 1 -c 64 -z "${secs}s" --json - 2>/dev/null)
      rps=$(printf '%s' "$out" | python3 -c 'import json,sys; print(json.load(sys.stdin)["summary"]["rps"])') ;;
    tailscope-h2)
      out=$(/usr/bin/time -o "$tf" -f "%U %S" taskset -c 1 "$ts" run "$url" -k --http2 --streams "$streams" --threads 1 -c 64 -z "${secs}s" --json - 2>/dev/null)
      rps=$(printf '%s' "$out" | python3 -c 'import json,sys; print(json.load(sys.stdin)["summary"]["rps"])') ;;
    wrk)
      out=$(/usr/bin/time -o "$tf" -f "%U %S" taskset -c 1 wrk -t1 -c64 -d"${secs}s" "$url")
      rps=$(printf '%s' "$out" | awk '/^Requests\/sec/ {print $2}') ;;
    h2load)
      out=$(/usr/bin/time -o "$tf" -f "%U %S" taskset -c 1 h2load -t1 -c64 -m "$streams" -D "$secs" "$url")
      rps=$(printf '%s' "$out" | awk '/^finished in/ {print $4}') ;;
  esac
  # The anchors' own output, for their error lines (wrk's "Socket errors", h2load's "failed").
  case $tool in wrk|h2load) printf '%s\n' "$out" >> "$dir/raw-$tool.log" ;; esac
  read -r user sys < "$tf"; rm -f "$tf"
  echo "$rps $(python3 -c "print($user + $sys)")"
}

echo "| round | tool | req/s | gen CPU µs/req |"
echo "|---|---|---|---|"
tools="wrk tailscope-h1 h2load tailscope-h2"
declare -A all_rps all_cpu
for r in $(seq "$rounds"); do
  for tool in $tools; do
    read -r rps cpu < <(measure "$tool")
    us=$(python3 -c "print(f'{$cpu * 1e6 / ($rps * $secs):.2f}')")
    printf '| %s | %s | %.0f | %s |\n' "$r" "$tool" "$rps" "$us"
    all_rps[$tool]="${all_rps[$tool]:-} $rps"
    all_cpu[$tool]="${all_cpu[$tool]:-} $us"
  done
done
echo
echo "| tool | median req/s (range) | vs anchor | median CPU µs/req (range) | vs anchor |"
echo "|---|---|---|---|---|"
for tool in $tools; do
  case $tool in *h1|wrk) anchor=wrk ;; *) anchor=h2load ;; esac
  python3 - "$tool" "${all_rps[$tool]}" "${all_cpu[$tool]}" "${all_rps[$anchor]}" "${all_cpu[$anchor]}" "$anchor" <<'PY'
import statistics, sys
tool, anchor = sys.argv[1], sys.argv[6]
rps, cpu, arps, acpu = ([float(x) for x in a.split()] for a in sys.argv[2:6])
m, c = statistics.median(rps), statistics.median(cpu)
print(f"| {tool} | {m:,.0f} ({min(rps):,.0f}–{max(rps):,.0f}) | {m/statistics.median(arps):.2f}× {anchor} "
      f"| {c:.2f} ({min(cpu):.2f}–{max(cpu):.2f}) | {c/statistics.median(acpu):.2f}× |")
PY
done
