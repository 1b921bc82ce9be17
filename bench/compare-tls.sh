#!/usr/bin/env bash
# tailscope over TLS vs wrk and oha (https, HTTP/1.1) and vs h2load and oha (h2), alternated
# in one run.
#
# nginx (1 worker; bench/nginx-tls.conf, a throw-away openssl certificate) is pinned to CPU 0 and
# every generator to CPU 1 with one thread and 64 connections; h2 runs STREAMS streams per
# connection in every tool (h2load -m, oha -p). Nobody verifies the certificate (wrk and h2load
# do not; tailscope gets -k, oha --insecure). For each run: requests/s as the tool reports it,
# and the generator's CPU per request = (user + sys) / requests, from /usr/bin/time, and nginx's
# (its worker's user + sys from /proc over the run, over the same requests: what each tool costs
# the server it loads). Medians and ranges per tool, then each tailscope row against both anchors
# of its protocol. The output is markdown, ready to paste into BENCHMARKS.md.
#
#   bash bench/compare-tls.sh [SECONDS per run, default 10] [ROUNDS, default 3] [STREAMS, default 8]
#
# TS_BEFORE=PATH adds another tailscope build's https/1.1 rows (tailscope-h1-before), alternated
# with the rest, and its ratio to this one: a before/after in one sitting.
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
ts_version=$("$ts" --version | awk '{print $2}')
dir=/tmp/ts-nginx-tls
mkdir -p "$dir"
rm -f "$dir"/raw-*.log
[ -f "$dir/cert.pem" ] || openssl req -x509 -newkey rsa:2048 -nodes -keyout "$dir/key.pem" \
  -out "$dir/cert.pem" -days 30 -subj /CN=127.0.0.1 2>/dev/null
taskset -c 0 nginx -p "$dir" -c "$PWD/bench/nginx-tls.conf" &
nginx_pid=$!
trap 'kill $nginx_pid 2>/dev/null || true; wait 2>/dev/null || true' EXIT
for _ in $(seq 50); do curl -skf -o /dev/null "$url" && break; sleep 0.1; done
worker=$(pgrep -P "$nginx_pid" | head -1)
# nginx's worker's CPU time so far, in clock ticks (user + sys).
nginx_ticks() { awk '{print $14 + $15}' "/proc/$worker/stat"; }
clk=$(getconf CLK_TCK)

# Prints "rps cpu_s nginx_cpu_s" for one run of the tool named in $1.
measure() {
  local tool=$1 out rps t0 t1
  local tf; tf=$(mktemp)
  t0=$(nginx_ticks)
  case $tool in
    tailscope-h1|tailscope-h1-before)
      local bin=$ts; [ "$tool" = tailscope-h1-before ] && bin=$TS_BEFORE
      out=$(/usr/bin/time -o "$tf" -f "%U %S" taskset -c 1 "$bin" run "$url" -k --threads 1 -c 64 -z "${secs}s" --json - 2>/dev/null)
      rps=$(printf '%s' "$out" | python3 -c 'import json,sys; print(json.load(sys.stdin)["summary"]["rps"])') ;;
    tailscope-h2)
      out=$(/usr/bin/time -o "$tf" -f "%U %S" taskset -c 1 "$ts" run "$url" -k --http2 --streams "$streams" --threads 1 -c 64 -z "${secs}s" --json - 2>/dev/null)
      rps=$(printf '%s' "$out" | python3 -c 'import json,sys; print(json.load(sys.stdin)["summary"]["rps"])') ;;
    wrk)
      # The same request bytes as tailscope's (its default User-Agent and Accept): nginx is
      # the bound here, and a request with two headers fewer costs it ~10 % less (session 6).
      out=$(/usr/bin/time -o "$tf" -f "%U %S" taskset -c 1 wrk -t1 -c64 -d"${secs}s" \
        -H "User-Agent: tailscope/$ts_version" -H "Accept: */*" "$url")
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
  t1=$(nginx_ticks)
  read -r user sys < "$tf"; rm -f "$tf"
  echo "$rps $(python3 -c "print($user + $sys, ($t1 - $t0) / $clk)")"
}

echo "| round | tool | req/s | gen CPU µs/req | nginx CPU µs/req |"
echo "|---|---|---|---|---|"
tools="wrk oha-h1 tailscope-h1 h2load oha-h2 tailscope-h2"
if [ ! -x "$oha" ]; then
  echo "(oha not found at $oha: its rows are left out; cargo install oha, or OHA=PATH)"
  tools="wrk tailscope-h1 h2load tailscope-h2"
fi
[ -n "${TS_BEFORE:-}" ] && tools="${tools/tailscope-h1/tailscope-h1-before tailscope-h1}"
declare -A all_rps all_cpu all_ngx
for r in $(seq "$rounds"); do
  for tool in $tools; do
    read -r rps cpu ngx < <(measure "$tool")
    us=$(python3 -c "print(f'{$cpu * 1e6 / ($rps * $secs):.2f}')")
    ngx_us=$(python3 -c "print(f'{$ngx * 1e6 / ($rps * $secs):.2f}')")
    printf '| %s | %s | %.0f | %s | %s |\n' "$r" "$tool" "$rps" "$us" "$ngx_us"
    all_rps[$tool]="${all_rps[$tool]:-} $rps"
    all_cpu[$tool]="${all_cpu[$tool]:-} $us"
    all_ngx[$tool]="${all_ngx[$tool]:-} $ngx_us"
  done
done
echo
echo "| tool | median req/s (range) | median CPU µs/req (range) | nginx CPU µs/req (range) |"
echo "|---|---|---|---|"
summary() {
  python3 - "$@" <<'PY'
import statistics, sys
tool, rps, cpu, ngx = sys.argv[1], *([float(x) for x in a.split()] for a in sys.argv[2:5])
m = statistics.median
print(f"| {tool} | {m(rps):,.0f} ({min(rps):,.0f}–{max(rps):,.0f}) "
      f"| {m(cpu):.2f} ({min(cpu):.2f}–{max(cpu):.2f}) | {m(ngx):.2f} ({min(ngx):.2f}–{max(ngx):.2f}) |")
PY
}
for tool in $tools; do summary "$tool" "${all_rps[$tool]}" "${all_cpu[$tool]}" "${all_ngx[$tool]}"; done
echo
echo "| tailscope vs | req/s ratio (median) | CPU/req ratio (median; < 1: tailscope spends less) | nginx CPU/req ratio (median) |"
echo "|---|---|---|---|"
ratio() {
  python3 - "$@" <<'PY'
import statistics, sys
label, rps, cpu, ngx, arps, acpu, angx = sys.argv[1], *([float(x) for x in a.split()] for a in sys.argv[2:8])
m = statistics.median
print(f"| {label} | {m(rps)/m(arps):.2f}× | {m(cpu)/m(acpu):.2f}× | {m(ngx)/m(angx):.2f}× |")
PY
}
for pair in "tailscope-h1 wrk" "tailscope-h1 oha-h1" "tailscope-h2 h2load" "tailscope-h2 oha-h2" \
  "tailscope-h1 tailscope-h1-before" "tailscope-h1-before wrk"; do
  set -- $pair
  [ -n "${all_rps[$1]:-}" ] && [ -n "${all_rps[$2]:-}" ] || continue
  ratio "$1 vs $2" "${all_rps[$1]}" "${all_cpu[$1]}" "${all_ngx[$1]}" "${all_rps[$2]}" "${all_cpu[$2]}" "${all_ngx[$2]}"
done
