#!/usr/bin/env bash
# bench/nexmark/cluster.sh [EVENTS] [RUNS] [QUERIES] — Nexmark on two
# TaskManager processes (one slot each, parallelism 2: every keyed exchange
# crosses processes for half its records) against the same query in one
# process (the `nexmark` driver at parallelism 2); events/s of the job's
# run time (the cluster's from `sluice run`: deployment included), medians
# of RUNS (default 3).  EVENTS default 5M, QUERIES default "q5 q8".
set -euo pipefail
cd "$(dirname "$0")/../.."
events=${1:-5000000}; runs=${2:-3}; queries=${3:-q5 q8}
bin=build/sluice
pids=()
trap 'kill -9 "${pids[@]}" 2>/dev/null || true' EXIT
port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
median() { printf '%s\n' "$@" | sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
rpc=$(port); rest=$(port); log=$(mktemp -d)
"$bin" jobmanager -D jobmanager.rpc.port=$rpc -D rest.port=$rest >"$log/jm.log" 2>&1 & pids+=($!)
for i in 1 2; do
  "$bin" taskmanager --id tm-$i -D jobmanager.rpc.port=$rpc -D taskmanager.numberOfTaskSlots=1 >"$log/tm$i.log" 2>&1 &
  pids+=($!)
done
until curl -s "http://127.0.0.1:$rest/overview" | grep -q '"taskmanagers":2,'; do sleep 0.05; done
echo "# $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs), load $(cut -d' ' -f1 /proc/loadavg)"
for q in $queries; do
  one=() two=()
  for r in $(seq "$runs"); do
    eps=$(build/nexmark --query "$q" --events "$events" -p 2 2>/dev/null | sed -n 's/.* eps=\([0-9]*\) .*/\1/p')
    one+=("$eps")
    ms=$("$bin" run -m 127.0.0.1:$rest build/nexmark_job.so "$q" "$events" --p=2 | sed -n 's/^Job Runtime: \([0-9]*\) ms/\1/p')
    two+=($(( events * 1000 / (ms > 0 ? ms : 1) )))
  done
  m1=$(median "${one[@]}"); m2=$(median "${two[@]}")
  echo "$q events=$events p=2 one_process_eps=$m1 two_taskmanagers_eps=$m2 ratio=$(awk -v a="$m2" -v b="$m1" 'BEGIN{printf "%.2f", a/b}') (runs: ${one[*]} / ${two[*]})"
done
