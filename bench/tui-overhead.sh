#!/usr/bin/env bash
# Throughput with the live dashboard vs headless, alternated in one run.
#
# nginx (1 worker, bench/nginx.conf) on CPU 0; tailscope with 1 generator thread pinned to
# CPU 1 and 64 connections, SECONDS per run. The dashboard run happens in a 120x40 tmux pane
# (a real terminal); both write --json to read req/s from.
#
#   bash bench/tui-overhead.sh [SECONDS per run, default 10] [ROUNDS, default 3]
#
# Needs: nginx-light, tmux, a release build.
set -euo pipefail
cd "$(dirname "$0")/.."
secs=${1:-10}
rounds=${2:-3}
ts=$PWD/target/release/tailscope
url=http://127.0.0.1:18080/plaintext
[ -x "$ts" ] || cargo build --release
mkdir -p /tmp/ts-nginx
taskset -c 0 nginx -p /tmp/ts-nginx -c "$PWD/bench/nginx.conf" &
nginx_pid=$!
trap 'kill $nginx_pid 2>/dev/null || true; tmux kill-session -t ts-bench 2>/dev/null || true' EXIT
for _ in $(seq 50); do curl -sf -o /dev/null "$url" && break; sleep 0.1; done
args="run $url -z ${secs}s -c 64 --threads 1 --cpus 1"
rps() { python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['summary']['rps'])" "$1"; }

echo "| round | headless req/s | dashboard req/s | ratio |"
echo "|---|---|---|---|"
sum=0
headless() { "$ts" $args --no-tui --json /tmp/ts-headless.json >/dev/null 2>&1; }
dashboard() {
  rm -f /tmp/ts-tui.json
  tmux new-session -d -s ts-bench -x 120 -y 40 "$ts $args --json /tmp/ts-tui.json"
  while tmux has-session -t ts-bench 2>/dev/null; do sleep 0.2; done
}
for r in $(seq "$rounds"); do
  # Alternate which goes first, so drift within a round does not favour one side.
  if [ $((r % 2)) = 1 ]; then headless; dashboard; else dashboard; headless; fi
  h=$(rps /tmp/ts-headless.json); t=$(rps /tmp/ts-tui.json)
  ratio=$(python3 -c "print(f'{$t / $h:.3f}')")
  sum=$(python3 -c "print($sum + $ratio)")
  printf '| %s | %.0f | %.0f | %s |\n' "$r" "$h" "$t" "$ratio"
done
echo
python3 -c "print(f'mean ratio dashboard / headless: {$sum / $rounds:.3f}')"
