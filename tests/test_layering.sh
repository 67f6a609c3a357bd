#!/usr/bin/env bash
# tests/test_layering.sh SRC_DIR — the layers of the JobManager/TaskManager
# split include each other only in the allowed directions (ARCHITECTURE.md,
# "Layers"): the builder (api, graph), the JobManager side (jobmanager) and
# the TaskManager side (taskmanager) never include each other; the plan and
# the protocol are data below all three; only runtime/local.c, the wiring of
# embedded mode, sees both sides; the runtime folders (operators, windowing,
# joins, cep, state, connectors, formats, types) include none of the
# builder, the sides or the wiring, and sql no side.  Fails with the
# offending lines.
set -uo pipefail
src=${1:?usage: test_layering.sh SRC_DIR}/src
fail=0
forbid() { # dir pattern why
  local dir=$1 pat=$2 why=$3 hits
  hits=$(grep -nE "^#include \"($pat)/" "$src/$dir"/*.[ch] 2>/dev/null)
  if [ -n "$hits" ]; then
    echo "test_layering: $dir must not include $pat ($why):"
    echo "$hits" | sed "s|$src/|  src/|"
    fail=1
  fi
}
forbid jobmanager 'taskmanager|api|graph|operators|runtime' 'the JobManager sees plans, checkpoints and messages only'
forbid taskmanager 'jobmanager|api|graph|runtime' 'the TaskManager sees plans, job code, checkpoints and messages only'
forbid api 'jobmanager|taskmanager' 'the builder produces a plan and hands it to the embedded wiring'
forbid plan 'api|graph|jobmanager|taskmanager|runtime|protocol' 'the plan is data below every side'
forbid protocol 'api|graph|jobmanager|taskmanager|runtime|operators' 'messages are data below every side'
forbid checkpoint 'api|graph|jobmanager|taskmanager|runtime' 'checkpoint formats and storage are below both sides'
# The running code (operators and what they are made of) sees neither the
# builder nor either side: a running operator reaches its task through the
# operator context (operators/operator_context.h) and gets what the builder
# decided through its spec.  Builder functions of these concepts live in
# src/api/ (window_api.c, async_api.c, join_api.c, ...).
for d in operators windowing joins cep state connectors formats types; do
  forbid $d 'api|graph|taskmanager|jobmanager|runtime' 'running operators see their context and spec, never the builder or the task'
done
forbid sql 'taskmanager|jobmanager|runtime' 'SQL builds jobs with the builder API and never reaches the running side'
both=$(grep -lE '^#include "jobmanager/' "$src"/*/*.c | xargs -r grep -lE '^#include "taskmanager/' | sed "s|$src/||")
if [ "$both" != "runtime/local.c" ]; then
  echo "test_layering: only runtime/local.c may include both sides; found: ${both:-none}"
  fail=1
fi
[ $fail = 0 ] && echo "test_layering: ok"
exit $fail
