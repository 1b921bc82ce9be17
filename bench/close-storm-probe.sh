#!/bin/bash
# Issue 32's probe beside a close storm: `serve --threads 1` on CPU 0; on CPU 1 a probe
# (`-c 4 -q 200 -z 8s --pid SERVER`, open loop) while a second generator runs `-c 19000 -z 3s`
# and exits, closing its connections. Prints the probe's p99.9, max and named causes.
# usage: bench/close-storm-probe.sh BIN [storm-conns] [rounds]
BIN=$1; C=${2:-19000}; ROUNDS=${3:-1}
ulimit -n "$(ulimit -Hn)"
for r in $(seq "$ROUNDS"); do
  taskset -c 0 "$BIN" serve --addr 127.0.0.1:0 --threads 1 --max-conns 40000 > /tmp/storm.serve 2>&1 &
  SP=$!
  for i in $(seq 100); do grep -q listening /tmp/storm.serve && break; sleep 0.05; done
  ADDR=$(sed -n 's/.*http:\/\///p' /tmp/storm.serve)
  taskset -c 1 "$BIN" run "http://$ADDR/plaintext" --pid $SP -c 4 -q 200 -z 8s --json /tmp/storm.probe.json > /tmp/storm.probe.out 2>&1 &
  PP=$!
  sleep 1
  taskset -c 1 "$BIN" run "http://$ADDR/" -c "$C" -z 3s --json /tmp/storm.storm.json > /tmp/storm.storm.out 2>&1
  wait $PP
  kill -INT $SP; wait $SP
  python3 - <<'PY'
import json
p=json.load(open('/tmp/storm.probe.json')); s=json.load(open('/tmp/storm.storm.json'))
l=p['latency_us']
causes=[(d.get('cause'), (d.get('inside') or '')[:90]) for d in p.get('diagnosis',[])]
print("probe p99.9 %.1f ms max %.1f ms p99 %.1f ms; storm opened %s; causes %s" % (l['p999']/1e3, l['max']/1e3, l['p99']/1e3, s['summary'].get('connections_opened'), causes))
PY
done
uptime
