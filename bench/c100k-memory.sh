#!/usr/bin/env bash
# Peak RSS of the generator holding N connections open (issue 19): tailscope's two engines,
# wrk and oha, alternated, against the reference server (on CPU 0; generators on CPU 1, one
# thread where the tool can: tailscope's io_uring engine keeps its sockets in each thread's
# registered file table, of RLIMIT_NOFILE slots at most, so past that it runs as many
# threads as the connections need and says so in the table). Per-connection cost = (RSS at
# the larger N - RSS at the smaller) / (difference).
#
#   bash bench/c100k-memory.sh [SMALL, default 5000] [LARGE, default 50000] [ROUNDS, default 3]
#
# A tool that keeps a descriptor per connection (wrk, oha, the tokio engine) cannot hold more
# than RLIMIT_NOFILE connections: its cell is "n/a" with the reason, not a number. Needs wrk,
# oha (cargo install oha) and a release build; the script raises the soft open-file limit to
# the hard one.
set -euo pipefail
cd "$(dirname "$0")/.."
small=${1:-5000}
large=${2:-50000}
rounds=${3:-3}
ulimit -n "$(ulimit -Hn)"
limit=$(ulimit -n)
ts=./target/release/tailscope
oha=$(command -v oha || echo ~/.cargo/bin/oha)
[ -x "$ts" ] || cargo build --release
port=18095
# Workers enough that each one's file table (RLIMIT_NOFILE slots) holds its share.
workers=$(( large / (limit - 1000) + 1 ))
taskset -c 0 "$ts" serve --addr 127.0.0.1:$port --threads "$workers" --max-conns 200000 >/dev/null &
server=$!
trap 'kill $server 2>/dev/null || true' EXIT
url=http://127.0.0.1:$port/plaintext
for _ in $(seq 50); do curl -sf -o /dev/null "$url" && break; sleep 0.1; done
rss() { # tool N -> "peak RSS KiB" or "n/a (why)"
  local tf; tf=$(mktemp)
  if [ "$1" != uring ] && [ "$2" -gt $((limit - 100)) ]; then
    echo "n/a (a descriptor per connection; RLIMIT_NOFILE $limit)"; return
  fi
  case $1 in
    wrk) /usr/bin/time -o "$tf" -f %M taskset -c 1 wrk -t1 -c"$2" -d10s "$url" >/dev/null 2>&1 || true ;;
    oha) /usr/bin/time -o "$tf" -f %M taskset -c 1 "$oha" -c "$2" -z 10s --no-tui "$url" >/dev/null 2>&1 || true ;;
    tokio) /usr/bin/time -o "$tf" -f %M taskset -c 1 "$ts" run "$url" --engine tokio --threads 1 \
         -c "$2" --connect-rate 10000/s --warmup 6s -z 4s --no-tui >/dev/null 2>&1 || true ;;
    # No --threads: one where its table holds them all, more where not (see the header).
    uring) /usr/bin/time -o "$tf" -f %M taskset -c 1 "$ts" run "$url" --engine uring \
         -c "$2" --source-addrs auto --connect-rate 10000/s --warmup 6s -z 4s --no-tui \
         --json /tmp/c100k-memory.json >/dev/null 2>&1 || true ;;
  esac
  tail -1 "$tf"; rm -f "$tf"
}
threads() { python3 -c "import json; r=json.load(open('/tmp/c100k-memory.json')); s=r['summary']; print(f\"{r['config']['threads']} thread(s), {s['connections_opened']} opened, {s['connect_failures']} failed\")"; }
echo "| round | tool | RSS at $small (MiB) | RSS at $large (MiB) | KiB per connection | note |"
echo "|---|---|---|---|---|---|"
for r in $(seq "$rounds"); do
  for tool in wrk oha tokio uring; do
    a=$(rss $tool "$small"); note=""
    b=$(rss $tool "$large")
    [ $tool = uring ] && note="at $large: $(threads)"
    python3 - "$r" "$tool" "$a" "$b" "$small" "$large" "$note" <<'PY'
import sys
r, tool, a, b, small, large, note = sys.argv[1:]
mib = lambda v: f"{int(v)/1024:.1f}" if v.isdigit() else v
per = f"{(int(b)-int(a))/(int(large)-int(small)):.2f}" if a.isdigit() and b.isdigit() else "n/a"
print(f"| {r} | {tool} | {mib(a)} | {mib(b)} | {per} | {note} |")
PY
  done
done
