# scripts/cluster-common.sh — what start-cluster.sh, stop-cluster.sh and
# taskmanager.sh share (sourced): where the configuration, the logs and the
# pid files are, and the `sluice` binary.
#   SLUICE_CONF_DIR  directory with config.yaml and workers (default: conf/)
#   SLUICE_LOG_DIR   logs and pid files (default: log/)
#   SLUICE_BIN       the sluice command (default: build/sluice)
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
conf=${SLUICE_CONF_DIR:-$root/conf}
logs=${SLUICE_LOG_DIR:-$root/log}
bin=${SLUICE_BIN:-$root/build/sluice}
mkdir -p "$logs"
conf_args=()
[ -f "$conf/config.yaml" ] && conf_args=(--config "$conf/config.yaml")
[ -x "$bin" ] || { echo "$0: $bin not found (build first: scripts/build.sh)" >&2; exit 1; }

start_daemon() { # name args...
  local name=$1; shift
  "$bin" "$@" "${conf_args[@]}" >>"$logs/$name.log" 2>&1 &
  echo $! >"$logs/$name.pid"
  echo "started $name (pid $!), log $logs/$name.log"
}

stop_daemon() { # name
  local pidf="$logs/$1.pid"
  [ -f "$pidf" ] || return 0
  local pid; pid=$(cat "$pidf")
  if kill "$pid" 2>/dev/null; then
    for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    kill -9 "$pid" 2>/dev/null || true
    echo "stopped $1 (pid $pid)"
  fi
  rm -f "$pidf"
}
