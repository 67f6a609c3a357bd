#!/usr/bin/env bash
# scripts/zookeeper.sh — a throwaway Apache ZooKeeper server (standalone, one
# node) for tests and demos of JobManager high availability, from ZooKeeper's
# artifacts on Maven Central (scripts/zookeeper/pom.xml pins the version), run
# with the installed OpenJDK on 127.0.0.1 and a free port.
#
#   scripts/zookeeper.sh start     fresh data directory, free loopback port;
#                                  waits until the server serves (`srvr`);
#                                  prints the quorum address (127.0.0.1:PORT)
#   scripts/zookeeper.sh restart   stops the server and starts it again on the
#                                  same port and data directory (sessions and
#                                  znodes survive, as across a real restart)
#   scripts/zookeeper.sh stop      stops it and removes its data
#   scripts/zookeeper.sh status    "running <address>" (exit 0) or "stopped" (exit 1)
#   scripts/zookeeper.sh quorum    prints the quorum address
#   scripts/zookeeper.sh fetch     only resolves the server's jars
#
# Environment:
#   SLUICE_ZK_DIR            the instance's directory (data, config, log, pid);
#                            default ${TMPDIR:-/tmp}/sluice-zookeeper
#   SLUICE_ZK_QUORUM_FILE    where `start` writes the quorum address
#                            (default $SLUICE_ZK_DIR/quorum)
#   SLUICE_ZK_START_TIMEOUT  seconds to wait for the server (default 120)
#
# tickTime is 500 ms, so a client may ask for a session timeout between
# 1 s and 10 s (ZooKeeper's 2..20 ticks): the HA tests use short sessions.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
pom="$here/zookeeper/pom.xml"
dir=${SLUICE_ZK_DIR:-${TMPDIR:-/tmp}/sluice-zookeeper}
quorum_file=${SLUICE_ZK_QUORUM_FILE:-$dir/quorum}
start_timeout=${SLUICE_ZK_START_TIMEOUT:-120}

die() { echo "zookeeper.sh: $*" >&2; exit 1; }

zk_version() { sed -n 's:.*<zookeeper.version>\(.*\)</zookeeper.version>.*:\1:p' "$pom"; }

# shared with the other service scripts: maven_classpath, java_bin,
# free_port, running_pid
. "$here/java-service.sh"

classpath() {
    local ver
    ver=$(zk_version)
    [ -n "$ver" ] || die "no <zookeeper.version> in $pom"
    # cached per version and per pom (the extra dependencies are part of it)
    maven_classpath "zookeeper-$(cksum < "$pom" | cut -d' ' -f1)" "$ver" "Apache ZooKeeper"
}

# True when the server at port serves requests: `srvr` names its mode then
# (`ruok` answers imok even while the server itself failed to start).
serving() {
    local port=$1 answer=""
    answer=$( (exec 3<>"/dev/tcp/127.0.0.1/$port" && printf srvr >&3 && timeout 2 cat <&3) 2>/dev/null || true)
    case "$answer" in *"Mode: standalone"*) return 0 ;; *) return 1 ;; esac
}

stop_server() {
    local pid
    if pid=$(running_pid); then
        kill "$pid" 2>/dev/null || true
        for _ in $(seq 1 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
        if kill -0 "$pid" 2>/dev/null; then
            echo "zookeeper.sh: server $pid did not stop in 10 s; killing it" >&2
            kill -9 "$pid" 2>/dev/null || true
            sleep 0.3
        fi
    fi
    rm -f "$dir/pid"
}

# Starts the server on port with the data directory as it is; 0 once it serves.
run_server() {
    local cp=$1 port=$2 pid deadline
    mkdir -p "$dir/data"
    cat > "$dir/zoo.cfg" <<CONF
tickTime=500
initLimit=10
syncLimit=5
dataDir=$dir/data
clientPort=$port
clientPortAddress=127.0.0.1
maxClientCnxns=200
admin.enableServer=false
4lw.commands.whitelist=ruok,srvr,stat
autopurge.purgeInterval=0
CONF
    : >> "$dir/zookeeper.log"
    # setsid: the server outlives this script (and a ctest fixture) until `stop`.
    setsid "$(java_bin)" -Xms32m -Xmx256m -XX:+UseSerialGC -Djava.awt.headless=true \
        -Dzookeeper.log.dir="$dir" -Dzookeeper.root.logger=INFO,CONSOLE \
        -cp "$cp" org.apache.zookeeper.server.ZooKeeperServerMain "$dir/zoo.cfg" >>"$dir/zookeeper.log" 2>&1 < /dev/null &
    pid=$!
    echo "$pid" > "$dir/pid"
    deadline=$((SECONDS + start_timeout))
    while [ $SECONDS -lt $deadline ]; do
        if ! kill -0 "$pid" 2>/dev/null; then
            echo "zookeeper.sh: the server exited during startup; last lines of $dir/zookeeper.log:" >&2
            tail -n 20 "$dir/zookeeper.log" >&2
            rm -f "$dir/pid"
            return 1
        fi
        if serving "$port"; then
            echo "127.0.0.1:$port" > "$dir/quorum.tmp"
            mv "$dir/quorum.tmp" "$dir/quorum"
            if [ "$quorum_file" != "$dir/quorum" ]; then
                mkdir -p "$(dirname "$quorum_file")"
                echo "127.0.0.1:$port" > "$quorum_file"
            fi
            return 0
        fi
        sleep 0.2
    done
    echo "zookeeper.sh: the server did not serve on 127.0.0.1:$port within ${start_timeout} s; last lines of $dir/zookeeper.log:" >&2
    tail -n 20 "$dir/zookeeper.log" >&2
    stop_server
    return 1
}

cmd_start() {
    mkdir -p "$dir"
    stop_server # a server left over in this directory: a fresh one replaces it
    local cp
    cp=$(classpath)
    for attempt in 1 2 3; do
        rm -rf "$dir/data"
        : > "$dir/zookeeper.log"
        if run_server "$cp" "$(free_port)"; then
            echo "zookeeper.sh: ZooKeeper $(zk_version) serving on $(cat "$dir/quorum") (pid $(cat "$dir/pid"), dir $dir)" >&2
            cat "$dir/quorum"
            return 0
        fi
        echo "zookeeper.sh: start attempt $attempt failed; retrying on another port" >&2
    done
    die "could not start ZooKeeper after 3 attempts (log: $dir/zookeeper.log)"
}

cmd_restart() {
    [ -f "$dir/quorum" ] || die "no ZooKeeper was started in $dir (scripts/zookeeper.sh start)"
    local port cp
    port=$(sed 's/.*://' "$dir/quorum")
    stop_server
    cp=$(classpath)
    # the port was ours a moment ago; a few tries while the kernel lets it go
    for _ in 1 2 3 4 5; do
        if run_server "$cp" "$port"; then
            echo "zookeeper.sh: ZooKeeper restarted on $(cat "$dir/quorum") (pid $(cat "$dir/pid"))" >&2
            cat "$dir/quorum"
            return 0
        fi
        sleep 1
    done
    die "could not restart ZooKeeper on port $port (log: $dir/zookeeper.log)"
}

cmd_stop() {
    stop_server
    rm -rf "$dir/data" "$dir/quorum"
    [ "$quorum_file" = "$dir/quorum" ] || rm -f "$quorum_file"
}

cmd_status() {
    local pid
    if pid=$(running_pid) && [ -f "$dir/quorum" ]; then
        echo "running $(cat "$dir/quorum") (pid $pid)"
    else
        echo "stopped"
        return 1
    fi
}

cmd_quorum() {
    running_pid >/dev/null && [ -f "$dir/quorum" ] || die "no ZooKeeper running in $dir (scripts/zookeeper.sh start)"
    cat "$dir/quorum"
}

case "${1:-}" in
    start) cmd_start ;;
    restart) cmd_restart ;;
    stop) cmd_stop ;;
    status) cmd_status ;;
    quorum) cmd_quorum ;;
    fetch) classpath >/dev/null; echo "ZooKeeper $(zk_version) resolved" ;;
    *) die "usage: zookeeper.sh start|restart|stop|status|quorum|fetch" ;;
esac
