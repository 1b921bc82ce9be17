#!/bin/bash
# Issue 32's probe beside a close storm, as tests/c100k/close_storm.rs runs it: `serve
# --threads 1` on CPU 0; on CPU 1 a probe (`-c 4 -q 200 -z 10s --pid SERVER`, open loop) while
# a second generator opens 19,000 connections and holds them idle beside a light load (`-c 1
# -q 50`, 3 s warm-up + 2 s), then exits, closing them all. Prints the probe's p99.9, max,
# requests per second and named causes, and the load average.
#
# MODE `load` runs the storm as sessions 12-15 did (`-c 19000 -z 3s`: 19,000 closed-loop
# connections each sending as fast as answered): a saturating load on one server thread, not
# the issue's storm. Its probe figure depends on where the 19,000 requests queue (in the
# server or in the generator), so on the generator's speed as well as the server's
# (BENCHMARKS.md, issue 32, session 16).
# usage: bench/close-storm-probe.sh BIN [storm-conns] [rounds] [idle|load]
BIN=$1; C=${2:-19000}; ROUNDS=${3:-1}; MODE=${4:-idle}
ulimit -n "$(ulimit -Hn)"
for r in $(seq "$ROUNDS"); do
  uptime
  taskset -c 0 "$BIN" serve --addr 127.0.0.1:0 --threads 1 --max-conns 40000 > /tmp/storm.serve 2>&1 &
  SP=$!
  for i in $(seq 100); do grep -q listening /tmp/storm.serve && break; sleep 0.05; done
  ADDR=$(sed -n 's/.*http:\/\///p' /tmp/storm.serve)
  taskset -c 1 "$BIN" run "http://$ADDR/plaintext" --pid $SP -c 4 -q 200 -z 10s --json /tmp/storm.probe.json > /tmp/storm.probe.out 2>&1 &
  PP=$!
  sleep 1
  if [ "$MODE" = load ]; then
    taskset -c 1 "$BIN" run "http://$ADDR/" -c "$C" -z 3s --json /tmp/storm.storm.json > /tmp/storm.storm.out 2>&1
  else
    taskset -c 1 "$BIN" run "http://$ADDR/" -c 1 -q 50 --warmup 3s -z 2s --idle-conns "$C" \
      --source-addrs auto --connect-rate 20000/s --connect-timeout 20s \
      --json /tmp/storm.storm.json > /tmp/storm.storm.out 2>&1
  fi
  wait $PP
  kill -INT $SP; wait $SP
  python3 - <<'PY'
import json
p=json.load(open('/tmp/storm.probe.json')); s=json.load(open('/tmp/storm.storm.json'))
l=p['latency_us']
causes=[(d.get('cause'), (d.get('inside') or '')[:90]) for d in p.get('diagnosis',[])]
idle=(s.get('connections') or {}).get('idle') or {}
opened=idle.get('opened') if isinstance(idle, dict) and idle.get('opened') else s['summary'].get('connections_opened')
print("probe p99.9 %.1f ms max %.1f ms p99 %.1f ms; probe requests a second %s; storm opened %s; causes %s" % (l['p999']/1e3, l['max']/1e3, l['p99']/1e3, [t['requests'] for t in p['timeseries']], opened, causes))
PY
  uptime
done
