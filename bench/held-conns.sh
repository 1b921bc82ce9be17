#!/usr/bin/env bash
# What holding many idle clients costs the reference server (issue 19): the latency of
# `-c 64` open-loop load alone, beside N idle connections tailscope holds (--idle-conns N),
# and beside N idle connections held by another program (a Python script: the anchor, so a
# cost that comes from tailscope's own generator holding them would show as a difference
# between the two). Alternated, ROUNDS rounds. The reference server: 1 thread on CPU 0; the
# generator: 1 thread on CPU 1; the Python holder on CPU 1 too (it only sleeps). tailscope
# opens its connections from 4 loopback addresses during a 6 s warm-up at 10,000/s: from one
# address, connects with 18,000 of its ~28,000 ports to the server in use stall in the
# kernel's port search for seconds (the generator's own loop with them: measured, see
# BENCHMARKS.md), which is not what this measures. Each row
# says how late the generator's tick fired at most (its own stalls: a loaded machine) and
# the 1-minute load average when it began.
#
#   bash bench/held-conns.sh [N, default 20000] [ROUNDS, default 3] [RATE, default 10000]
#
# Needs a release build. tailscope's generator and the reference server keep their sockets on
# io_uring direct descriptors (each thread's or worker's file table up to RLIMIT_NOFILE), so N
# may exceed the open-file limit: the generator gets the threads its tables need (both on
# CPU 1), the server 2 workers (on CPU 0). The Python holder keeps a descriptor per socket:
# it holds min(N, RLIMIT_NOFILE - 200), and its rows say how many.
set -euo pipefail
cd "$(dirname "$0")/.."
held=${1:-20000}
rounds=${2:-3}
rate=${3:-10000}
ulimit -n "$(ulimit -Hn)"
ts=./target/release/tailscope
[ -x "$ts" ] || cargo build --release
port=18096
limit=$(ulimit -n)
py_held=$(( held < limit - 200 ? held : limit - 200 ))
workers=$(( (held + 64) / (limit - 1000) + 1 ))
taskset -c 0 "$ts" serve --addr 127.0.0.1:$port --threads "$workers" --max-conns 200000 >/dev/null &
server=$!
holder=
trap 'kill $server $holder 2>/dev/null || true' EXIT
url=http://127.0.0.1:$port/plaintext
for _ in $(seq 50); do curl -sf -o /dev/null "$url" && break; sleep 0.1; done
out=$(mktemp -d)

# Runs the load; $1 names the variant, the rest are extra flags. Prints a table row.
load() {
  local name=$1; shift
  local json=$out/$name.json
  local loadavg; loadavg=$(cut -d' ' -f1 /proc/loadavg)
  taskset -c 1 "$ts" run "$url" --engine uring -c 64 -q "$rate" \
    --connect-rate 10000/s --source-addrs 127.0.0.1,127.0.0.2,127.0.0.3,127.0.0.4 \
    --warmup 6s -z 10s --no-tui --json "$json" "$@" >/dev/null 2>&1 || true
  python3 - "$json" "$name" "$round" "$loadavg" <<'EOF'
import json, sys
r = json.load(open(sys.argv[1]))
l, s, c = r["latency_us"], r["summary"], r.get("connections") or {}
idle = c.get("idle") or {}
held = f'{idle.get("open_at_end")} of {idle.get("asked")}' if idle else "-"
lag = max((p["generator_lag_us"] for p in r["timeseries"]), default=0) / 1000
print(f'| {sys.argv[3]} | {sys.argv[2]} | {r["config"]["threads"]} | {held} | {s["rps"]:,.0f} | {l["p50"]/1000:.3f} | {l["p99"]/1000:.3f} | {l["p999"]/1000:.3f} | {l["max"]/1000:.3f} | {s["errors"]} | {lag:.1f} | {sys.argv[4]} |')
EOF
}

# Holds $held idle connections to the server from another process until killed.
hold_python() {
  taskset -c 1 python3 - "$port" "$py_held" <<'EOF' &
import resource, socket, sys, time
port, n = int(sys.argv[1]), int(sys.argv[2])
soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
held = []
for i in range(n):
    s = socket.socket()
    s.connect(("127.0.0.1", port))
    held.append(s)
print(f"holding {len(held)}", file=sys.stderr, flush=True)
time.sleep(3600)
EOF
  holder=$!
  sleep $((held / 4000 + 2))
}

echo "| round | variant | generator threads | idle held to the end | req/s | p50 (ms) | p99 (ms) | p99.9 (ms) | max (ms) | errors | generator lag max (ms) | load avg |"
echo "|---|---|---|---|---|---|---|---|---|---|---|---|"
for round in $(seq "$rounds"); do
  load alone
  load "tailscope --idle-conns $held" --idle-conns "$held"
  hold_python
  load "python holds $py_held"
  kill "$holder"; wait "$holder" 2>/dev/null || true; holder=
  sleep 1
done
rm -rf "$out"
