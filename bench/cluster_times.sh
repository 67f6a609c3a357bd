#!/usr/bin/env bash
# bench/cluster_times.sh [RUNS] — on a local cluster (a JobManager and five
# TaskManagers with 2 slots each, heartbeat.interval 2 s and heartbeat.timeout
# 10 s, sluice's defaults): the time from `sluice run` to the first committed
# record at the sink; from a TaskManager's kill -9 (detected through its
# failed connection) to the first record committed after the recovery; and
# from a TaskManager that stops answering (SIGSTOP: its connection stays up,
# only the heartbeat timeout can tell) to the first record committed after
# that recovery; medians of RUNS (default 5).  The job is tests/tools/cluster_job.c
# (source, window and sinks in three slot sharing groups, checkpoints every
# 50 ms, so a record is committed within one checkpoint of being written).
set -euo pipefail
[ -n "${TRACE:-}" ] && set -x
cd "$(dirname "$0")/.."
runs=${1:-5}
bin=build/sluice job=build/cluster_job.so
tmp=$(mktemp -d)
pids=()
trap 'kill -9 "${pids[@]}" 2>/dev/null || true; rm -rf "$tmp"' EXIT
port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
ms() { date +%s%3N; }
lines() { cat "$1"/part-* 2>/dev/null | wc -l; }
starts=() recov=() hbrecov=()
for r in $(seq "$runs"); do
  d=$tmp/run$r; mkdir -p "$d"
  rpc=$(port); rest=$(port)
  "$bin" jobmanager -D jobmanager.rpc.port=$rpc -D rest.port=$rest -D "heartbeat.interval=2 s" \
     -D "heartbeat.timeout=10 s" >"$d/jm.log" 2>&1 &
  pids=($!)
  for i in 1 2 3 4 5; do
    "$bin" taskmanager --id tm-$i -D jobmanager.rpc.port=$rpc -D taskmanager.numberOfTaskSlots=2 \
       -D "heartbeat.interval=2 s" -D "heartbeat.timeout=10 s" >"$d/tm$i.log" 2>&1 &
    pids+=($!)
  done
  until curl -s "http://127.0.0.1:$rest/overview" | grep -q '"taskmanagers":5,'; do sleep 0.05; done
  t0=$(ms)
  "$bin" run -d -m 127.0.0.1:$rest "$job" "$d/out" "$d/ck" 8000000 --groups --rate=200000 >/dev/null
  until [ "$(lines "$d/out")" -gt 0 ]; do sleep 0.005; done
  starts+=($(( $(ms) - t0 )))
  sleep 2
  victim=$(grep -l "Window(" "$d"/tm*.log | head -1)
  pid=$(pgrep -f "taskmanager --id $(basename "$victim" .log | sed 's/tm/tm-/') " | head -1)
  t1=$(ms); kill -9 "$pid"
  # the first record committed by the restarted attempt: once it is deployed, the output grows
  until grep -q "deploying job 'cluster-job' attempt 1" "$d"/tm*.log; do sleep 0.005; done
  before=$(lines "$d/out")
  until [ "$(lines "$d/out")" -gt "$before" ]; do sleep 0.005; done
  recov+=($(( $(ms) - t1 )))
  sleep 2
  # a TaskManager that stops answering: the window's TaskManager of attempt 1
  victim=$(grep -l "deploying job 'cluster-job' attempt 1" "$d"/tm*.log | xargs grep -l "Window(" | head -1)
  pid=$(pgrep -f "taskmanager --id $(basename "$victim" .log | sed 's/tm/tm-/') " | head -1)
  t2=$(ms); kill -STOP "$pid"
  until grep -q "deploying job 'cluster-job' attempt 2" "$d"/tm*.log; do sleep 0.005; done
  before=$(lines "$d/out")
  until [ "$(lines "$d/out")" -gt "$before" ]; do sleep 0.005; done
  hbrecov+=($(( $(ms) - t2 )))
  kill -CONT "$pid" 2>/dev/null || true
  kill -9 "${pids[@]}" 2>/dev/null || true
  wait 2>/dev/null || true
  pids=()
done
median() { printf '%s\n' "$@" | sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
echo "submit -> first committed record: median $(median "${starts[@]}") ms (runs: ${starts[*]})"
echo "kill -9 of the window's TaskManager -> first record committed after recovery: median $(median "${recov[@]}") ms (runs: ${recov[*]})"
echo "SIGSTOP of the window's TaskManager (heartbeat.timeout 10 s) -> first record committed after recovery: median $(median "${hbrecov[@]}") ms (runs: ${hbrecov[*]})"
