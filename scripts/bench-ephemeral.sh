#!/usr/bin/env bash
# bench-ephemeral.sh: ephemeral tasks (`exec --ephemeral -- true`, a fresh sandbox each) from
# the session owner's warm pool, next to `docker run --rm IMAGE true` through the Engine API,
# alternating round by round in one run (hermes-sandbox bench --ephemeral).
#
#   IMAGE=ref POOL=4 scripts/bench-ephemeral.sh [bin/hermes-sandbox]
#
# Two rows: single tasks from a warm pool (-j 1, a pause between tasks so the pool refills),
# and 200 tasks 8 at a time. Everything runs in a throwaway HOME and state directory with a
# copy of the binary and its helper; at the end the script stops the session owner it
# started (by its pid) and checks that no container or volume of its state directory is left.
set -euo pipefail
src=$(realpath "${1:-bin/hermes-sandbox}")
: "${IMAGE:?IMAGE names a docker image on the engine}"
POOL=${POOL:-4}
tmp=$(mktemp -d)
mkdir "$tmp/bin"
cp "$src" "$tmp/bin/hermes-sandbox"
cp "$(dirname "$src")"/sandbox-agent-linux-* "$tmp/bin/"
BIN=$tmp/bin/hermes-sandbox
cd "$tmp"
export LC_ALL=C HOME=$tmp XDG_CONFIG_HOME=$tmp/config XDG_STATE_HOME=$tmp/state HERMES_SANDBOX_TERMINAL_CWD=$tmp
export HERMES_SANDBOX_TERMINAL_BACKEND=docker HERMES_SANDBOX_DOCKER_IMAGE=$IMAGE HERMES_SANDBOX_DOCKER_POOL_SIZE=$POOL
cleanup() {
	for p in $(pgrep -f "owner-serve --socket $tmp/" || true); do kill "$p" 2>/dev/null || true; done
	for _ in $(seq 300); do pgrep -f "owner-serve --socket $tmp/" >/dev/null || break; sleep 0.1; done
	rm -rf "$tmp"
}
trap cleanup EXIT
echo "# load before: $(cut -d' ' -f1-3 /proc/loadavg) on $(nproc) cores"
echo "## single tasks from a warm pool (pool_size $POOL)"
"$BIN" bench --ephemeral -n "${N1:-20}" -j 1 --rounds 4 --interval "${INTERVAL:-1500ms}"
echo "## 200 tasks, 8 at a time (pool_size $POOL)"
"$BIN" bench --ephemeral -n "${N:-200}" -j "${J:-8}" --rounds 4
echo "# load after: $(cut -d' ' -f1-3 /proc/loadavg)"
