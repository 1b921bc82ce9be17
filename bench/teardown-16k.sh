#!/bin/bash
# The generator's teardown at many connections (issue 32): `run -c 16000 --threads 1 -z 3s`
# against the reference server (server on CPU 0, generator on CPU 1); prints the wall time
# past run + grace and the generator's loop lag per second.
# usage: bench/teardown-16k.sh BIN [conns]
BIN=$1; C=${2:-16000}
taskset -c 0 $BIN serve --addr 127.0.0.1:0 --threads 1 --max-conns 40000 > /tmp/wall16k.serve 2>&1 &
SP=$!
for i in $(seq 100); do grep -q listening /tmp/wall16k.serve && break; sleep 0.05; done
ADDR=$(sed -n 's/.*http:\/\///p' /tmp/wall16k.serve)
s=$(date +%s.%N)
taskset -c 1 $BIN run http://$ADDR/ -c $C --threads 1 -z 3s --json /tmp/wall16k.json > /tmp/wall16k.out 2>&1
rc=$?
e=$(date +%s.%N)
kill -INT $SP; wait $SP
python3 - "$s" "$e" <<'PY'
import json,sys
s,e=float(sys.argv[1]),float(sys.argv[2])
r=json.load(open('/tmp/wall16k.json'))
su=r['summary']
lag=[p.get('generator_lag_us') for p in r['timeseries']]
print("over run+grace %.2f s; " % ((e-s) - su.get("duration_s",0) - (su.get("grace_s") or 0)), end=""); print("wall %.2f s; duration %s; grace %s; opened %s; successes %s; errors %s; lag_us per s %s" % (e-s, su.get('duration_s'), su.get("grace_s"), su.get('connections_opened'), su.get('successes'), su.get('errors'), lag))
PY
echo rc $rc
