#!/usr/bin/env bash
# bench/cluster_times.sh [RUNS] — on a local cluster (a JobManager and four
# TaskManagers with 2 slots each): the time from `sluice run` to the first
# committed record at the sink, and from a TaskManager's kill -9 (detected
# through its failed connection) to the first record committed after the
# recovery; medians of RUNS (default 5).  The job is tests/tools/cluster_job.c
# (source, window and sinks in three slot sharing groups, checkpoints every
# 50 ms, so a record is committed within one checkpoint of being written).
set -euo pipefail
cd "$(dirname "$0")/.."
runs=${1:-5}
bin=build/sluice job=build/cluster_job.so
tmp=$(mktemp -d)
pids=()
trap 'kill -9 "${pids[@]}" 2>/dev/null; rm -rf "$tmp"' EXIT
port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
ms() { date +%s%3N; }
lines() { cat "$1"/part-* 2>/dev/null | wc -l; }
starts=() recov=()
for r in $(seq "$runs"); do
  d=$tmp/run$r; mkdir -p "$d"
  rpc=$(port); rest=$(port)
  "$bin" jobmanager -D jobmanager.rpc.port=$rpc -D rest.port=$rest -D "heartbeat.interval=500 ms" \
     -D "heartbeat.timeout=5 s" >"$d/jm.log" 2>&1 &
  pids=($!)
  for i in 1 2 3 4; do
    "$bin" taskmanager --id tm-$i -D jobmanager.rpc.port=$rpc -D taskmanager.numberOfTaskSlots=2 \
       -D "heartbeat.interval=500 ms" -D "heartbeat.timeout=5 s" >"$d/tm$i.log" 2>&1 &
    pids+=($!)
  done
  until curl -s "http://127.0.0.1:$rest/overview" | grep -q '"taskmanagers":4,'; do sleep 0.05; done
  t0=$(ms)
  "$bin" run -d -m 127.0.0.1:$rest "$job" "$d/out" "$d/ck" 3000000 --groups --rate=200000 >/dev/null
  until [ "$(lines "$d/out")" -gt 0 ]; do sleep 0.005; done
  starts+=($(( $(ms) - t0 )))
  sleep 2
  victim=$(grep -l "Window(" "$d"/tm*.log | head -1)
  pid=$(pgrep -f "taskmanager --id $(basename "$victim" .log | sed 's/tm/tm-/')")
  t1=$(ms); kill -9 "$pid"
  # the first record committed by the restarted attempt: once it is deployed, the output grows
  until grep -q "deploying job 'cluster-job' attempt 1" "$d"/tm*.log; do sleep 0.005; done
  before=$(lines "$d/out")
  until [ "$(lines "$d/out")" -gt "$before" ]; do sleep 0.005; done
  recov+=($(( $(ms) - t1 )))
  kill -9 "${pids[@]}" 2>/dev/null || true
  wait 2>/dev/null || true
  pids=()
done
median() { printf '%s\n' "$@" | sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
echo "submit -> first committed record: median $(median "${starts[@]}") ms (runs: ${starts[*]})"
echo "kill -9 of the window's TaskManager -> first record committed after recovery: median $(median "${recov[@]}") ms (runs: ${recov[*]})"
