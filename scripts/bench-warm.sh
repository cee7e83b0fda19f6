#!/usr/bin/env bash
# bench-warm.sh: a warm `hermes-sandbox exec -- true` (docker, through its session owner) next
# to a static Go hello-world binary and to `docker exec CTR true`, all three started the same
# way (a process from this shell, timed with $EPOCHREALTIME), alternating A B C A B C … in one
# run; medians and p95 in ms.
#
#   IMAGE=ref N=200 scripts/bench-warm.sh [bin/hermes-sandbox]
#
# IMAGE names a docker image on the engine (the tests' busybox image will do). The hello-world
# is built here with the caller's Go toolchain (CGO_ENABLED=0, -trimpath -ldflags '-s -w', as
# the release binary). AUDIT=false runs the hermes row with the audit log off. Everything runs
# in a throwaway HOME and state directory with a copy of the binary and its helper; at the end
# the script stops the session owner it started (by pid), removes its session and its
# directory.
set -euo pipefail
src=$(realpath "${1:-bin/hermes-sandbox}")
: "${IMAGE:?IMAGE names a docker image on the engine}"
N=${N:-200}
tmp=$(mktemp -d)
mkdir "$tmp/bin" "$tmp/hello"
cp "$src" "$tmp/bin/hermes-sandbox"
cp "$(dirname "$src")"/sandbox-agent-linux-* "$tmp/bin/"
printf 'package main\n\nimport "os"\n\nfunc main() { os.Stdout.WriteString("hello, world\\n") }\n' >"$tmp/hello/main.go"
(cd "$tmp/hello" && CGO_ENABLED=0 go build -trimpath -ldflags '-s -w' -o "$tmp/bin/hello" main.go)
BIN=$tmp/bin/hermes-sandbox
HELLO=$tmp/bin/hello
cd "$tmp"
export LC_ALL=C HOME=$tmp XDG_CONFIG_HOME=$tmp/config XDG_STATE_HOME=$tmp/state HERMES_SANDBOX_TERMINAL_CWD=$tmp
export HERMES_SANDBOX_TERMINAL_BACKEND=docker HERMES_SANDBOX_DOCKER_IMAGE=$IMAGE HERMES_SANDBOX_AUDIT_ENABLED=${AUDIT:-true}
unset HERMES_SANDBOX_CONFIG HERMES_SANDBOX_TERMINAL_STATE_DIR HERMES_SANDBOX_TERMINAL_KEEP_ALIVE HERMES_SANDBOX_DOCKER_POOL_SIZE
owner_pids() { pgrep -f "owner-serve --socket $tmp/" || true; }
cleanup() {
	set +e
	for p in $(owner_pids); do kill "$p"; done
	for _ in $(seq 100); do [ -z "$(owner_pids)" ] && break; sleep 0.1; done
	"$BIN" sessions rm --all >/dev/null 2>&1
	cd /
	rm -rf "$tmp"
}
trap cleanup EXIT

# Two execs start the owner (it starts at the second with an environment) and the session.
"$BIN" exec -- true
"$BIN" exec -- true
[ -n "$(owner_pids)" ] || { echo "no session owner after two execs" >&2; exit 1; }
ctr=$("$BIN" sessions list --json | sed -n 's/.*"name":"default","backend":"docker","id":"\([0-9a-f]*\)".*/\1/p')
[ -n "$ctr" ] || { echo "no docker session after the first exec" >&2; exit 1; }

: >"$tmp/a" >"$tmp/b" >"$tmp/c"
fails=0
# once FILE CMD... times one run of CMD and appends its microseconds to FILE.
once() {
	local f=$1 s e
	shift
	s=$EPOCHREALTIME
	"$@" >/dev/null 2>&1 || fails=$((fails + 1))
	e=$EPOCHREALTIME
	echo $((${e/./} - ${s/./})) >>"$f"
}
load0=$(cut -d' ' -f1-3 /proc/loadavg)
for ((i = 0; i < N; i++)); do
	once "$tmp/a" "$HELLO"
	once "$tmp/b" "$BIN" exec -- true
	once "$tmp/c" docker exec "$ctr" true
done
stats() { sort -n "$1" | awk '{a[NR]=$1} END {printf "%.2f %.2f\n", a[int(NR*0.5+0.5)]/1000, a[int(NR*0.95+0.5)]/1000}'; }
read -r h50 h95 < <(stats "$tmp/a")
read -r x50 x95 < <(stats "$tmp/b")
read -r d50 d95 < <(stats "$tmp/c")
echo "<!-- $(date -u +%FT%TZ) $(uname -srm), $(nproc) cpus, load before: $load0, after: $(cut -d' ' -f1-3 /proc/loadavg); N=$N rounds A B C; audit ${AUDIT:-true}; $("$BIN" version 2>&1 | head -1) -->"
echo
echo "| case (same run, alternating) | p50 ms | p95 ms |"
echo "| --- | ---: | ---: |"
echo "| A: static Go hello world | $h50 | $h95 |"
echo "| B: hermes-sandbox exec -- true (docker, warm session owner) | $x50 | $x95 |"
echo "| C: docker exec CTR true (docker CLI) | $d50 | $d95 |"
echo
awk -v h="$h50" -v x="$x50" -v d="$d50" 'BEGIN {printf "B / A = %.2f× (goal ≤ 2×); C / B = %.1f× (goal ≥ 10×)\n", x/h, d/x}'
[ "$fails" = 0 ] || echo "**$fails runs FAILED**"
