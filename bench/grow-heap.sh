#!/usr/bin/env bash
# What a run's generator grows by under load, by call site (BENCHMARKS.md "What a run grows by").
# The generator runs under heaptrack against the reference server and is killed with SIGKILL
# after KILL_AFTER_S seconds: what heaptrack_print then calls "leaked" is what was alive at that
# moment. Two runs killed at different moments, diffed with bench/grow-diff.py, give the growth
# per second of run by call site. Kill off the minute (90 and 270, say): once a minute the run's
# histograms (~1 MB) are in flight to the journal and would show as growth.
# Server on CPU 0, generator on CPU 1. Extra arguments go to `tailscope run`; SERVERPID in them
# is replaced by the server's pid (`--pid SERVERPID` profiles it).
# Usage: bench/grow-heap.sh BINARY OUTDIR KILL_AFTER_S [run args...]
#   then: heaptrack_print -f OUTDIR/heap.zst -l 1 -F OUTDIR/leaked.stacks --flamegraph-cost-type leaked
set -uo pipefail
bin=$(readlink -f "$1"); out=$2; after=$3; shift 3
mkdir -p "$out"; cd "$out"
taskset -c 0 "$bin" serve --addr 127.0.0.1:0 --threads 1 >serve.out 2>&1 &
spid=$!
for _ in $(seq 100); do grep -qoE '127\.0\.0\.1:[0-9]+' serve.out && break; sleep 0.1; done
port=$(grep -oE '127\.0\.0\.1:[0-9]+' serve.out | head -1 | cut -d: -f2)
extra=("$@"); extra=("${extra[@]//SERVERPID/$spid}")
taskset -c 1 heaptrack -o "$out/heap" "$bin" run "http://127.0.0.1:$port/plaintext" --no-tui --threads 1 -c 32 -q 2000 -z 30m --json run.json "${extra[@]}" >run.out 2>&1 &
ht=$!
sleep 2; gpid=$(pgrep -f "run http://127.0.0.1:$port/plaintext" | while read p; do [ "$(cat /proc/$p/comm)" != heaptrack ] && echo $p; done | tail -1)
echo "gen $gpid" > pids
sleep "$after"
awk '/VmRSS/{print "rss_kb", $2}' /proc/$gpid/status >> pids
kill -9 "$gpid"; wait $ht
kill $spid; wait $spid 2>/dev/null
echo done > finished
