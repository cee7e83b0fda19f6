#!/usr/bin/env bash
# bench-cli.sh: the cost of a fresh CLI process per command, next to the raw ways, in one run.
#
#   IMAGE=python:3.12-slim N=100 scripts/bench-cli.sh [bin/hermes-sandbox]
#
# Each figure is the wall time of one whole process (start to exit), timed the same way
# ($EPOCHREALTIME around the command in this shell), N times; p50 and p95 in ms.
#   local:  `sh -c true`  vs  `hermes-sandbox --sandbox local exec -- true` (owner, and keep_alive 0)
#   docker: `docker exec CTR true` (the docker CLI, timed from this script as the baseline only)
#           vs  `hermes-sandbox --sandbox docker exec -- true` against the same warm container
# IMAGE unset skips docker. Everything runs in a throwaway HOME and state directory.
set -euo pipefail
BIN=$(realpath "${1:-bin/hermes-sandbox}")
N=${N:-100}
tmp=$(mktemp -d)
export HOME=$tmp XDG_CONFIG_HOME=$tmp/config XDG_STATE_HOME=$tmp/state HERMES_SANDBOX_TERMINAL_CWD=$tmp
cleanup() {
	"$BIN" --sandbox local sessions rm --all >/dev/null 2>&1 || true
	[ -n "${IMAGE:-}" ] && "$BIN" --sandbox docker sessions rm --all >/dev/null 2>&1 || true
	rm -rf "$tmp"
}
trap cleanup EXIT

# times CMD... N times and prints "p50 p95" in ms.
times() {
	local i s e
	for ((i = 0; i < N; i++)); do
		s=$EPOCHREALTIME
		"$@" >/dev/null 2>&1
		e=$EPOCHREALTIME
		echo $((${e/./} - ${s/./}))
	done | sort -n | awk '{a[NR]=$1} END {printf "%.2f %.2f", a[int(NR*0.5+0.5)]/1000, a[int(NR*0.95+0.5)]/1000}'
}
row() { printf '%-58s %8s %8s\n' "$1" $2; }

printf "%-58s %8s %8s\n" case "p50 ms" "p95 ms"
"$BIN" --sandbox local exec -- true # start the owner
row "local: sh -c true (baseline)" "$(times sh -c true)"
row "local: hermes-sandbox exec -- true (session owner)" "$(times "$BIN" --sandbox local exec -- true)"
row "local: hermes-sandbox exec -- true (keep_alive 0)" "$(HERMES_SANDBOX_TERMINAL_KEEP_ALIVE=0 times "$BIN" --sandbox local exec -- true)"
row "hermes-sandbox version (process start alone)" "$(times "$BIN" version)"
if [ -n "${IMAGE:-}" ]; then
	"$BIN" config set docker.image "$IMAGE" >/dev/null
	"$BIN" --sandbox docker exec -- true # create the container, start the owner
	ctr=$("$BIN" --sandbox docker sessions list --json | sed -n 's/.*"name":"default","backend":"docker","id":"\([0-9a-f]*\)".*/\1/p')
	row "docker: docker exec CTR true (docker CLI, baseline)" "$(times docker exec "$ctr" true)"
	row "docker: hermes-sandbox exec -- true (session owner)" "$(times "$BIN" --sandbox docker exec -- true)"
	row "docker: hermes-sandbox exec -- true (keep_alive 0)" "$(HERMES_SANDBOX_TERMINAL_KEEP_ALIVE=0 N=$((N / 5)) times "$BIN" --sandbox docker exec -- true)"
fi
