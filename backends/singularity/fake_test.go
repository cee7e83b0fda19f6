//go:build !windows

package singularity

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hermes-sandbox/hermes-sandbox/config"
	"github.com/hermes-sandbox/hermes-sandbox/internal/testenv"
	"github.com/hermes-sandbox/hermes-sandbox/sandbox"
)

// fakeScript is a stand-in for the apptainer command line: just enough of `version`,
// `build`, `instance start|list|stop` and `exec instance://NAME` to drive the backend's real
// code end to end, with only the container runtime faked. An instance is a directory in the
// registry holding its binds and its private /tmp; `exec` maps the command's container paths
// through those binds (and /tmp), enters a new user and mount namespace in which the
// instance's /tmp is also bound over /mnt, the tests' scratch directory (the helper runs on
// this host, so the real /tmp must stay visible to it), rebuilds a clean environment
// (PATH, HOME, the --env-file values, and APPTAINER_INSTANCE, which marks the instance's
// processes) and execs the command in the instance directory, so the helper's stdin and
// stdout pass straight through.
// `instance stop` kills every process so marked, as the end of a PID namespace would.
// Like the real runtime, `instance start` and `exec` refuse a flag they do not know; the
// instance's flags are kept, and `--network none` gives its processes a network namespace of
// their own with only loopback.
// FAKE_NO_PIDS_LIMIT=1 makes `instance start` refuse --pids-limit, as a host without
// delegated cgroups does. FAKE_START_DELAY=S makes `instance start` list the instance S seconds
// before it is ready, as a real runtime may while its container comes up. Every call is appended to calls.log.
const fakeScript = `#!/bin/sh
R=@REGISTRY@
mkdir -p "$R/instances"
[ "$1" = __inner ] || { printf '%s' "$1"; shift_log=1; for a in "$@"; do [ $shift_log = 1 ] && { shift_log=0; continue; }; printf ' %s' "$a"; done; echo; } >> "$R/calls.log"

kill_instance() {
	# One grep over every process's environment (NUL-separated entries), not two processes
	# per process on the host: the scan ran for each stop and dominated the suite on a busy host.
	for e in $(grep -lzx "APPTAINER_INSTANCE=$1" /proc/[0-9]*/environ 2>/dev/null); do
		p=${e%/environ}
		kill -9 "${p#/proc/}" 2>/dev/null
	done
}

map_path() {
	while IFS= read -r b; do
		src=${b%%:*}; rest=${b#*:}; dst=${rest%%:*}
		case "$1" in
		"$dst") printf '%s' "$src"; return;;
		"$dst"/*) printf '%s%s' "$src" "${1#"$dst"}"; return;;
		esac
	done < "$d/binds"
	printf '%s' "$1"
}

case "$1" in
version)
	echo "apptainer version 1.3.0-fake"
	;;
build)
	[ -n "$FAKE_BUILD_FAIL" ] && { echo "FATAL: build failed" >&2; exit 255; }
	printf 'fake sif of %s\n' "$3" > "$2"
	;;
instance)
	case "$2" in
	start)
		shift 2; binds=""; flags=""
		while [ $# -gt 2 ]; do
			case "$1" in
			-B|--bind) binds="$binds$2
"; shift 2;;
			--pids-limit)
				[ -n "$FAKE_NO_PIDS_LIMIT" ] && { echo "FATAL: cgroups not delegated" >&2; exit 255; }
				flags="$flags $1 $2"; shift 2;;
			--network|--overlay) flags="$flags $1 $2"; shift 2;;
			--containall|--no-home|--no-privs|--net|--writable-tmpfs) flags="$flags $1"; shift;;
			*) echo "Error: unknown flag: $1" >&2; exit 2;;
			esac
		done
		img=$1; name=$2; d="$R/instances/$name"
		[ -e "$img" ] || { echo "FATAL: could not open image $img" >&2; exit 255; }
		mkdir "$d" 2>/dev/null || { echo "FATAL: instance $name already exists" >&2; exit 255; }
		mkdir -p "$d/tmp"
		[ -n "$FAKE_START_DELAY" ] && sleep "$FAKE_START_DELAY"
		printf '%s%s:/tmp\n' "$binds" "$d/tmp" > "$d/binds"
		printf '%s' "$img" > "$d/img"
		printf '%s \n' "$flags" > "$d/flags"
		;;
	list)
		printf '{"instances":['
		sep=
		for d in "$R"/instances/*; do
			[ -d "$d" ] || continue
			printf '%s{"instance":"%s","pid":1,"img":"%s"}' "$sep" "${d##*/}" "$(cat "$d/img")"
			sep=,
		done
		printf ']}\n'
		;;
	stop)
		shift 2
		while [ $# -gt 1 ]; do case "$1" in -t) shift 2;; -F) shift;; *) echo "Error: unknown flag: $1" >&2; exit 2;; esac; done
		d="$R/instances/$1"
		[ -d "$d" ] || { echo "FATAL: no instance found" >&2; exit 255; }
		kill_instance "$1"
		rm -rf "$d"
		;;
	*) echo "fake: instance $2?" >&2; exit 2;;
	esac
	;;
exec)
	shift; envfile=
	while [ $# -gt 0 ]; do
		case "$1" in
		--cleanenv) shift;;
		--env-file) envfile=$2; shift 2;;
		instance://*) name=${1#instance://}; shift; break;;
		*) echo "fake: unexpected exec argument $1" >&2; exit 2;;
		esac
	done
	d="$R/instances/$name"
	[ -d "$d" ] || { echo "FATAL: instance $name does not exist" >&2; exit 255; }
	n=$#
	while [ $n -gt 0 ]; do a=$(map_path "$1"); shift; set -- "$@" "$a"; n=$((n-1)); done
	ns=-rm
	case "$(cat "$d/flags")" in *" --network none "*) ns=-rmn;; esac
	exec unshare $ns "$0" __inner "$d" "$name" "$envfile" "$@"
	;;
__inner)
	# In a new mount namespace: the instance's private /tmp also at /mnt (the suite's
	# scratch directory), then a clean environment.
	d=$2; name=$3; envfile=$4; shift 4
	cd "$d" || exit 255
	mount --bind "$d/tmp" /mnt || exit 255
	# Like apptainer, inject APPTAINERENV_X as X despite --cleanenv (the backend must strip them).
	inject=$(env | sed -n 's/^APPTAINERENV_\([A-Za-z_][A-Za-z0-9_]*=[^ ]*\)$/\1/p')
	exec env -i PATH="$PATH" HOME="$d" APPTAINER_INSTANCE="$name" $inject sh -c 'if [ -n "$1" ]; then set -a; . "$1" || exit 255; set +a; fi; shift; exec "$@"' fake-apptainer "$envfile" "$@"
	;;
*)
	echo "fake: unknown command $1" >&2; exit 2
	;;
esac
`

// fake is one fake runtime: its executable and its instance registry.
type fake struct {
	exe      string
	registry string
}

// newFake writes the fake runtime into a temporary directory under the given file name.
func newFake(t testing.TB, name string) *fake {
	t.Helper()
	dir := t.TempDir()
	reg := filepath.Join(dir, "registry")
	if err := os.MkdirAll(reg, 0o700); err != nil {
		t.Fatal(err)
	}
	exe := filepath.Join(dir, "bin", name)
	os.MkdirAll(filepath.Dir(exe), 0o700)
	script := strings.Replace(fakeScript, "@REGISTRY@", sandbox.ShellQuote(reg), 1)
	if err := os.WriteFile(exe, []byte(script), 0o700); err != nil {
		t.Fatal(err)
	}
	return &fake{exe: exe, registry: reg}
}

// calls returns every recorded call of the fake runtime.
func (f *fake) calls(t testing.TB) []string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(f.registry, "calls.log"))
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	return strings.Split(strings.TrimSpace(string(b)), "\n")
}

// testImage writes a stand-in SIF file.
func testImage(t testing.TB) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "image.sif")
	if err := os.WriteFile(p, []byte("fake sif\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// fakeSetup is a fake runtime, an image and a state directory shared by the backends of one
// test (a new backend behaves like a new process).
type fakeSetup struct {
	fake    *fake
	image   string
	state   string
	environ []string
	tweak   func(*config.Config)
}

func newFakeSetup(t testing.TB) *fakeSetup {
	needNamespaces(t)
	testenv.AgentBinary(t)
	return &fakeSetup{fake: newFake(t, "apptainer"), image: testImage(t), state: t.TempDir()}
}

func (s *fakeSetup) config() *config.Config {
	cfg := config.NewConfig()
	cfg.Singularity.Image = s.image
	cfg.Singularity.Executable = s.fake.exe
	if s.tweak != nil {
		s.tweak(cfg)
	}
	return cfg
}

func (s *fakeSetup) backend(t testing.TB) *Backend {
	t.Helper()
	cfg := s.config()
	b, err := New(cfg.Singularity, cfg.BackendOptions(sandbox.FactoryOptions{StateDir: s.state, Environ: s.environ}))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	return b.(*Backend)
}

// needNamespaces skips (or, with HERMES_SANDBOX_TEST_REQUIRE=userns, fails) a test that runs
// the helper through the fake runtime when this host cannot give it a private /tmp in an
// unprivileged user and mount namespace (unshare -rm and a bind mount over /mnt).
func needNamespaces(t testing.TB) {
	t.Helper()
	dir := t.TempDir()
	cmd := exec.Command("unshare", "-rmn", "sh", "-c", `mount --bind "$1" /mnt`, "probe", dir)
	cmd.Dir = dir
	if out, err := cmd.CombinedOutput(); err != nil {
		testenv.Missing(t, "userns", fmt.Sprintf("the fake runtime needs unprivileged user, mount and network namespaces for a private /tmp and no network: unshare -rmn: %v: %s", err, bytes.TrimSpace(out)))
	}
}
