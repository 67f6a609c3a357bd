#!/usr/bin/env bash
# bench/ha_failover.sh [RUNS] — the time from a leading JobManager's kill -9
# to the job running again, on a local highly available cluster: three
# JobManagers with high-availability.type zookeeper (one leads, two stand
# by) and three TaskManagers with 2 slots each, heartbeat.interval 2 s and
# heartbeat.timeout 10 s (sluice's defaults), against one ZooKeeper server.
# The job is tests/tools/cluster_job.c (source, window and sinks in three
# slot sharing groups, exactly-once file sink, checkpoints every 50 ms).
# Per run: `sluice run` through ZooKeeper, first committed record, 2 s of
# running, kill -9 of the leader; measured until (a) a standby says it
# leads, (b) it recovered the job from the stores, (c) the first record
# committed after the kill (the output grows again; nothing commits while
# no JobManager leads).  A standby can only take over once ZooKeeper
# expires the dead leader's session, so (a) is bounded below by
# high-availability.zookeeper.client.session-timeout: SESSION (default
# "10 s", sluice's default; ZooKeeper's tickTime of scripts/zookeeper.sh
# allows 1 s .. 10 s).  Medians of RUNS (default 5).
#
# ZooKeeper: SLUICE_ZK_QUORUM (host:port) or the file SLUICE_ZK_QUORUM_FILE,
# else scripts/zookeeper.sh is started (and stopped) here.  BUILD (default
# build) holds sluice and cluster_job.so.
set -euo pipefail
[ -n "${TRACE:-}" ] && set -x
cd "$(dirname "$0")/.."
runs=${1:-5}
build=${BUILD:-build}
bin=$build/sluice job=$build/cluster_job.so
session=${SESSION:-10 s}
tmp=$(mktemp -d)
pids=()
own_zk=
cleanup() {
  kill -9 "${pids[@]}" 2>/dev/null || true
  [ -n "$own_zk" ] && SLUICE_ZK_DIR=$tmp/zk scripts/zookeeper.sh stop >/dev/null 2>&1 || true
  rm -rf "$tmp"
}
trap cleanup EXIT
quorum=${SLUICE_ZK_QUORUM:-}
if [ -z "$quorum" ] && [ -n "${SLUICE_ZK_QUORUM_FILE:-}" ] && [ -s "$SLUICE_ZK_QUORUM_FILE" ]; then
  quorum=$(head -1 "$SLUICE_ZK_QUORUM_FILE")
fi
if [ -z "$quorum" ]; then
  own_zk=1
  quorum=$(SLUICE_ZK_DIR=$tmp/zk scripts/zookeeper.sh start | tail -1)
fi
port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
ms() { date +%s%3N; }
lines() { cat "$1"/part-* 2>/dev/null | wc -l; }
elect=() recov=() first=()
for r in $(seq "$runs"); do
  d=$tmp/run$r; mkdir -p "$d"
  ha=(-D high-availability.type=zookeeper -D "high-availability.zookeeper.quorum=$quorum"
      -D "high-availability.storageDir=$d/ha" -D "high-availability.cluster-id=bench-$$-$r"
      -D "high-availability.zookeeper.client.session-timeout=$session")
  hb=(-D "heartbeat.interval=2 s" -D "heartbeat.timeout=10 s")
  jmpid=() rest=()
  for k in 0 1 2; do
    rest[$k]=$(port)
    "$bin" jobmanager -D jobmanager.rpc.port=$(port) -D rest.port=${rest[$k]} "${hb[@]}" "${ha[@]}" \
       >"$d/jm$k.log" 2>&1 &
    jmpid[$k]=$!; pids+=($!)
    sleep 0.2
  done
  for i in 1 2 3; do
    "$bin" taskmanager --id tm-$i -D taskmanager.numberOfTaskSlots=2 "${hb[@]}" "${ha[@]}" >"$d/tm$i.log" 2>&1 &
    pids+=($!)
  done
  until L=$(grep -l "leading (fencing token" "$d"/jm*.log 2>/dev/null | head -1) && [ -n "$L" ]; do sleep 0.05; done
  k=$(basename "$L" .log); k=${k#jm}
  until curl -s "http://127.0.0.1:${rest[$k]}/overview" | grep -q '"taskmanagers":3,'; do sleep 0.05; done
  "$bin" run -d -D high-availability.type=zookeeper -D "high-availability.zookeeper.quorum=$quorum" \
     -D "high-availability.cluster-id=bench-$$-$r" "$job" "$d/out" "$d/ck" 80000000 --groups --rate=100000 >/dev/null
  until [ "$(lines "$d/out")" -gt 0 ]; do sleep 0.01; done
  sleep 2
  t1=$(ms); kill -9 "${jmpid[$k]}"
  before=$(lines "$d/out")
  until grep -q "leading (fencing token" $(ls "$d"/jm*.log | grep -v "jm$k.log"); do sleep 0.005; done
  elect+=($(( $(ms) - t1 )))
  until grep -q "recovered 1 job" $(ls "$d"/jm*.log | grep -v "jm$k.log"); do sleep 0.005; done
  recov+=($(( $(ms) - t1 )))
  until [ "$(lines "$d/out")" -gt "$before" ]; do sleep 0.005; done
  first+=($(( $(ms) - t1 )))
  kill -9 "${pids[@]}" 2>/dev/null || true
  wait 2>/dev/null || true
  pids=()
done
median() { printf '%s\n' "$@" | sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
echo "session-timeout $session, $runs runs; from kill -9 of the leading JobManager:"
echo "  a standby leads:                  median $(median "${elect[@]}") ms (runs: ${elect[*]})"
echo "  it recovered the job:             median $(median "${recov[@]}") ms (runs: ${recov[*]})"
echo "  first record committed after it:  median $(median "${first[@]}") ms (runs: ${first[*]})"
