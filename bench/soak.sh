#!/usr/bin/env bash
# A soak: one long open-loop run against the reference server (and, at a low rate, nginx),
# sampling the generator's RSS, open fds, CPU time and the journal's size once a minute.
# Usage: bench/soak.sh BINARY OUTDIR [MINUTES] [RATE]   (SOAK_REF=0 or SOAK_NGINX=0 to skip one)
#   e.g. bench/soak.sh target/release/tailscope /tmp/soak 60 3000
#   RATE `closed` loads the reference server closed loop (as fast as its 32 connections go).
# Server on CPU 0, generator on CPU 1 (taskset). Writes OUTDIR/samples.tsv:
#   minute target rss_kb fds cpu_ticks journal_bytes   (cpu_ticks = utime+stime of the generator)
# and the runs' JSON reports (requests per run come from there), so that CPU per request between
# minute 1 and minute N is (ticks_N - ticks_1) / (requests between them).
set -euo pipefail
bin=$(readlink -f "$1"); out=$2; minutes=${3:-60}; rate=${4:-3000}
mkdir -p "$out"; cd "$out"
dur="$((minutes + 2))m"
rate_flag=(-q "$rate"); [ "$rate" = closed ] && rate_flag=()
ref_pid=
if [ "${SOAK_REF:-1}" = 1 ]; then
taskset -c 0 "$bin" serve --addr 127.0.0.1:0 --threads 1 >serve.out 2>&1 &
serve_pid=$!
for _ in $(seq 50); do grep -qoE '127\.0\.0\.1:[0-9]+' serve.out && break; sleep 0.1; done
port=$(grep -oE '127\.0\.0\.1:[0-9]+' serve.out | head -1 | cut -d: -f2)
taskset -c 1 "$bin" run "http://127.0.0.1:$port/plaintext" --no-tui -c 32 "${rate_flag[@]}" -z "$dur" \
  --threads 1 --json ref.json --journal ref.journal ${SOAK_EXTRA:-} >ref.out 2>&1 &
ref_pid=$!
fi
nginx_pid=
if command -v nginx >/dev/null && [ "${SOAK_NGINX:-1}" = 1 ]; then
  "$bin" run --target nginx --server-cpus 0 --cpus 1 --no-tui -c 8 -q 200 -z "$dur" \
    --threads 1 --json nginx.json --journal nginx.journal ${SOAK_EXTRA:-} >nginx.out 2>&1 &
  nginx_pid=$!
fi
sample() { # minute name pid
  local st; st=$(cut -d' ' -f14,15 "/proc/$3/stat" 2>/dev/null) || return 0
  local rss; rss=$(awk '/VmRSS/{print $2}' "/proc/$3/status")
  local fds; fds=$(ls "/proc/$3/fd" | wc -l)
  local jb=n/a
  [ -f "$2.journal" ] && jb=$(stat -c %s "$2.journal")  # the working directory is OUTDIR
  printf '%s\t%s\t%s\t%s\t%s\t%s\n' "$1" "$2" "$rss" "$fds" "$(echo "$st" | awk '{print $1+$2}')" "$jb"
}
printf 'minute\ttarget\trss_kb\tfds\tcpu_ticks\tjournal_bytes\n' >samples.tsv
for m in $(seq 0 "$((minutes + 1))"); do
  [ -n "$ref_pid" ] && sample "$m" ref "$ref_pid" >>samples.tsv
  [ -n "$nginx_pid" ] && sample "$m" nginx "$nginx_pid" >>samples.tsv
  kill -0 "${ref_pid:-$nginx_pid}" 2>/dev/null || break
  sleep 60
done
[ -n "$ref_pid" ] && { wait "$ref_pid" || true; kill "$serve_pid" 2>/dev/null || true; }
[ -n "$nginx_pid" ] && { wait "$nginx_pid" || true; }
echo "samples in $out/samples.tsv"
