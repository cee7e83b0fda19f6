// Package shellwrap holds the shell scripts that backends use where the sandbox helper cannot
// run and each command is its own process started by the provider (a Modal Exec, a Daytona
// toolbox session): a wrapper that keeps `cd` and `export` in a state file across commands, a
// kill of a command's whole process tree found from a pid file, and a parser for the state
// file. They need only a POSIX shell and /proc.
package shellwrap

import (
	"context"
	"fmt"
	"regexp"
	"strings"
	"time"

	"mvdan.cc/sh/v3/expand"
	"mvdan.cc/sh/v3/syntax"
)

// Wrapper is run as `sh -c WRAPPER sh STATE PIDFILE MODE PAYLOAD [ARGS…]` (relative STATE and
// PIDFILE are under $HOME). It restores the
// session's directory and exported variables from the state file STATE, runs the command in
// the same shell and saves them again on exit, even after `exit N`. MODE is "eval" (PAYLOAD is
// a script), "file" (PAYLOAD is a script file to source) or "argv" (ARGS are the program and
// its arguments). It writes its pid to PIDFILE first, for KillTree.
//
// Variables it reads from its environment:
//   - HERMES_FB_CMDENV: names of variables set for this command only. Their values are applied
//     after the state is restored (so they win over the session's), and they are not saved.
//   - HERMES_FB_DIR: the directory to run in (relative to the session's).
//   - HERMES_FB_NODIR: a file to create, before exiting 1, when HERMES_FB_DIR cannot be entered.
//     Without it a missing directory is reported by cd and the command runs where it is.
//
// The saved state is STATE (`export -p`, with HERMES_FB_PWD the directory) and STATE.cwd,
// each replaced whole by a rename, so concurrent commands of one session never mix them. The
// state is saved when the command returns, and by an exit trap when it calls exit, so a script
// that sets its own EXIT trap keeps its cd and export. PIDFILE is removed once the state is
// saved: a PIDFILE left behind by a command that was not killed means its state could not be
// saved (a full or unwritable disk, or the script left through exec or through exit with its
// own EXIT trap).
const Wrapper = `__hermes_st=$1; pf=$2; mode=$3; payload=$4; shift 4
case $__hermes_st in /*) ;; *) __hermes_st=$HOME/$__hermes_st pf=$HOME/$pf ;; esac
mkdir -p "${__hermes_st%/*}" 2>/dev/null; echo $$ > "$pf"
__hs_save() { __hs_rc=$?; if [ -z "${__hs_saved-}" ]; then __hs_saved=1; for __hs_n in ${HERMES_FB_CMDENV-}; do unset "$__hs_n"; done; unset HERMES_FB_CMDENV; HERMES_FB_PWD=$PWD; export HERMES_FB_PWD; if { { export -p; } > "$__hermes_st.$$" && mv -f "$__hermes_st.$$" "$__hermes_st" && printf '%s' "$PWD" > "$__hermes_st.cwd.$$" && mv -f "$__hermes_st.cwd.$$" "$__hermes_st.cwd"; } 2>/dev/null; then rm -f "$pf"; else rm -f "$__hermes_st.$$" "$__hermes_st.cwd.$$" 2>/dev/null; fi; fi; exit $__hs_rc; }
for __hs_n in $HERMES_FB_CMDENV; do eval "__hs_v_$__hs_n=\${$__hs_n-}"; done
[ -r "$__hermes_st" ] && . "$__hermes_st"
for __hs_n in $HERMES_FB_CMDENV; do eval "$__hs_n=\$__hs_v_$__hs_n; export $__hs_n; unset __hs_v_$__hs_n"; done
[ -n "$HERMES_FB_PWD" ] && cd "$HERMES_FB_PWD" 2>/dev/null
if [ -n "$HERMES_FB_DIR" ] && ! cd "$HERMES_FB_DIR"; then [ -n "$HERMES_FB_NODIR" ] && { : > "$HERMES_FB_NODIR"; rm -f "$pf"; exit 1; }; fi
unset HERMES_FB_PWD HERMES_FB_DIR HERMES_FB_NODIR
trap __hs_save EXIT
case $mode in
eval) eval "$payload" ;;
file) . "$payload" ;;
argv) ( exec "$@" ) ;;
esac
__hs_save`

// StateNotSavedReason explains a command whose PIDFILE the wrapper left behind.
const StateNotSavedReason = "the shell could not write them to the session's state file (is the disk full?), or the script left through exec or through exit with its own EXIT trap"

// KillTree is run as `sh -c KILLTREE sh PIDFILE`: it stops, then kills, the process whose pid
// is in PIDFILE and all its descendants (found through /proc, so also those that moved to a
// session of their own). A missing PIDFILE is nothing to kill.
const KillTree = `tree() { echo "$1"; for f in /proc/[0-9]*/stat; do read -r l 2>/dev/null <"$f" || continue; r=${l##*) }; r=${r#* }; pp=${r%% *}; p=${f#/proc/}; p=${p%/stat}; [ "$pp" = "$1" ] && tree "$p"; done; }
pid=$(cat "$1" 2>/dev/null) || exit 0
for p in $(tree "$pid"); do kill -STOP "$p" 2>/dev/null; done
for p in $(tree "$pid"); do kill -KILL "$p" 2>/dev/null; done
kill -KILL "$pid" 2>/dev/null; exit 0`

var envName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// ValidName reports whether name can be a per-command variable (HERMES_FB_CMDENV holds names
// separated by spaces, and the wrapper evaluates them).
func ValidName(name string) bool { return envName.MatchString(name) }

// CheckNames returns an error naming the first variable name the wrapper cannot carry.
func CheckNames(env map[string]string) error {
	for k := range env {
		if !ValidName(k) {
			return fmt.Errorf("environment name %q: only shell identifiers can be passed to a command here", k)
		}
	}
	return nil
}

// ParseExports reads `export -p` output (export NAME='value', or declare -x NAME="value").
func ParseExports(text string) (map[string]string, error) {
	file, err := syntax.NewParser().Parse(strings.NewReader(text), "shell.env")
	if err != nil {
		return nil, err
	}
	env := map[string]string{}
	for _, st := range file.Stmts {
		switch x := st.Cmd.(type) {
		case *syntax.DeclClause:
			for _, as := range x.Args {
				if as.Name == nil || as.Naked && as.Value == nil {
					continue
				}
				v := ""
				if as.Value != nil {
					if v, err = expand.Literal(&expand.Config{}, as.Value); err != nil {
						return nil, err
					}
				}
				env[as.Name.Value] = v
			}
		case *syntax.CallExpr:
			for _, w := range x.Args[min(1, len(x.Args)):] {
				lit, err := expand.Literal(&expand.Config{}, w)
				if err != nil {
					return nil, err
				}
				if k, v, ok := strings.Cut(lit, "="); ok {
					env[k] = v
				}
			}
		}
	}
	return env, nil
}

// Await waits for a per-command fallback's command to end (done), for its timeout (0: none)
// or for ctx, whichever comes first, and says which.
func Await[T any](ctx context.Context, timeout time.Duration, done <-chan T) (v T, timedOut, interrupted bool) {
	var expired <-chan time.Time
	if timeout > 0 {
		t := time.NewTimer(timeout)
		defer t.Stop()
		expired = t.C
	}
	select {
	case v = <-done:
	case <-expired:
		timedOut = true
	case <-ctx.Done():
		interrupted = true
	}
	return v, timedOut, interrupted
}
