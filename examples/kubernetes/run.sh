#!/bin/sh
# Runs the generators, waits for them, merges their reports, and copies the merged report here.
#   examples/kubernetes/run.sh [SECONDS_AHEAD]
# SECONDS_AHEAD (default 90): how far ahead the common start is, long enough for every pod to
# be scheduled and its image pulled. A pod that starts later than that starts at once and
# says so; `tailscope merge` warns when the generators started more than 1 s apart.
# Exits with the merge's own status: 0, 99 when a --fail-if does not hold, 2 when the
# reports cannot be merged.
set -eu
cd "$(dirname "$0")"
ahead=${1:-90}
start_at=$(date -u -d "+${ahead} seconds" +%Y-%m-%dT%H:%M:%SZ)

# Waits until job $1 has completed or failed, at most $2 seconds (`kubectl wait` takes one
# condition, and a Job that failed never becomes complete: it would wait the whole timeout).
wait_job() {
  end=$(($(date +%s) + $2))
  while [ "$(date +%s)" -lt "$end" ]; do
    state=$(kubectl get job "$1" -o jsonpath='{range .status.conditions[?(@.status=="True")]}{.type} {end}')
    case "$state" in *Complete* | *Failed*) return 0 ;; esac
    sleep 5
  done
  echo "job/$1 did not finish within $2 s" >&2
  return 1
}

kubectl delete job tailscope-load tailscope-merge --ignore-not-found
sed "s/2026-01-01T12:00:00Z/${start_at}/" generators.yaml | kubectl apply -f -
# Each generator runs -z (60 s) after the start; allow for scheduling. A generator that
# failed is named as a missing segment by the merge, so go on either way.
wait_job tailscope-load "$((ahead + 300))" || true
sed "s/2026-01-01T12:00:00Z/${start_at}/" merge-job.yaml | kubectl apply -f -
wait_job tailscope-merge 120
kubectl logs job/tailscope-merge
# The merge container's exit status (the Job itself only says Failed).
status=$(kubectl get pods -l job-name=tailscope-merge \
  -o jsonpath='{.items[0].status.containerStatuses[0].state.terminated.exitCode}')
exit "${status:-1}"
