#!/usr/bin/env bash
# scripts/kafka.sh — a throwaway Apache Kafka broker (KRaft, one node) for
# tests and demos, from Apache Kafka's artifacts on Maven Central
# (scripts/kafka/pom.xml pins the version), run with the installed OpenJDK.
#
#   scripts/kafka.sh start                 fresh data directory, free loopback
#                                          ports; waits until the broker serves;
#                                          prints the bootstrap address
#   scripts/kafka.sh stop                  stops it and removes its data
#   scripts/kafka.sh status                "running <address>" (exit 0) or
#                                          "stopped" (exit 1)
#   scripts/kafka.sh bootstrap             prints the bootstrap address
#   scripts/kafka.sh topic NAME PARTITIONS [key=value ...]
#                                          creates a topic (topic configs after)
#   scripts/kafka.sh fetch                 only resolves the broker's jars
#
# Environment:
#   SLUICE_KAFKA_DIR             the instance's directory (data, config, log,
#                                pid); default ${TMPDIR:-/tmp}/sluice-kafka
#   SLUICE_KAFKA_BOOTSTRAP_FILE  where `start` writes the bootstrap address
#                                (default $SLUICE_KAFKA_DIR/bootstrap)
#   SLUICE_KAFKA_HEAP            JVM heap (default 512m)
#   SLUICE_KAFKA_START_TIMEOUT   seconds to wait for the broker (default 120)
#
# Broker settings that matter to sluice's exactly-once Kafka sink are set
# explicitly below: transaction.max.timeout.ms (15 min), replication factor 1
# and min ISR 1 for the transaction state log and the offsets topic, and a
# short interval for aborting timed-out transactions; no time-based retention.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
pom="$here/kafka/pom.xml"
dir=${SLUICE_KAFKA_DIR:-${TMPDIR:-/tmp}/sluice-kafka}
bootstrap_file=${SLUICE_KAFKA_BOOTSTRAP_FILE:-$dir/bootstrap}
heap=${SLUICE_KAFKA_HEAP:-512m}
start_timeout=${SLUICE_KAFKA_START_TIMEOUT:-120}
TXN_MAX_TIMEOUT_MS=900000

die() { echo "kafka.sh: $*" >&2; exit 1; }

kafka_version() { sed -n 's:.*<kafka.version>\(.*\)</kafka.version>.*:\1:p' "$pom"; }

# shared with the other service scripts: maven_classpath, java_bin,
# free_port, running_pid
. "$here/java-service.sh"

# Resolves the server's class path with Maven (cached per version).
classpath() {
    local ver
    ver=$(kafka_version)
    [ -n "$ver" ] || die "no <kafka.version> in $pom"
    maven_classpath kafka "$ver" "Apache Kafka"
}

port_answers() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

write_config() { # port controller-port
    cat > "$dir/server.properties" <<EOF
process.roles=broker,controller
node.id=1
controller.quorum.voters=1@127.0.0.1:$2
listeners=PLAINTEXT://127.0.0.1:$1,CONTROLLER://127.0.0.1:$2
advertised.listeners=PLAINTEXT://127.0.0.1:$1
controller.listener.names=CONTROLLER
inter.broker.listener.name=PLAINTEXT
listener.security.protocol.map=PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT
log.dirs=$dir/data
num.partitions=1
default.replication.factor=1
auto.create.topics.enable=false
num.network.threads=2
num.io.threads=4
background.threads=4
offsets.topic.replication.factor=1
offsets.topic.num.partitions=4
transaction.state.log.replication.factor=1
transaction.state.log.min.isr=1
transaction.state.log.num.partitions=4
transaction.max.timeout.ms=$TXN_MAX_TIMEOUT_MS
transaction.abort.timed.out.transaction.cleanup.interval.ms=1000
transaction.remove.expired.transaction.cleanup.interval.ms=60000
group.initial.rebalance.delay.ms=0
log.segment.bytes=67108864
log.cleaner.dedupe.buffer.size=16777216
# never delete by age: tests write records with event-time timestamps far in
# the past, which time-based retention would delete within a minute
log.retention.ms=-1
log.retention.check.interval.ms=60000
delete.topic.enable=true
EOF
}

stop_broker() {
    local pid
    if pid=$(running_pid); then
        kill "$pid" 2>/dev/null || true
        for _ in $(seq 1 150); do kill -0 "$pid" 2>/dev/null || break; sleep 0.2; done
        if kill -0 "$pid" 2>/dev/null; then
            echo "kafka.sh: broker $pid did not stop in 30 s; killing it" >&2
            kill -9 "$pid" 2>/dev/null || true
            sleep 0.5
        fi
    fi
    rm -f "$dir/pid"
}

# One attempt to start on fresh ports; 0 when the broker serves.
try_start() {
    local cp port cport id pid deadline
    cp=$1
    port=$(free_port)
    cport=$(free_port)
    [ "$port" != "$cport" ] || cport=$(free_port)
    rm -rf "$dir/data"
    mkdir -p "$dir/data"
    write_config "$port" "$cport"
    # (an id that starts with '-' would be taken for an option, as Kafka's own Uuid.randomUuid avoids)
    id=$(python3 -c 'import base64, uuid; print(next(s for s in iter(lambda: base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("="), None) if s[0] != "-"))')
    if ! "$(java_bin)" -Xmx256m -cp "$cp" -Dlog4j.configuration="file:$here/kafka/log4j.properties" \
            kafka.tools.StorageTool format -t "$id" -c "$dir/server.properties" >"$dir/format.log" 2>&1; then
        cat "$dir/format.log" >&2
        die "cannot format the KRaft storage in $dir/data"
    fi
    : > "$dir/broker.log"
    # setsid: the broker outlives this script (and a ctest fixture) until `stop`.
    setsid "$(java_bin)" -Xms128m -Xmx"$heap" -XX:+UseG1GC -XX:MaxGCPauseMillis=20 -Djava.awt.headless=true \
        -Dlog4j.configuration="file:$here/kafka/log4j.properties" -Dkafka.logs.dir="$dir" \
        -cp "$cp" kafka.Kafka "$dir/server.properties" >>"$dir/broker.log" 2>&1 < /dev/null &
    pid=$!
    echo "$pid" > "$dir/pid"
    deadline=$((SECONDS + start_timeout))
    while [ $SECONDS -lt $deadline ]; do
        if ! kill -0 "$pid" 2>/dev/null; then
            echo "kafka.sh: the broker exited during startup; last lines of $dir/broker.log:" >&2
            tail -n 20 "$dir/broker.log" >&2
            rm -f "$dir/pid"
            return 1
        fi
        if port_answers "$port" && grep -q "Kafka Server started" "$dir/broker.log"; then
            echo "127.0.0.1:$port" > "$dir/bootstrap.tmp"
            mv "$dir/bootstrap.tmp" "$dir/bootstrap"
            if [ "$bootstrap_file" != "$dir/bootstrap" ]; then
                mkdir -p "$(dirname "$bootstrap_file")"
                echo "127.0.0.1:$port" > "$bootstrap_file"
            fi
            return 0
        fi
        sleep 0.2
    done
    echo "kafka.sh: the broker did not serve on 127.0.0.1:$port within ${start_timeout} s; last lines of $dir/broker.log:" >&2
    tail -n 20 "$dir/broker.log" >&2
    stop_broker
    return 1
}

cmd_start() {
    mkdir -p "$dir"
    stop_broker # a broker left over in this directory: a fresh one replaces it
    local cp
    cp=$(classpath)
    for attempt in 1 2 3; do
        if try_start "$cp"; then
            echo "kafka.sh: Apache Kafka $(kafka_version) (KRaft) serving on $(cat "$dir/bootstrap") (pid $(cat "$dir/pid"), dir $dir)" >&2
            cat "$dir/bootstrap"
            return 0
        fi
        echo "kafka.sh: start attempt $attempt failed; retrying on other ports" >&2
    done
    die "could not start the broker after 3 attempts (log: $dir/broker.log)"
}

cmd_stop() {
    stop_broker
    rm -rf "$dir/data" "$dir/bootstrap"
    [ "$bootstrap_file" = "$dir/bootstrap" ] || rm -f "$bootstrap_file"
}

cmd_status() {
    local pid
    if pid=$(running_pid) && [ -f "$dir/bootstrap" ]; then
        echo "running $(cat "$dir/bootstrap") (pid $pid)"
    else
        echo "stopped"
        return 1
    fi
}

cmd_bootstrap() {
    running_pid >/dev/null && [ -f "$dir/bootstrap" ] || die "no broker running in $dir (scripts/kafka.sh start)"
    cat "$dir/bootstrap"
}

cmd_topic() {
    [ $# -ge 2 ] || die "usage: kafka.sh topic NAME PARTITIONS [key=value ...]"
    local name=$1 parts=$2 addr cp
    shift 2
    [[ "$parts" =~ ^[1-9][0-9]*$ ]] || die "topic $name: PARTITIONS must be a positive number, got '$parts'"
    addr=$(cmd_bootstrap)
    cp=$(classpath)
    local cfg=()
    for kv in "$@"; do cfg+=(--config "$kv"); done
    "$(java_bin)" -Xmx256m -cp "$cp" -Dlog4j.configuration="file:$here/kafka/log4j.properties" \
        org.apache.kafka.tools.TopicCommand --bootstrap-server "$addr" --create --if-not-exists \
        --topic "$name" --partitions "$parts" --replication-factor 1 "${cfg[@]}" ||
        die "cannot create topic $name on $addr"
}

case "${1:-}" in
    start) cmd_start ;;
    stop) cmd_stop ;;
    status) cmd_status ;;
    bootstrap) cmd_bootstrap ;;
    topic) shift; cmd_topic "$@" ;;
    fetch) classpath >/dev/null; echo "Apache Kafka $(kafka_version) resolved" ;;
    *) die "usage: kafka.sh start|stop|status|bootstrap|topic NAME PARTITIONS [key=value ...]|fetch" ;;
esac
