#!/usr/bin/env bash
# One generator process vs the same load split in 3 segments (each in its own network
# namespace, merged with `tailscope merge`), against the reference server in a namespace of its
# own, veth pairs between them (issue 14). Open loop, so both ask for the same rate; the figures
# compare the throughput and the percentiles the two ways measure. Alternated for ROUNDS rounds.
#   bash bench/segments.sh [RATE] [DURATION] [ROUNDS]      (root; iproute2)
set -euo pipefail
rate=${1:-6000}; dur=${2:-10s}; rounds=${3:-3}
bin=${TAILSCOPE:-target/release/tailscope}
tag=tsb$$
work=$(mktemp -d)
cleanup() {
  [ -n "${srv_pid:-}" ] && kill "$srv_pid" 2>/dev/null || true
  for n in srv g1 g2 g3; do ip netns del "$tag-$n" 2>/dev/null || true; done
  rm -rf "$work"
}
trap cleanup EXIT
ip netns add "$tag-srv"; ip -n "$tag-srv" link set lo up
ip -n "$tag-srv" addr add 10.77.0.1/32 dev lo
for i in 1 2 3; do
  ip netns add "$tag-g$i"; ip -n "$tag-g$i" link set lo up
  ip link add gen netns "$tag-g$i" type veth peer name "to-g$i" netns "$tag-srv"
  ip -n "$tag-srv" addr add "10.77.$i.1/30" dev "to-g$i"; ip -n "$tag-srv" link set "to-g$i" up
  ip -n "$tag-g$i" addr add "10.77.$i.2/30" dev gen; ip -n "$tag-g$i" link set gen up
  ip -n "$tag-g$i" route add default via "10.77.$i.1"
done
# The server on CPU 0 with one thread; the generators share CPU 1 (2-core machine).
ip netns exec "$tag-srv" "$bin" serve --addr 10.77.0.1:8080 --threads 1 --cpus 0 >"$work/serve.log" 2>&1 &
srv_pid=$!
sleep 1
url=http://10.77.0.1:8080/plaintext
load=(-c 30 -q "$rate" -z "$dur" --cpus 1 --no-tui)
row() { python3 - "$@" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
p = r["latency_us"]
cells = [sys.argv[2], sys.argv[3], "%.0f" % r["summary"]["rps"], p["p50"], p["p99"], p["p999"], p["max"]]
print("| " + " | ".join(str(c) for c in cells) + " |")
PY
}
echo "| round | how | req/s | p50 µs | p99 µs | p99.9 µs | max µs |"
echo "|---|---|---|---|---|---|---|"
for round in $(seq "$rounds"); do
  # As many generator threads on CPU 1 as the 3 segments have (one each), so that both ways
  # share the CPU among as many threads.
  ip netns exec "$tag-g1" "$bin" run "$url" "${load[@]}" --threads 3 --json "$work/one.json" >/dev/null 2>&1
  row "$work/one.json" "$round" "1 process"
  at=$(( $(date +%s) + 2 ))
  for i in 1 2 3; do
    ip netns exec "$tag-g$i" "$bin" run "$url" "${load[@]}" --threads 1 --segment "$i/3" --start-at "$at" \
      --json "$work/s$i.json" >/dev/null 2>&1 &
  done
  wait $(jobs -p | grep -v "^$srv_pid$")
  "$bin" merge "$work"/s[123].json --json "$work/merged.json" >/dev/null
  row "$work/merged.json" "$round" "3 segments merged"
done
