#!/usr/bin/env bash
# scripts/build.sh [DIR [SANITIZERS]] — configures and builds sluice.
#   scripts/build.sh                       -> build/ (RelWithDebInfo)
#   scripts/build.sh build-asan address,undefined
#   scripts/build.sh build-tsan thread
set -euo pipefail
cd "$(dirname "$0")/.."
dir=${1:-build}
san=${2:-}
cmake -S . -B "$dir" -G Ninja -DSLUICE_SANITIZE="$san" >/dev/null
ninja -C "$dir" >/dev/null

# The SQL compiler (sql/compiler: Flink's planner in a shaded jar, used by
# `sluice sql` and the test_sql_* tests) -> sql/compiler/target/sluice-sql-compiler.jar.
# Rebuilt only when its sources changed; offline first (install-deps.sh fills
# ~/.m2), online if something is missing.  SLUICE_SKIP_SQL_JAR=1 skips it.
jar=sql/compiler/target/sluice-sql-compiler.jar
if [ -z "${SLUICE_SKIP_SQL_JAR:-}" ]; then
  if ! command -v mvn >/dev/null 2>&1 || ! command -v java >/dev/null 2>&1; then
    echo "build.sh: Maven or Java missing: the SQL compiler jar is not built (scripts/install-deps.sh)" >&2
  elif [ ! -f "$jar" ] || [ -n "$(find sql/compiler/pom.xml sql/compiler/src bench/nexmark/src/main/java/sluice/nexmark \
          -newer "$jar" -type f 2>/dev/null | head -1)" ]; then
    (cd sql/compiler && { mvn -q -o -B package >/dev/null 2>&1 || mvn -q -B package >/dev/null; })
  fi
fi
