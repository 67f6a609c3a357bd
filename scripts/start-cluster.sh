#!/usr/bin/env bash
# scripts/start-cluster.sh — Flink's start-cluster.sh: a JobManager on this
# host and one TaskManager per line of $SLUICE_CONF_DIR/workers (default
# "localhost"); a worker that is not this host is started over ssh with the
# same paths.  Logs and pid files go to $SLUICE_LOG_DIR (default log/).
set -euo pipefail
source "$(dirname "$0")/cluster-common.sh"
start_daemon jobmanager jobmanager
workers=("localhost")
[ -f "$conf/workers" ] && mapfile -t workers < <(grep -v '^\s*\(#\|$\)' "$conf/workers")
n=0
for w in "${workers[@]}"; do
  n=$((n + 1))
  if [ "$w" = localhost ] || [ "$w" = 127.0.0.1 ] || [ "$w" = "$(hostname)" ]; then
    start_daemon "taskmanager-tm-$n" taskmanager --id "tm-$n"
  else
    ssh "$w" "SLUICE_CONF_DIR='$conf' SLUICE_LOG_DIR='$logs' SLUICE_BIN='$bin' '$root/scripts/taskmanager.sh' start tm-$n"
  fi
done
