#!/usr/bin/env bash
# Per-command overhead and create → first result of the docker backend under runc (the
# engine's default), runsc (gVisor) and Podman, in one run, alternating the three round by
# round (ABCABC…) so a change in the machine's load hits all of them alike. Each round prints
# the Go benchmarks' p50/p95; take the median over rounds per engine.
#   scripts/bench-isolation.sh [ROUNDS] [WARM_N] [COLD_N]
# Needs runsc registered with the engine and Podman's service on
# /run/hermes-podman/podman.sock (scripts/test-deps.sh sets both up). With
# HERMES_SANDBOX_TEST_PODMAN_ROOTLESS_SOCKET set, rootless Podman is a fourth.
set -euo pipefail
cd "$(dirname "$0")/.."
rounds=${1:-2} warm=${2:-50} cold=${3:-5}
bin=$(mktemp -d)/docker.test
trap 'rm -rf "$(dirname "$bin")"' EXIT
go test -c -o "$bin" ./backends/docker/
export HERMES_SANDBOX_TEST_FULL=1 # the docker benchmarks run only when told
cd backends/docker # the test binary builds the helper from the module
one() { # engine env...
  local name=$1
  shift
  env -u HERMES_SANDBOX_TEST_PODMAN_ROOTLESS_SOCKET "$@" "$bin" -test.run '^$' -test.bench '^BenchmarkExecWarm$' -test.benchtime "${warm}x" | sed -n "s/^Benchmark/$name Benchmark/p"
  env -u HERMES_SANDBOX_TEST_PODMAN_ROOTLESS_SOCKET "$@" "$bin" -test.run '^$' -test.bench '^BenchmarkColdStart$' -test.benchtime "${cold}x" | sed -n "s/^Benchmark/$name Benchmark/p"
}
for r in $(seq 1 "$rounds"); do
  echo "# round $r $(date -u +%H:%M:%S) load $(cut -d' ' -f1-3 /proc/loadavg)"
  one runc HERMES_SANDBOX_TEST_DOCKER_RUNTIME=
  one runsc HERMES_SANDBOX_TEST_DOCKER_RUNTIME=runsc
  one podman HERMES_SANDBOX_TEST_PODMAN_SOCKET=unix:///run/hermes-podman/podman.sock
  if [ -n "${HERMES_SANDBOX_TEST_PODMAN_ROOTLESS_SOCKET:-}" ]; then # rootless (limits 0, main_test.go)
    one podman-rootless HERMES_SANDBOX_TEST_PODMAN_ROOTLESS_SOCKET="$HERMES_SANDBOX_TEST_PODMAN_ROOTLESS_SOCKET"
  fi
done
