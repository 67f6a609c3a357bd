#!/usr/bin/env bash
# scripts/postgres.sh start|stop|status|conninfo|psql [ARGS...]
#
# A throwaway PostgreSQL 15 cluster for sluice's tests and demos, from
# Debian's packages (/usr/lib/postgresql/15/bin):
#
#   start     initdb into a fresh temporary directory, listen on a free
#             loopback port, max_prepared_transactions > 0, fsync on; waits
#             until the server accepts connections, creates database
#             "sluice", then prints the libpq connection string (and writes
#             it to $STATE/conninfo and, if set, to $SLUICE_PG_CONNFILE).
#             A cluster this state directory already runs is stopped first.
#   stop      stops the server and removes its data directory.
#   status    exit 0 when the server answers.
#   conninfo  prints the connection string.
#   psql ...  runs psql against the cluster (e.g. psql -c 'select 1').
#
# Environment:
#   SLUICE_PG_STATE          where the state (data dir path, port, conninfo)
#                            is kept; default /tmp/sluice-postgres
#   SLUICE_PG_MAX_PREPARED   max_prepared_transactions (default 64; 0 makes
#                            a server that exactly-once sinks must refuse)
#   SLUICE_PG_CONNFILE       also write the connection string here
#   SLUICE_PG_BIN            PostgreSQL binaries (default /usr/lib/postgresql/15/bin)
#
# initdb and the server refuse to run as root, so when run as root they run
# as the unprivileged Debian user `postgres` (runuser), which owns the data
# directory.
set -euo pipefail

BIN=${SLUICE_PG_BIN:-/usr/lib/postgresql/15/bin}
STATE=${SLUICE_PG_STATE:-/tmp/sluice-postgres}
MAXPREP=${SLUICE_PG_MAX_PREPARED:-64}
PGUSER_OS=postgres

die() { echo "postgres.sh: $*" >&2; exit 1; }

as_pg() { # runs a command as the server's OS user
  if [ "$(id -u)" -eq 0 ]; then
    runuser -u "$PGUSER_OS" -- "$@"
  else
    "$@"
  fi
}

free_port() {
  python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1]); s.close()'
}

read_state() {
  [ -f "$STATE/datadir" ] || die "no cluster in $STATE (run: scripts/postgres.sh start)"
  DATADIR=$(cat "$STATE/datadir")
  PORT=$(cat "$STATE/port" 2>/dev/null || true)
  CONNINFO=$(cat "$STATE/conninfo" 2>/dev/null || true)
}

do_stop() {
  [ -f "$STATE/datadir" ] || return 0
  read_state
  if [ -d "$DATADIR" ]; then
    if [ -f "$DATADIR/postmaster.pid" ]; then
      as_pg "$BIN/pg_ctl" -D "$DATADIR" -m fast -w -t 60 stop >/dev/null 2>&1 ||
        as_pg "$BIN/pg_ctl" -D "$DATADIR" -m immediate -w -t 30 stop >/dev/null 2>&1 || true
    fi
    case "$DATADIR" in
      */sluice-pg.*) rm -rf "$DATADIR" ;;
      *) die "refusing to remove unexpected data directory '$DATADIR'" ;;
    esac
  fi
  rm -f "$STATE/datadir" "$STATE/port" "$STATE/conninfo"
}

do_start() {
  [ -x "$BIN/initdb" ] || die "PostgreSQL 15 binaries not found in $BIN (apt-get install postgresql)"
  [[ "$MAXPREP" =~ ^[0-9]+$ ]] || die "SLUICE_PG_MAX_PREPARED must be a number, got '$MAXPREP'"
  if [ "$(id -u)" -eq 0 ] && ! id "$PGUSER_OS" >/dev/null 2>&1; then
    die "running as root needs the unprivileged user '$PGUSER_OS' (Debian's postgresql package creates it)"
  fi
  mkdir -p "$STATE"
  do_stop
  DATADIR=$(mktemp -d /tmp/sluice-pg.XXXXXX)
  chmod 700 "$DATADIR"
  [ "$(id -u)" -eq 0 ] && chown "$PGUSER_OS:" "$DATADIR"
  echo "$DATADIR" >"$STATE/datadir"
  if ! as_pg "$BIN/initdb" -D "$DATADIR" -U postgres --auth=trust --encoding=UTF8 --locale=C.UTF-8 \
      >"$STATE/initdb.log" 2>&1; then
    cat "$STATE/initdb.log" >&2
    die "initdb failed in $DATADIR (log above)"
  fi
  cat >>"$DATADIR/postgresql.conf" <<EOF
# sluice test cluster
listen_addresses = '127.0.0.1'
unix_socket_directories = '$DATADIR'
max_prepared_transactions = $MAXPREP
max_connections = 200
fsync = on
synchronous_commit = on
logging_collector = off
log_min_messages = warning
EOF
  local tries=0
  while :; do
    tries=$((tries + 1))
    PORT=$(free_port)
    if as_pg "$BIN/pg_ctl" -D "$DATADIR" -l "$DATADIR/server.log" -o "-p $PORT" -w -t 60 start >/dev/null 2>&1; then
      break
    fi
    # another process may have taken the port between the probe and the bind
    if [ $tries -lt 5 ] && grep -q "could not bind\|Address already in use" "$DATADIR/server.log" 2>/dev/null; then
      continue
    fi
    tail -n 30 "$DATADIR/server.log" >&2 2>/dev/null || true
    die "the server in $DATADIR did not start on port $PORT (log above)"
  done
  echo "$PORT" >"$STATE/port"
  # wait until it accepts connections over TCP (pg_ctl -w already did; be sure)
  local i
  for i in $(seq 1 100); do
    "$BIN/pg_isready" -q -h 127.0.0.1 -p "$PORT" -U postgres && break
    sleep 0.1
  done
  "$BIN/pg_isready" -q -h 127.0.0.1 -p "$PORT" -U postgres ||
    die "the server on 127.0.0.1:$PORT does not accept connections (log: $DATADIR/server.log)"
  "$BIN/psql" -X -q -h 127.0.0.1 -p "$PORT" -U postgres -d postgres -v ON_ERROR_STOP=1 \
    -c "CREATE DATABASE sluice" >/dev/null || die "cannot create database sluice on port $PORT"
  CONNINFO="host=127.0.0.1 port=$PORT user=postgres dbname=sluice"
  echo "$CONNINFO" >"$STATE/conninfo"
  if [ -n "${SLUICE_PG_CONNFILE:-}" ]; then
    mkdir -p "$(dirname "$SLUICE_PG_CONNFILE")"
    echo "$CONNINFO" >"$SLUICE_PG_CONNFILE"
  fi
  echo "$CONNINFO"
}

cmd=${1:-}
[ $# -gt 0 ] && shift
case "$cmd" in
  start) do_start ;;
  stop) do_stop ;;
  status)
    read_state
    [ -n "$PORT" ] && "$BIN/pg_isready" -q -h 127.0.0.1 -p "$PORT" -U postgres
    ;;
  conninfo)
    read_state
    [ -n "$CONNINFO" ] || die "the cluster in $STATE has no connection string (did start fail?)"
    echo "$CONNINFO"
    ;;
  psql)
    read_state
    exec "$BIN/psql" -X "$CONNINFO" "$@"
    ;;
  *)
    echo "usage: scripts/postgres.sh start|stop|status|conninfo|psql [ARGS...]" >&2
    exit 2
    ;;
esac
