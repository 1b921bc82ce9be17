#!/bin/bash
# Before/after in one sitting (issue 32's no-regression check): the generator's p1 and p16
# req/s and CPU per request (io_uring engine, 1 thread, 64 connections, against the reference
# server of the same build), and that server's CPU µs per request at p16; builds alternated
# every round. Server on CPU 0, generator on CPU 1.
# usage: bench/no-regression.sh ROUNDS NAME=BIN ...
ROUNDS=$1; shift
for r in $(seq "$ROUNDS"); do
  for spec in "$@"; do
    name=${spec%%=*}; bin=${spec#*=}
    for depth in 1 16; do
      taskset -c 0 "$bin" serve --addr 127.0.0.1:0 --threads 1 > /tmp/noreg.serve 2>&1 &
      sp=$!
      for i in $(seq 100); do grep -q listening /tmp/noreg.serve && break; sleep 0.05; done
      addr=$(sed -n 's/.*http:\/\///p' /tmp/noreg.serve)
      taskset -c 1 "$bin" run "http://$addr/" -c 64 --threads 1 --engine uring --pipeline $depth -z 4s \
        --pid $sp --json /tmp/noreg.json > /dev/null 2>&1
      kill -INT $sp; wait $sp
      python3 - "$name" "$depth" "$r" <<'PY'
import json, sys
r = json.load(open('/tmp/noreg.json')); p = r['profile']
print(json.dumps({"build": sys.argv[1], "depth": int(sys.argv[2]), "round": int(sys.argv[3]),
                  "rps": round(r['summary']['rps']),
                  "gen_us_per_req": p['generator'].get('cpu_us_per_request'),
                  "server_us_per_req": p['target'].get('service_demand_us')}))
PY
    done
  done
done
uptime
