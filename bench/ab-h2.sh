#!/usr/bin/env bash
# Two tailscope builds alternated on h2 against an nginx already serving bench/nginx-tls.conf
# (start it as bench/compare-tls.sh does: taskset -c 0 nginx -p /tmp/ts-nginx-tls -c
# $PWD/bench/nginx-tls.conf). Generator on CPU 1, one thread, 64 connections, 8 streams.
# Prints markdown rows: round, build, req/s, generator CPU µs per request.
#
#   A=/tmp/ts-before B=/tmp/ts-after bash bench/ab-h2.sh [SECONDS, default 5] [ROUNDS, default 3]
set -euo pipefail
url=https://127.0.0.1:18443/plaintext
secs=${1:-5}
rounds=${2:-3}
echo "| round | build | req/s | gen CPU µs/req |"
echo "|---|---|---|---|"
for r in $(seq "$rounds"); do
  for name in A B; do
    bin=${!name}
    tf=$(mktemp)
    out=$(/usr/bin/time -o "$tf" -f "%U %S" taskset -c 1 "$bin" run "$url" -k --http2 --streams 8 \
      --threads 1 -c 64 -z "${secs}s" --json - 2>/dev/null)
    rps=$(printf '%s' "$out" | python3 -c 'import json,sys; print(json.load(sys.stdin)["summary"]["rps"])')
    read -r user sys < "$tf"; rm -f "$tf"
    python3 -c "print(f'| $r | $name | {$rps:.0f} | {($user + $sys) * 1e6 / ($rps * $secs):.2f} |')"
  done
done
