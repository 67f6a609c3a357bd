#!/usr/bin/env bash
# scripts/stop-cluster.sh — stops what start-cluster.sh started (TaskManagers
# first, then the JobManager); remote workers over ssh.
set -euo pipefail
source "$(dirname "$0")/cluster-common.sh"
workers=("localhost")
[ -f "$conf/workers" ] && mapfile -t workers < <(grep -v '^\s*\(#\|$\)' "$conf/workers")
n=0
for w in "${workers[@]}"; do
  n=$((n + 1))
  if [ "$w" = localhost ] || [ "$w" = 127.0.0.1 ] || [ "$w" = "$(hostname)" ]; then
    stop_daemon "taskmanager-tm-$n"
  else
    ssh "$w" "SLUICE_LOG_DIR='$logs' SLUICE_BIN='$bin' '$root/scripts/taskmanager.sh' stop tm-$n" || true
  fi
done
stop_daemon jobmanager
