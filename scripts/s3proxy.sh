#!/usr/bin/env bash
# scripts/s3proxy.sh — a throwaway S3-compatible server for tests and demos:
# S3Proxy (org.gaul:s3proxy from Maven Central; scripts/s3proxy/pom.xml pins
# the version) on the installed OpenJDK, on 127.0.0.1 and a free port, with
# jclouds' filesystem blob store in its state directory and AWS signature
# checking ON (SigV2 or SigV4, one identity/credential).
#
#   scripts/s3proxy.sh start     fresh blob store, free loopback port; creates
#                                the bucket; waits until it serves; prints the
#                                endpoint (http://127.0.0.1:PORT)
#   scripts/s3proxy.sh stop      stops it and removes its data
#   scripts/s3proxy.sh status    "running <endpoint>" (exit 0) or "stopped" (exit 1)
#   scripts/s3proxy.sh endpoint  prints the endpoint
#   scripts/s3proxy.sh env       prints AWS_* lines for `eval` (endpoint, keys, region)
#   scripts/s3proxy.sh fetch     only resolves S3Proxy's jars
#
# Environment:
#   SLUICE_S3PROXY_DIR            the instance's directory (blobs, config, log,
#                                 pid); default ${TMPDIR:-/tmp}/sluice-s3proxy
#   SLUICE_S3_ENDPOINT_FILE       where `start` writes the endpoint
#                                 (default $SLUICE_S3PROXY_DIR/endpoint)
#   SLUICE_S3_BUCKET              the bucket `start` creates (default sluice-test)
#   SLUICE_S3_ACCESS_KEY / SLUICE_S3_SECRET_KEY
#                                 the one identity S3Proxy accepts
#                                 (default sluice-access / sluice-secret)
#   SLUICE_S3PROXY_START_TIMEOUT  seconds to wait (default 120)
#   SLUICE_S3PROXY_VHOST          a host name (e.g. localhost): virtual-host
#                                 addressing (BUCKET.HOST:PORT/key, S3Proxy's
#                                 s3proxy.virtual-host); the endpoint is then
#                                 http://HOST:PORT (curl resolves *.localhost
#                                 to loopback)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
pom="$here/s3proxy/pom.xml"
dir=${SLUICE_S3PROXY_DIR:-${TMPDIR:-/tmp}/sluice-s3proxy}
endpoint_file=${SLUICE_S3_ENDPOINT_FILE:-$dir/endpoint}
bucket=${SLUICE_S3_BUCKET:-sluice-test}
access=${SLUICE_S3_ACCESS_KEY:-sluice-access}
secret=${SLUICE_S3_SECRET_KEY:-sluice-secret}
start_timeout=${SLUICE_S3PROXY_START_TIMEOUT:-120}
vhost=${SLUICE_S3PROXY_VHOST:-}

die() { echo "s3proxy.sh: $*" >&2; exit 1; }

s3proxy_version() { sed -n 's:.*<s3proxy.version>\(.*\)</s3proxy.version>.*:\1:p' "$pom"; }

# shared with the other service scripts: maven_classpath, java_bin,
# free_port, running_pid
. "$here/java-service.sh"

# Resolves the server's class path with Maven (cached per version).
classpath() {
    local ver
    ver=$(s3proxy_version)
    [ -n "$ver" ] || die "no <s3proxy.version> in $pom"
    maven_classpath s3proxy "$ver" S3Proxy
}

stop_server() {
    local pid
    if pid=$(running_pid); then
        kill "$pid" 2>/dev/null || true
        for _ in $(seq 1 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.2; done
        if kill -0 "$pid" 2>/dev/null; then
            echo "s3proxy.sh: server $pid did not stop in 20 s; killing it" >&2
            kill -9 "$pid" 2>/dev/null || true
            sleep 0.5
        fi
    fi
    rm -f "$dir/pid"
}

# One attempt on a fresh port; 0 when the server serves and the bucket exists.
try_start() {
    local cp=$1 port pid deadline
    port=$(free_port)
    rm -rf "$dir/blobs"
    mkdir -p "$dir/blobs/$bucket" # a directory of the filesystem blob store is a bucket
    cat > "$dir/s3proxy.conf" <<CONF
s3proxy.endpoint=http://127.0.0.1:$port
s3proxy.authorization=aws-v2-or-v4
s3proxy.identity=$access
s3proxy.credential=$secret
jclouds.provider=filesystem
jclouds.filesystem.basedir=$dir/blobs
CONF
    [ -n "$vhost" ] && echo "s3proxy.virtual-host=$vhost" >> "$dir/s3proxy.conf"
    local base="http://127.0.0.1:$port" bucket_url="http://127.0.0.1:$port/$bucket"
    if [ -n "$vhost" ]; then base="http://$vhost:$port"; bucket_url="http://$bucket.$vhost:$port"; fi
    : > "$dir/s3proxy.log"
    # setsid: the server outlives this script (and a ctest fixture) until `stop`.
    setsid "$(java_bin)" -Xms64m -Xmx384m -XX:+UseSerialGC -Djava.awt.headless=true \
        -Dlogback.configurationFile="$here/s3proxy/logback.xml" \
        -cp "$cp" org.gaul.s3proxy.Main --properties "$dir/s3proxy.conf" >>"$dir/s3proxy.log" 2>&1 < /dev/null &
    pid=$!
    echo "$pid" > "$dir/pid"
    deadline=$((SECONDS + start_timeout))
    while [ $SECONDS -lt $deadline ]; do
        if ! kill -0 "$pid" 2>/dev/null; then
            echo "s3proxy.sh: the server exited during startup; last lines of $dir/s3proxy.log:" >&2
            tail -n 20 "$dir/s3proxy.log" >&2
            rm -f "$dir/pid"
            return 1
        fi
        # an unsigned upload is refused (403) once the server is up: that proves
        # it serves and that it checks signatures
        local code
        code=$(curl -s -o /dev/null -w '%{http_code}' -X PUT --data-binary probe \
            "$bucket_url/.probe" 2>/dev/null || true)
        if [ "$code" = 403 ]; then
            # a signed listing of the bucket proves the identity works and the bucket exists
            if curl -sf -o /dev/null --aws-sigv4 "aws:amz:us-east-1:s3" -u "$access:$secret" \
                    -H "x-amz-content-sha256: e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855" \
                    "$bucket_url/?list-type=2"; then
                echo "$base" > "$dir/endpoint.tmp"
                mv "$dir/endpoint.tmp" "$dir/endpoint"
                if [ "$endpoint_file" != "$dir/endpoint" ]; then
                    mkdir -p "$(dirname "$endpoint_file")"
                    echo "$base" > "$endpoint_file"
                fi
                return 0
            fi
        fi
        sleep 0.2
    done
    echo "s3proxy.sh: the server did not serve on 127.0.0.1:$port within ${start_timeout} s; last lines of $dir/s3proxy.log:" >&2
    tail -n 20 "$dir/s3proxy.log" >&2
    stop_server
    return 1
}

cmd_start() {
    command -v curl >/dev/null || die "curl not found (scripts/install-deps.sh installs curl)"
    mkdir -p "$dir"
    stop_server # a server left over in this directory: a fresh one replaces it
    local cp
    cp=$(classpath)
    for attempt in 1 2 3; do
        if try_start "$cp"; then
            echo "s3proxy.sh: S3Proxy $(s3proxy_version) serving on $(cat "$dir/endpoint"), bucket $bucket (pid $(cat "$dir/pid"), dir $dir)" >&2
            cat "$dir/endpoint"
            return 0
        fi
        echo "s3proxy.sh: start attempt $attempt failed; retrying on another port" >&2
    done
    die "could not start S3Proxy after 3 attempts (log: $dir/s3proxy.log)"
}

cmd_stop() {
    stop_server
    rm -rf "$dir/blobs" "$dir/endpoint"
    [ "$endpoint_file" = "$dir/endpoint" ] || rm -f "$endpoint_file"
}

cmd_status() {
    local pid
    if pid=$(running_pid) && [ -f "$dir/endpoint" ]; then
        echo "running $(cat "$dir/endpoint") (pid $pid)"
    else
        echo "stopped"
        return 1
    fi
}

cmd_endpoint() {
    running_pid >/dev/null && [ -f "$dir/endpoint" ] || die "no S3Proxy running in $dir (scripts/s3proxy.sh start)"
    cat "$dir/endpoint"
}

cmd_env() {
    local ep
    ep=$(cmd_endpoint)
    printf 'export AWS_ENDPOINT_URL=%s AWS_ACCESS_KEY_ID=%s AWS_SECRET_ACCESS_KEY=%s AWS_REGION=us-east-1 SLUICE_S3_BUCKET=%s\n' \
        "$ep" "$access" "$secret" "$bucket"
}

case "${1:-}" in
    start) cmd_start ;;
    stop) cmd_stop ;;
    status) cmd_status ;;
    endpoint) cmd_endpoint ;;
    env) cmd_env ;;
    fetch) classpath >/dev/null; echo "S3Proxy $(s3proxy_version) resolved" ;;
    *) die "usage: s3proxy.sh start|stop|status|endpoint|env|fetch" ;;
esac
