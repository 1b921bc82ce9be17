#!/usr/bin/env bash
# The generator of two builds, alternated run by run (io_uring and tokio engines, pipelining
# depth 1 and 16), against one reference server on CPU 0, each generator on CPU 1 with one
# thread and 64 connections. Prints "round depth engine build req/s cpu_us_per_request" lines.
#   bench/generator-before-after.sh BEFORE_BINARY AFTER_BINARY [SECONDS per run] [ROUNDS]
# The AFTER build's journal is turned off (--no-journal), which builds before it lacked.
set -u
before=$(readlink -f "$1"); after=$(readlink -f "$2"); secs=${3:-5}; rounds=${4:-3}
taskset -c 0 "$after" serve --addr 127.0.0.1:18093 --threads 1 --cpus 0 >/dev/null 2>&1 &
srv=$!; sleep 1
url=http://127.0.0.1:18093/plaintext
timef=$(mktemp)
for r in $(seq "$rounds"); do
  for depth in 1 16; do for engine in uring tokio; do for b in before after; do
    bin=$before; extra=""
    [ "$b" = after ] && bin=$after && extra=--no-journal
    json=$(/usr/bin/time -o "$timef" -f "%U %S" taskset -c 1 "$bin" run "$url" --engine "$engine" \
      --threads 1 -c 64 --pipeline "$depth" -z "${secs}s" $extra --json - 2>/dev/null)
    echo "$json" | python3 -c '
import json, sys
d = json.load(sys.stdin)
u, s = map(float, open(sys.argv[1]).read().split())
n = d["summary"]["requests"]
print(*sys.argv[2:], round(d["summary"]["rps"]), round((u + s) * 1e6 / n, 3))
' "$timef" "$r" "$depth" "$engine" "$b"
  done; done; done
done
kill "$srv"; rm -f "$timef"
