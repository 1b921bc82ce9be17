#!/usr/bin/env bash
# N plain hosts as N tailscope generators over ssh: each takes its segment of the load, all
# start at one wall-clock time (their clocks kept by NTP/chrony), and the reports are copied
# back here and merged.
#   URL=http://10.0.0.5:8080/ examples/ssh/run-segments.sh gen1 gen2 gen3
# tailscope must be on each host's PATH (`cargo install --path .`, or the binary out of the
# Dockerfile's image). pdsh runs one identical command on every host, and each host needs its
# own --segment, so this loops over ssh instead (the same with `pdsh -R exec -w HOST ssh %h`).
# Settings (environment): LOAD (default '-c 300 -q 30000': the whole load, split N ways),
# DURATION (60s), AHEAD (seconds to the common start: 20), OUT (the local report directory),
# REMOTE_DIR (where each host writes its report: /tmp), FAIL_IF (the threshold the merged
# result must hold, else exit 99: 'p99 < 20ms').
set -euo pipefail
url=${URL:?set URL to the server to load}
hosts=("$@")
n=${#hosts[@]}
[ "$n" -gt 0 ] || { echo "usage: URL=... $0 HOST..." >&2; exit 2; }
start_at=$(date -u -d "+${AHEAD:-20} seconds" +%Y-%m-%dT%H:%M:%SZ)
out=${OUT:-reports-$(date -u +%Y%m%dT%H%M%SZ)}
remote=${REMOTE_DIR:-/tmp}
mkdir -p "$out"
for i in "${!hosts[@]}"; do
  report="$remote/tailscope-segment-$((i + 1)).json"
  # LOAD is split into its words on purpose; every word is then quoted for the remote shell
  # (ssh joins its arguments into one command line, so a URL with '&' or '?' would break).
  # shellcheck disable=SC2206
  cmd=(tailscope run "$url" ${LOAD:--c 300 -q 30000} -z "${DURATION:-60s}" --no-tui
    --segment "$((i + 1))/$n" --start-at "$start_at" --json "$report")
  # The last run's report goes first: a host that fails now must be a missing segment, not
  # an old report that the merge refuses for not overlapping the others.
  ssh "${hosts[$i]}" "rm -f $(printf '%q' "$report") && $(printf '%q ' "${cmd[@]}")" \
    >"$out/$((i + 1)).log" 2>&1 &
done
wait || true   # a failed host is named as a missing segment by merge
for i in "${!hosts[@]}"; do
  scp -q "${hosts[$i]}:$remote/tailscope-segment-$((i + 1)).json" "$out/$((i + 1)).json" || echo "no report from ${hosts[$i]}" >&2
done
tailscope merge "$out"/[0-9]*.json --json "$out/merged.json" --fail-if "${FAIL_IF:-p99 < 20ms}"
