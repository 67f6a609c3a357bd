#!/usr/bin/env bash
# scripts/taskmanager.sh start|stop [ID] — one TaskManager on this host, as
# Flink's taskmanager.sh (configuration from $SLUICE_CONF_DIR/config.yaml).
set -euo pipefail
source "$(dirname "$0")/cluster-common.sh"
cmd=${1:-}; id=${2:-tm-$(hostname -s)-$$}
case $cmd in
  start) start_daemon "taskmanager-$id" taskmanager --id "$id" ;;
  stop)
    if [ $# -ge 2 ]; then stop_daemon "taskmanager-$2"
    else for f in "$logs"/taskmanager-*.pid; do [ -e "$f" ] && stop_daemon "$(basename "$f" .pid)"; done; fi ;;
  *) echo "usage: $0 start|stop [ID]" >&2; exit 2 ;;
esac
