#!/usr/bin/env bash
# tests/test_cluster_scripts.sh BUILD_DIR SRC_DIR — scripts/start-cluster.sh
# with a config.yaml and a workers file of three lines starts a JobManager
# and three TaskManagers that register (GET /overview), `sluice run` runs a
# job on them to its end, scripts/stop-cluster.sh stops every process.
set -uo pipefail
build=${1:?}; src=${2:?}
tmp=${SLUICE_TEST_TMP:-/tmp}/cluster-scripts.$$
mkdir -p "$tmp"
fail() { echo "test_cluster_scripts: FAIL: $*"; tail -n 20 "$tmp"/log/*.log 2>/dev/null; SLUICE_CONF_DIR=$tmp SLUICE_LOG_DIR=$tmp/log SLUICE_BIN=$build/sluice "$src/scripts/stop-cluster.sh" >/dev/null 2>&1; exit 1; }
port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
rpc=$(port); rest=$(port)
printf 'jobmanager.rpc.port: %s\nrest.port: %s\ntaskmanager.numberOfTaskSlots: 2\nheartbeat.interval: 200 ms\n' "$rpc" "$rest" >"$tmp/config.yaml"
printf '# three TaskManagers on this host\nlocalhost\nlocalhost\nlocalhost\n' >"$tmp/workers"
export SLUICE_CONF_DIR=$tmp SLUICE_LOG_DIR=$tmp/log SLUICE_BIN=$build/sluice
"$src/scripts/start-cluster.sh" >/dev/null || fail "start-cluster.sh failed"
ok=
for _ in $(seq 100); do
  if curl -s "http://127.0.0.1:$rest/overview" | grep -q '"taskmanagers":3,'; then ok=1; break; fi
  sleep 0.1
done
[ -n "$ok" ] || fail "three TaskManagers did not register"
out=$("$build/sluice" run -m "127.0.0.1:$rest" "$build/cluster_job.so" "$tmp/out" "$tmp/ck" 20000 --groups 2>&1)
echo "$out" | grep -q "has finished" || fail "the job did not finish: $out"
[ "$(cat "$tmp"/out/part-* | wc -l)" -gt 0 ] || fail "no output"
pids=$(cat "$tmp"/log/*.pid)
"$src/scripts/stop-cluster.sh" >/dev/null || fail "stop-cluster.sh failed"
for p in $pids; do kill -0 "$p" 2>/dev/null && fail "process $p still runs after stop-cluster.sh"; done
ls "$tmp"/log/*.pid >/dev/null 2>&1 && fail "pid files left"
rm -rf "$tmp"
echo "test_cluster_scripts: ok"
