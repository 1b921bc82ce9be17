#!/usr/bin/env bash
# The soak of issue 38: four runs at once, each a long --no-tui run with a journal and a JSON report,
# sampled once a minute (RSS, open fds, CPU ticks, journal bytes) into OUTDIR/samples.tsv.
#   ref-open    the reference server's /plaintext, open loop at RATE req/s
#   ref-closed  the reference server's /delay/20, closed loop with 16 connections (bounded by the
#               server's 20 ms sleep, about 800 req/s: a full-speed closed loop would take a CPU)
#   ngx-open    nginx (2 workers) /plaintext, open loop at RATE req/s
#   ngx-closed  nginx /paced, closed loop with 16 connections; nginx's limit_req (no nodelay) holds
#               each request until the zone's 1000 r/s allows it, which bounds the loop's rate.
#               (The key must not be empty, as $server_name is without a server_name: an empty key is not limited;
#               and the answer must come from a content handler: `return` runs before limit_req.)
# Servers on CPU 0, generators on CPU 1 (taskset), everything under nice -n 10 (others build here).
# Usage: bench/soak-hour.sh BINARY OUTDIR [MINUTES] [RATE]
set -euo pipefail
bin=$(readlink -f "$1"); out=$(readlink -f "$2"); minutes=${3:-60}; rate=${4:-2000}
mkdir -p "$out/nginx"; cd "$out"
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
nport=$(free_port)
cat >nginx/nginx.conf <<CONF
worker_processes 2;
daemon off;
error_log $out/nginx/error.log warn;
pid $out/nginx/nginx.pid;
events { worker_connections 4096; }
http {
    access_log off;
    keepalive_requests 1000000;
    keepalive_timeout 75s;
    client_body_temp_path $out/nginx/body;
    proxy_temp_path $out/nginx/proxy;
    fastcgi_temp_path $out/nginx/fastcgi;
    uwsgi_temp_path $out/nginx/uwsgi;
    scgi_temp_path $out/nginx/scgi;
    limit_req_zone \$host zone=paced:1m rate=1000r/s;
    server {
        listen 127.0.0.1:$nport reuseport backlog=4096;
        location = /plaintext { default_type text/plain; return 200 "Hello, World!"; }
        location = /paced { limit_req zone=paced burst=1000; limit_req_log_level info; default_type text/plain; alias $out/nginx/hello.txt; }
    }
}
CONF
printf 'Hello, World!' >nginx/hello.txt
nice -n 10 taskset -c 0 nginx -p "$out/nginx" -c "$out/nginx/nginx.conf" &
nginx_pid=$!
nice -n 10 taskset -c 0 "$bin" serve --addr 127.0.0.1:0 --threads 1 >serve.out 2>&1 &
serve_pid=$!
for _ in $(seq 100); do grep -qoE '127\.0\.0\.1:[0-9]+' serve.out && break; sleep 0.1; done
rport=$(grep -oE '127\.0\.0\.1:[0-9]+' serve.out | head -1 | cut -d: -f2)
sleep 1
dur="${minutes}m"
gen() { # name url args...
  local name=$1 url=$2; shift 2
  echo "tailscope run $url --no-tui --threads 1 -z $dur --json $name.json --journal $name.journal $*" >"$name.cmd"
  # /usr/bin/time gives the peak RSS of the whole run, the report's building at the end included
  nice -n 10 taskset -c 1 /usr/bin/time -f '%M' -o "$name.maxrss_kb" "$bin" run "$url" --no-tui --threads 1 -z "$dur" \
    --json "$name.json" --journal "$name.journal" "$@" >"$name.out" 2>&1 &
  local timer=$! child=
  for _ in $(seq 100); do child=$(pgrep -P "$timer" | head -1) && [ -n "$child" ] && break; sleep 0.05; done
  echo "$child" >"$name.pid"; echo "$timer" >"$name.timer"
}
gen ref-open "http://127.0.0.1:$rport/plaintext" -c 32 -q "$rate"
gen ref-closed "http://127.0.0.1:$rport/delay/20" -c 16
gen ngx-open "http://127.0.0.1:$nport/plaintext" -c 32 -q "$rate"
gen ngx-closed "http://127.0.0.1:$nport/paced" -c 16
names="ref-open ref-closed ngx-open ngx-closed"
sample() { # minute name pid
  local st rss fds jb=n/a
  st=$(cut -d' ' -f14,15 "/proc/$3/stat" 2>/dev/null) || return 0
  rss=$(awk '/VmRSS/{print $2}' "/proc/$3/status" 2>/dev/null) || return 0
  fds=$(ls "/proc/$3/fd" 2>/dev/null | wc -l)
  [ -f "$2.journal" ] && jb=$(stat -c %s "$2.journal")
  printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$1" "$(date -u +%T)" "$2" "$rss" "$fds" "$(echo "$st" | awk '{print $1+$2}')" "$jb"
}
printf 'minute\tutc\trun\trss_kb\tfds\tcpu_ticks\tjournal_bytes\n' >samples.tsv
start=$(date +%s)
for m in $(seq 0 "$minutes"); do
  # sample at start + m minutes (+2 s so that minute m's second has been journaled)
  now=$(date +%s); target=$((start + 60 * m + 2)); [ "$target" -gt "$now" ] && sleep $((target - now))
  alive=0
  for n in $names; do p=$(cat "$n.pid"); kill -0 "$p" 2>/dev/null && alive=1 && sample "$m" "$n" "$p" >>samples.tsv; done
  sample "$m" serve "$serve_pid" >>samples.tsv
  [ "$alive" = 1 ] || break
done
for n in $names; do wait "$(cat "$n.timer")" || true; done
kill "$serve_pid" 2>/dev/null || true
kill -QUIT "$nginx_pid" 2>/dev/null || true
for n in $names; do printf '%s peak RSS %s KiB\n' "$n" "$(cat "$n.maxrss_kb" 2>/dev/null)"; done | tee peak-rss.txt
echo "samples in $out/samples.tsv"
