#!/bin/sh
# Runs the generators, waits for them, merges their reports, and copies the merged report here.
#   examples/kubernetes/run.sh [SECONDS_AHEAD]
# SECONDS_AHEAD (default 90): how far ahead the common start is, long enough for every pod to
# be scheduled and its image pulled. A pod that starts later than that starts at once and
# says so; `tailscope merge` warns when the generators started more than 1 s apart.
set -eu
cd "$(dirname "$0")"
ahead=${1:-90}
start_at=$(date -u -d "+${ahead} seconds" +%Y-%m-%dT%H:%M:%SZ)
kubectl delete job tailscope-load tailscope-merge --ignore-not-found
sed "s/2026-01-01T12:00:00Z/${start_at}/" generators.yaml | kubectl apply -f -
# Each generator runs -z (60 s) after the start; allow for scheduling.
kubectl wait --for=condition=complete job/tailscope-load --timeout="$((ahead + 300))s" || true
kubectl apply -f merge-job.yaml
kubectl wait --for=condition=complete job/tailscope-merge --timeout=120s || status=$?
kubectl logs job/tailscope-merge
exit "${status:-0}"
