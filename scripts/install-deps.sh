#!/usr/bin/env bash
# Installs what building and testing sluice needs (Debian 12, as root).
set -euo pipefail
pkgs=(build-essential cmake ninja-build pkg-config libxxhash-dev libjansson-dev libyaml-dev python3
      librocksdb-dev librdkafka-dev libpq-dev postgresql maven default-jdk-headless
      libuv1-dev libssl-dev openssl libprotobuf-c-dev protobuf-c-compiler
      libmicrohttpd-dev libcurl4-openssl-dev curl chromium prometheus
      libzookeeper-mt-dev)
missing=()
for p in "${pkgs[@]}"; do dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p"); done
if [ ${#missing[@]} -gt 0 ]; then
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO=sudo
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${missing[@]}" >/dev/null
fi

# The SQL compiler's Maven dependencies (Flink's planner) into ~/.m2, so that
# scripts/build.sh builds sql/compiler offline afterwards.
if command -v mvn >/dev/null 2>&1; then
  (cd "$(dirname "$0")/../sql/compiler" && { mvn -q -o -B dependency:go-offline >/dev/null 2>&1 ||
    mvn -q -B dependency:go-offline >/dev/null; })
  # bench/savepoint_flink (bench/savepoints.sh): Flink's runtime and RocksDB backend; the tests do
  # not need it, so a failure only warns
  (cd "$(dirname "$0")/../bench/savepoint_flink" && { mvn -q -o -B dependency:go-offline >/dev/null 2>&1 ||
    mvn -q -B dependency:go-offline >/dev/null; }) ||
    echo "install-deps: could not fetch bench/savepoint_flink's Maven artifacts (only bench/savepoints.sh needs them)" >&2
fi
