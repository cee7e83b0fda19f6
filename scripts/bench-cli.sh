#!/usr/bin/env bash
# bench-cli.sh: the cost of a fresh CLI process per command, next to the raw ways, in one run.
#
#   IMAGE=busybox N=100 scripts/bench-cli.sh [bin/hermes-sandbox]
#
# Each figure is the wall time of one whole process (start to exit), timed the same way
# ($EPOCHREALTIME around the command in this shell), N times; p50 and p95 in ms, and the p50
# over the section's baseline p50 (and its inverse, how many times faster than the baseline).
#   local:  `sh -c true`  vs  `hermes-sandbox --sandbox local exec -- true` (session owner,
#           owner with audit off, and keep_alive 0)
#   docker: `docker exec CTR true` (the docker CLI, timed from this script as the baseline only)
#           vs  `hermes-sandbox --sandbox docker exec -- true` against the same warm container
#   ssh:    `ssh -S CTL host true` through an established ControlMaster (the OpenSSH client,
#           the baseline only) vs  `hermes-sandbox --sandbox ssh exec -- true`, against a
#           throwaway sshd on 127.0.0.1 (a free port, its own host key and user key)
# Audit off is HERMES_SANDBOX_AUDIT_ENABLED=false (each audited call writes and syncs two
# records); keep_alive 0 is HERMES_SANDBOX_TERMINAL_KEEP_ALIVE=0 (no owner: the whole CLI
# starts and reaches the backend in each process), run N/5 times.
#
# IMAGE names a docker image on the engine; IMAGE=busybox imports one made from the host's
# static busybox (apt-get install busybox-static) and removes it at the end; unset skips
# docker. SSH=0 skips ssh; it needs /usr/sbin/sshd (SSHD=PATH overrides; apt-get install
# openssh-server, see scripts/test-deps.sh), ssh and ssh-keygen.
# Everything runs in a throwaway HOME and state directory, only on loopback, with a copy of
# the binary and the helpers beside it (a rebuild during the run changes nothing). At the end
# the script stops what it started (session owners, sshd, the ControlMaster) and removes its
# sessions, the image it imported and its directory. A session owner is keyed by the whole
# environment, so nothing here changes an exported variable between an owner's warm-up and
# its row.
set -euo pipefail
src=$(realpath "${1:-bin/hermes-sandbox}")
N=${N:-100}
SSHD=${SSHD:-/usr/sbin/sshd}
tmp=$(mktemp -d)
mkdir "$tmp/bin"
cp "$src" "$tmp/bin/hermes-sandbox"
cp "$(dirname "$src")"/sandbox-agent-linux-* "$tmp/bin/" 2>/dev/null || true
BIN=$tmp/bin/hermes-sandbox
cd "$tmp"
export LC_ALL=C HOME=$tmp XDG_CONFIG_HOME=$tmp/config XDG_STATE_HOME=$tmp/state HERMES_SANDBOX_TERMINAL_CWD=$tmp
# Settings of the caller's environment that would send state elsewhere or change the rows.
unset HERMES_SANDBOX_CONFIG HERMES_SANDBOX_TERMINAL_STATE_DIR HERMES_SANDBOX_TERMINAL_KEEP_ALIVE \
	HERMES_SANDBOX_AUDIT_ENABLED SSH_AUTH_SOCK
owners_dir=$tmp/state/hermes-sandbox/owners
docker_on= ssh_on= imported= image= sshd_pid= ctl=$tmp/ssh-ctl

# quiet CMD... runs CMD with its output kept, and shows it only when CMD fails.
quiet() {
	"$@" >"$tmp/out" 2>&1 || { cat "$tmp/out" >&2; echo "failed: $*" >&2; return 1; }
}

# owner_pids prints the pids of the session owners of this run (their sockets are under $tmp).
owner_pids() { pgrep -f "owner-serve --socket $tmp/" || true; }

cleanup() {
	set +e
	local pids p i
	pids=$(owner_pids)
	[ -n "$pids" ] && kill $pids 2>/dev/null
	for ((i = 0; i < 50; i++)); do
		[ -z "$(owner_pids)" ] && break
		sleep 0.1
	done
	pids=$(owner_pids)
	[ -n "$pids" ] && kill -KILL $pids 2>/dev/null
	"$BIN" --sandbox local sessions rm --all >/dev/null 2>&1
	[ -n "$docker_on" ] && "$BIN" --sandbox docker sessions rm --all >/dev/null 2>&1
	[ -n "$ssh_on" ] && "$BIN" --sandbox ssh sessions rm --all >/dev/null 2>&1
	if [ -S "$ctl" ]; then
		p=$(ssh -S "$ctl" -O check x 2>&1 | sed -n 's/.*pid=\([0-9]*\).*/\1/p')
		ssh -S "$ctl" -O exit x >/dev/null 2>&1
		[ -n "$p" ] && kill "$p" 2>/dev/null
	fi
	if [ -n "$sshd_pid" ]; then
		kill "$sshd_pid" 2>/dev/null
		wait "$sshd_pid" 2>/dev/null
	fi
	# Whatever is left that names this run's directory (sshd's connection handlers, remote
	# helpers under the remote HOME inside it): by pid, and said.
	pids=$(pgrep -f "$tmp/" | grep -vx "$$" || true)
	if [ -n "$pids" ]; then
		echo "cleanup: killing leftover processes:" >&2
		ps -o pid=,args= -p $pids >&2
		kill -KILL $pids 2>/dev/null
	fi
	[ -n "$imported" ] && docker image rm "$imported" >/dev/null 2>&1
	cd /
	rm -rf "$tmp"
}
trap cleanup EXIT

# measure CMD... runs CMD N times and sets P50 and P95 (ms) and FAILS (runs that exited
# non-zero: such a row measures an error, not the command).
measure() {
	local i s e rc f=$tmp/samples
	: >"$f"
	FAILS=0
	for ((i = 0; i < N; i++)); do
		rc=0
		s=$EPOCHREALTIME
		"$@" >/dev/null 2>&1 || rc=$?
		e=$EPOCHREALTIME
		echo $((${e/./} - ${s/./})) >>"$f"
		[ "$rc" = 0 ] || FAILS=$((FAILS + 1))
	done
	read -r P50 P95 < <(sort -n "$f" | awk '{a[NR]=$1} END {printf "%.2f %.2f\n", a[int(NR*0.5+0.5)]/1000, a[int(NR*0.95+0.5)]/1000}')
}

# row LABEL [BASE] prints the last measure as a table row; BASE is the section's baseline p50.
row() {
	local ratio="" faster="" note=""
	if [ -n "${2:-}" ]; then
		ratio=$(awk -v a="$P50" -v b="$2" 'BEGIN {printf "%.2f×", a/b}')
		faster=$(awk -v a="$P50" -v b="$2" 'BEGIN {printf "%.2f×", b/a}')
	fi
	[ "$FAILS" = 0 ] || note=" **$FAILS of $N runs FAILED**"
	printf '| %s%s | %d | %s | %s | %s | %s |\n' "$1" "$note" "$N" "$P50" "$P95" "$ratio" "$faster"
}

# warm CMD... runs CMD twice (an owner starts at the second exec with an environment, and
# the session with it) and says so when no owner of this run is up after it.
warm() {
	quiet "$@"
	quiet "$@"
	[ -n "$(owner_pids)" ] || echo "WARNING: no session owner runs after: $*" >&2
}

# busybox_image imports a root filesystem made from the host's static busybox (the layout
# of the tests' internal/testenv.DefaultRootfs) and sets image to its reference.
busybox_image() {
	local r=$tmp/rootfs a ref
	ref=hermes-sandbox-bench/busybox:$(cat /bin/busybox | sha256sum | cut -c1-12)
	mkdir -p "$r"/{bin,etc,usr/bin,tmp,proc,sys,dev,root,home/sandbox}
	cp /bin/busybox "$r/bin/busybox"
	for a in $(/bin/busybox --list); do
		[ "$a" = busybox ] || ln -s busybox "$r/bin/$a"
	done
	ln -s /bin/env "$r/usr/bin/env"
	printf 'root:x:0:0:root:/root:/bin/sh\nsandbox:x:1000:1000:sandbox:/home/sandbox:/bin/sh\nnobody:x:65534:65534:nobody:/nonexistent:/bin/false\n' >"$r/etc/passwd"
	printf 'root:x:0:\nsandbox:x:1000:\nnogroup:x:65534:\n' >"$r/etc/group"
	if ! docker image inspect "$ref" >/dev/null 2>&1; then
		quiet "$BIN" --sandbox docker image import --rootfs "$r" --tag "$ref"
		imported=$ref
	fi
	image=$ref
}

# start_sshd runs a throwaway sshd on 127.0.0.1 (a free port: it tries random ones until one
# binds), with its own host key and authorized user key, the remote HOME inside $tmp; it
# sets PORT, SSH_USER and SSH_OPTS (the OpenSSH client's options for it).
start_sshd() {
	local d=$tmp/sshd attempt i
	mkdir -p "$d/home" "$d/run"
	chmod 700 "$d" "$d/home" "$d/run"
	ssh-keygen -q -t ed25519 -N '' -C bench-host -f "$d/host_key"
	ssh-keygen -q -t ed25519 -N '' -C bench-user -f "$tmp/id_ed25519"
	cp "$tmp/id_ed25519.pub" "$d/authorized_keys"
	[ "$(id -u)" != 0 ] || mkdir -p /run/sshd # its privilege separation directory
	SSH_USER=$(id -un)
	for ((attempt = 0; attempt < 10; attempt++)); do
		PORT=$((20000 + RANDOM % 40000))
		cat >"$d/sshd_config" <<-EOF
			Port $PORT
			ListenAddress 127.0.0.1
			HostKey $d/host_key
			AuthorizedKeysFile $d/authorized_keys
			PermitRootLogin prohibit-password
			StrictModes no
			UsePAM no
			PidFile none
			PasswordAuthentication no
			KbdInteractiveAuthentication no
			Subsystem sftp internal-sftp
			SetEnv HOME=$d/home XDG_RUNTIME_DIR=$d/run
			MaxStartups 64
			LogLevel INFO
		EOF
		"$SSHD" -D -e -f "$d/sshd_config" 2>"$d/log" &
		sshd_pid=$!
		for ((i = 0; i < 150; i++)); do
			grep -q "Server listening on" "$d/log" && break
			kill -0 "$sshd_pid" 2>/dev/null || break
			sleep 0.1
		done
		if grep -q "Server listening on" "$d/log"; then
			break
		fi
		kill "$sshd_pid" 2>/dev/null || true
		wait "$sshd_pid" 2>/dev/null || true
		sshd_pid=
	done
	if [ -z "$sshd_pid" ]; then
		echo "sshd did not start:" >&2
		cat "$d/log" >&2
		return 1
	fi
	echo "[127.0.0.1]:$PORT $(cut -d' ' -f1,2 "$d/host_key.pub")" >"$tmp/known_hosts"
	SSH_OPTS=(-F /dev/null -p "$PORT" -l "$SSH_USER" -i "$tmp/id_ed25519" -o IdentitiesOnly=yes
		-o BatchMode=yes -o UserKnownHostsFile="$tmp/known_hosts" -o GlobalKnownHostsFile=/dev/null
		-o StrictHostKeyChecking=yes)
}

echo "<!-- $(date -u +%FT%TZ) $(uname -srm), $(nproc) cpus, load:$(uptime | sed 's/.*load average://'); $("$BIN" version 2>&1 | head -1), sha256 $(sha256sum "$BIN" | cut -c1-12); N=$N -->"
echo
echo "| case | n | p50 ms | p95 ms | p50 / baseline p50 | baseline p50 / p50 |"
echo "| --- | ---: | ---: | ---: | ---: | ---: |"

measure sh -c true
row "local: sh -c true (baseline)"
base=$P50
warm "$BIN" --sandbox local exec -- true # start the owner
measure "$BIN" --sandbox local exec -- true
row "local: hermes-sandbox exec -- true (session owner)" "$base"
warm env HERMES_SANDBOX_AUDIT_ENABLED=false "$BIN" --sandbox local exec -- true
HERMES_SANDBOX_AUDIT_ENABLED=false measure "$BIN" --sandbox local exec -- true
row "local: hermes-sandbox exec -- true (session owner, audit off)" "$base"
HERMES_SANDBOX_TERMINAL_KEEP_ALIVE=0 measure "$BIN" --sandbox local exec -- true
row "local: hermes-sandbox exec -- true (keep_alive 0)" "$base"
measure "$BIN" version
row "hermes-sandbox version (process start alone)" "$base"

if [ -n "${IMAGE:-}" ]; then
	docker_on=1
	image=$IMAGE
	[ "$IMAGE" != busybox ] || busybox_image
	quiet "$BIN" config set docker.image "$image"
	warm "$BIN" --sandbox docker exec -- true # create the container, start the owner
	ctr=$("$BIN" --sandbox docker sessions list --json | sed -n 's/.*"name":"default","backend":"docker","id":"\([0-9a-f]*\)".*/\1/p')
	[ -n "$ctr" ] || { echo "no docker session after the first exec" >&2; exit 1; }
	measure docker exec "$ctr" true
	row "docker: docker exec CTR true (docker CLI, baseline)"
	base=$P50
	measure "$BIN" --sandbox docker exec -- true
	row "docker: hermes-sandbox exec -- true (session owner)" "$base"
	warm env HERMES_SANDBOX_AUDIT_ENABLED=false "$BIN" --sandbox docker exec -- true
	HERMES_SANDBOX_AUDIT_ENABLED=false measure "$BIN" --sandbox docker exec -- true
	row "docker: hermes-sandbox exec -- true (session owner, audit off)" "$base"
	HERMES_SANDBOX_TERMINAL_KEEP_ALIVE=0 N=$((N / 5)) measure "$BIN" --sandbox docker exec -- true
	N=$((N / 5)) row "docker: hermes-sandbox exec -- true (keep_alive 0)" "$base"
fi

if [ "${SSH:-1}" != 0 ]; then
	if [ ! -x "$SSHD" ] || ! command -v ssh >/dev/null || ! command -v ssh-keygen >/dev/null; then
		echo "ssh: skipped: needs $SSHD (apt-get install openssh-server), ssh and ssh-keygen" >&2
	else
		ssh_on=1
		start_sshd
		ssh "${SSH_OPTS[@]}" -o ControlMaster=yes -o ControlPath="$ctl" -o ControlPersist=yes -f -N 127.0.0.1
		ssh -S "$ctl" -O check 127.0.0.1 >/dev/null 2>&1 || { echo "the ControlMaster did not start" >&2; exit 1; }
		quiet "$BIN" config set ssh.host 127.0.0.1
		quiet "$BIN" config set ssh.port "$PORT"
		quiet "$BIN" config set ssh.user "$SSH_USER"
		quiet "$BIN" config set ssh.key "$tmp/id_ed25519"
		quiet "$BIN" config set ssh.known_hosts "$tmp/known_hosts"
		quiet "$BIN" config set ssh.strict_host_key_checking yes
		measure ssh "${SSH_OPTS[@]}" -S "$ctl" -o ControlMaster=no 127.0.0.1 true
		row "ssh: ssh -S CTL host true (ControlMaster, baseline)"
		base=$P50
		# A client falls back to a connection of its own when the master is gone: check it still runs.
		ssh -S "$ctl" -O check 127.0.0.1 >/dev/null 2>&1 || echo "WARNING: the ControlMaster ended during its row" >&2
		N=$((N / 5)) measure ssh "${SSH_OPTS[@]}" 127.0.0.1 true
		N=$((N / 5)) row "ssh: ssh host true (new connection each, no ControlMaster)" "$base"
		warm "$BIN" --sandbox ssh exec -- true # connect, upload the helper, start the session
		measure "$BIN" --sandbox ssh exec -- true
		row "ssh: hermes-sandbox exec -- true (session owner)" "$base"
		warm env HERMES_SANDBOX_AUDIT_ENABLED=false "$BIN" --sandbox ssh exec -- true
		HERMES_SANDBOX_AUDIT_ENABLED=false measure "$BIN" --sandbox ssh exec -- true
		row "ssh: hermes-sandbox exec -- true (session owner, audit off)" "$base"
		HERMES_SANDBOX_TERMINAL_KEEP_ALIVE=0 N=$((N / 5)) measure "$BIN" --sandbox ssh exec -- true
		N=$((N / 5)) row "ssh: hermes-sandbox exec -- true (keep_alive 0)" "$base"
	fi
fi

# The owners this run started, and anything but their INFO lines.
echo
echo "<!-- session owners: $(ls "$owners_dir"/*.sock 2>/dev/null | wc -l) sockets, $(owner_pids | wc -l) running (one per environment: 2 expected, audit on and off) -->"
if ls "$owners_dir"/*.log >/dev/null 2>&1 && grep -hv "level=INFO" "$owners_dir"/*.log | grep -q .; then
	echo "owner logs (non-INFO lines):" >&2
	grep -hv "level=INFO" "$owners_dir"/*.log >&2
fi
