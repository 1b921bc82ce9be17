#!/usr/bin/env bash
# tailscope over TLS vs wrk and oha (https, HTTP/1.1) and vs h2load and oha (h2), alternated
# in one run.
#
# nginx (1 worker; bench/nginx-tls.conf, a throw-away openssl certificate) is pinned to CPU 0 and
# every generator to CPU 1 with one thread and 64 connections; h2 runs STREAMS streams per
# connection in every tool (h2load -m, oha -p). Nobody verifies the certificate (wrk and h2load
# do not; tailscope gets -k, oha --insecure). For each run: requests/s as the tool reports it,
# and the generator's CPU per request = (user + sys) / requests, from /usr/bin/time. Medians and
# ranges per tool, then each tailscope row against both anchors of its protocol. The output is
# markdown, ready to paste into BENCHMARKS.md.
#
#   bash bench/compare-tls.sh [SECONDS per run, default 10] [ROUNDS, default 3] [STREAMS, default 8]
#
# Needs: wrk, nghttp2-client (h2load), nginx-light, openssl (apt-get), oha (cargo install oha;
# OHA=PATH, default ~/.cargo/bin/oha, skipped with a note when missing), a release build
# (TS_BIN=PATH to use another).
set -euo pipefail
cd "$(dirname "$0")/.."
secs=${1:-10}
rounds=${2:-3}
streams=${3:-8}
url=https://127.0.0.1:18443/plaintext
ts=${TS_BIN:-./target/release/tailscope}
oha=${OHA:-$HOME/.cargo/bin/oha}
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
    oha-h1|oha-h2)
      local h2=(); [ "$tool" = oha-h2 ] && h2=(--http2 -p "$streams")
      out=$(/usr/bin/time -o "$tf" -f "%U %S" taskset -c 1 "$oha" --no-tui --insecure --worker-threads 1 \
        -c 64 "${h2[@]}" -z "${secs}s" --output-format json "$url")
      rps=$(printf '%s' "$out" | python3 -c 'import json,sys; print(json.load(sys.stdin)["summary"]["requestsPerSec"])') ;;
  esac
  # The anchors' own output, for their error lines (wrk's "Socket errors", h2load's "failed",
  # oha's errorDistribution).
  case $tool in wrk|h2load|oha-*) printf '%s\n' "$out" >> "$dir/raw-$tool.log" ;; esac
  read -r user sys < "$tf"; rm -f "$tf"
  echo "$rps $(python3 -c "print($user + $sys)")"
}

echo "| round | tool | req/s | gen CPU µs/req |"
echo "|---|---|---|---|"
tools="wrk oha-h1 tailscope-h1 h2load oha-h2 tailscope-h2"
if [ ! -x "$oha" ]; then
  echo "(oha not found at $oha: its rows are left out; cargo install oha, or OHA=PATH)"
  tools="wrk tailscope-h1 h2load tailscope-h2"
fi
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
echo "| tool | median req/s (range) | median CPU µs/req (range) |"
echo "|---|---|---|"
summary() {
  python3 - "$@" <<'PY'
import statistics, sys
tool, rps, cpu = sys.argv[1], *([float(x) for x in a.split()] for a in sys.argv[2:4])
print(f"| {tool} | {statistics.median(rps):,.0f} ({min(rps):,.0f}–{max(rps):,.0f}) "
      f"| {statistics.median(cpu):.2f} ({min(cpu):.2f}–{max(cpu):.2f}) |")
PY
}
for tool in $tools; do summary "$tool" "${all_rps[$tool]}" "${all_cpu[$tool]}"; done
echo
echo "| tailscope vs | req/s ratio (median) | CPU/req ratio (median; < 1: tailscope spends less) |"
echo "|---|---|---|"
ratio() {
  python3 - "$@" <<'PY'
import statistics, sys
label, rps, cpu, arps, acpu = sys.argv[1], *([float(x) for x in a.split()] for a in sys.argv[2:6])
m = statistics.median
print(f"| {label} | {m(rps)/m(arps):.2f}× | {m(cpu)/m(acpu):.2f}× |")
PY
}
for pair in "tailscope-h1 wrk" "tailscope-h1 oha-h1" "tailscope-h2 h2load" "tailscope-h2 oha-h2"; do
  set -- $pair
  [ -n "${all_rps[$2]:-}" ] || continue
  ratio "$1 vs $2" "${all_rps[$1]}" "${all_cpu[$1]}" "${all_rps[$2]}" "${all_cpu[$2]}"
done
