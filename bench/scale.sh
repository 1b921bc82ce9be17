#!/usr/bin/env bash
# Issue 32's scale table, for a quiet machine: what a connection costs tailscope's reference
# server and its generator (io_uring engine, one thread each) to hold (RSS, CPU while idle),
# to serve (req/s, CPU µs a request) and to close (CPU a close, teardown time), at 100, 1,000,
# 10,000 and 19,000 connections a process, with wrk and nginx (1 worker) beside them in the
# same sitting: servers on CPU 0, generators on CPU 1, rounds alternating every tool (see
# bench/scale-compare.py, which does the measuring).
#
#   bash bench/scale.sh [BIN, default target/release/tailscope] [COUNTS] [ROUNDS, default 3]
#   e.g. bash bench/scale.sh target/release/tailscope 100,1000,10000,19000 3
#
# Needs 2 CPUs, wrk and nginx, and an open-file limit of at least COUNTS' largest + 1,000
# (raised to the hard limit here; 19,000 connections need `ulimit -Hn` ≥ 20,000). Prints the
# load average before and after: figures from a loaded machine are not the table's.
set -euo pipefail
cd "$(dirname "$0")/.."
bin=${1:-target/release/tailscope}
counts=${2:-100,1000,10000,19000}
rounds=${3:-3}
[ -x "$bin" ] || { echo "no $bin: cargo build --release first" >&2; exit 2; }
for tool in wrk nginx taskset python3; do
    command -v "$tool" > /dev/null || { echo "$tool is missing (apt-get install $tool)" >&2; exit 2; }
done
[ "$(nproc)" -ge 2 ] || { echo "needs 2 CPUs (server on 0, generators on 1)" >&2; exit 2; }
ulimit -n "$(ulimit -Hn)"
most=$(tr ',' '\n' <<< "$counts" | sort -n | tail -1)
if [ "$(ulimit -n)" -lt $((most + 1000)) ]; then
    echo "ulimit -n is $(ulimit -n): $most connections need $((most + 1000)) (raise the hard limit)" >&2
    exit 2
fi
echo "tailscope $("$bin" --version 2>/dev/null || echo '?'), $(git rev-parse --short HEAD 2>/dev/null || echo '?')"
echo "load average before: $(cat /proc/loadavg)"
python3 bench/scale-compare.py "$bin" "$counts" "$rounds"
