#!/usr/bin/env bash
# Peak RSS of the generator holding N connections open (issue 19): tailscope's two engines
# and wrk, alternated, against the reference server (1 thread on CPU 0; generators on CPU 1,
# one thread). Per-connection cost = (RSS at the larger N - RSS at the smaller) / (difference).
#
#   bash bench/c100k-memory.sh [SMALL, default 5000] [LARGE, default 18000] [ROUNDS, default 2]
#
# Needs wrk, a release build, and an open-file limit above LARGE + 1000 (the script raises
# the soft limit to the hard one).
set -euo pipefail
cd "$(dirname "$0")/.."
small=${1:-5000}
large=${2:-18000}
rounds=${3:-2}
ulimit -n "$(ulimit -Hn)"
ts=./target/release/tailscope
[ -x "$ts" ] || cargo build --release
port=18095
taskset -c 0 "$ts" serve --addr 127.0.0.1:$port --threads 1 --max-conns 60000 >/dev/null &
server=$!
trap 'kill $server 2>/dev/null || true' EXIT
url=http://127.0.0.1:$port/plaintext
for _ in $(seq 50); do curl -sf -o /dev/null "$url" && break; sleep 0.1; done
rss() { # tool N -> peak RSS KiB
  local tf; tf=$(mktemp)
  case $1 in
    wrk) /usr/bin/time -o "$tf" -f %M taskset -c 1 wrk -t1 -c"$2" -d10s "$url" >/dev/null 2>&1 || true ;;
    *) /usr/bin/time -o "$tf" -f %M taskset -c 1 "$ts" run "$url" --engine "$1" --threads 1 \
         -c "$2" --connect-rate 10000/s --warmup 6s -z 4s --no-tui >/dev/null 2>&1 || true ;;
  esac
  tail -1 "$tf"; rm -f "$tf"
}
echo "| round | tool | RSS at $small (MiB) | RSS at $large (MiB) | KiB per connection |"
echo "|---|---|---|---|---|"
for r in $(seq "$rounds"); do
  for tool in wrk tokio uring; do
    a=$(rss $tool "$small"); b=$(rss $tool "$large")
    python3 -c "print(f'| $r | $tool | {$a/1024:.1f} | {$b/1024:.1f} | {($b-$a)/($large-$small):.2f} |')"
  done
done
