package ssh

import (
	"bytes"
	"fmt"
	"io"
	"sort"
	"strings"

	"github.com/hermes-sandbox/hermes-sandbox/internal/shellwrap"
)

// The plain-shell protocol, used where the helper cannot run. One long-lived `/bin/sh` per
// channel reads commands on stdin. Each command is a call to __hr with a fresh random token
// given as two halves, so the token never appears whole in what is sent and the command's
// own output cannot forge it. The command runs in its own session (setsid), with the session
// state (exported environment and directory) restored from files in the remote state
// directory and saved again by an EXIT trap. The shell prints, on stdout, TOKEN S pid when
// the command starts and TOKEN E rc fresh nodir cwd TOKEN when it ends; on stderr TOKEN E.
// Timeouts and cancellation kill the process tree from a second channel (__hk). The shell's
// own diagnostics (job notices such as "Terminated") go to /dev/null; fd 3 is the channel's
// stderr, which commands get as their fd 2, and fd 4 its stdin. Nothing is sent on stdin
// while a command runs, so a watcher reads it: end of input means the caller is gone (its
// channel or connection closed), and the watcher kills the command's tree.
//
// Why this is not shellwrap.Run: Run starts each command as a process of its own, and learns
// its end, its exit code and its output from the provider that started it. Here one shell,
// started once per channel, runs every command: a command is a line on that shell's stdin,
// its start and end are tokens in a shared stdout and stderr, its input comes through a FIFO
// fed over a second channel, and the caller's going is that stdin's end, which only a shell
// that is already running can watch (a provider's exec could not see it without a channel
// held open per command). The state also differs: it is restored into a fresh environment
// (env -i) so that an unset survives, and a per-command variable is dropped only when the
// command left it as it was given, which shellwrap.Wrapper's HERMES_FB_CMDENV does not
// model. What this protocol shares with Run is what does not depend on the transport:
// shellwrap.ValidName for the variables it can carry, shellwrap.ParseExports for the saved
// state (shellstate.go) and sandbox.Capture for the output.

// shellPrologue defines the functions; %s is the session's state directory as a shell word.
const shellPrologue = `exec 3>&2 2>/dev/null 4<&0
__hs=/bin/sh; [ -x /bin/bash ] && __hs=/bin/bash
__hss=; command -v setsid >/dev/null 2>&1 && __hss=setsid
__hsd=%s
mkdir -p "$__hsd" && chmod 700 "$__hsd" "$__hsd/.." "$__hsd/../.." 2>/dev/null
%s
__hr() {
  [ -d "$__hsd" ] || mkdir -p "$__hsd"
  __f="$__hsd/run-$1"
  printf '%%s' "$5" >"$__f.sh" && printf '%%s' "$6" >"$__f.w" || { printf '%%s%%sE%%s %%s %%s %%s%%s%%s\n' "$2" "$3" 125 0 0 "" "$2" "$3"; printf '%%s%%sE\n' "$2" "$3" >&3; return; }
  __fr=1; [ -f "$__hsd/shell.env" ] && __fr=0
  __in=/dev/null
  if [ "$4" = 1 ]; then rm -f "$__f.in"; mkfifo -m 600 "$__f.in" && __in="$__f.in"; fi
  if [ $__fr = 0 ]; then $__hss env -i "$__hs" "$__f.w" "$__f" <"$__in" 2>&3 3>&- 4<&- &
  else $__hss "$__hs" "$__f.w" "$__f" <"$__in" 2>&3 3>&- 4<&- &
  fi
  __p=$!
  ( read -r __x || { trap '' TERM; __hk "$__p"; } ) <&4 >/dev/null 3>&- 4<&- &
  __wp=$!
  printf '%%s%%sS%%s\n' "$2" "$3" "$__p"
  wait "$__p"; __rc=$?
  kill "$__wp" 2>/dev/null; wait "$__wp"
  kill -9 -"$__p" 2>/dev/null
  if [ "$4" = 1 ]; then exec 9<>"$__f.in"; rm -f "$__f.in"; exec 9<&-; fi
  __c=; __nd=0
  if [ -f "$__f.cwd" ]; then IFS= read -r __c <"$__f.cwd" || :; mv -f "$__f.env" "$__hsd/shell.env"; mv -f "$__f.cwd" "$__hsd/shell.cwd"; fi
  [ -f "$__f.nodir" ] && __nd=1
  rm -f "$__f.sh" "$__f.w" "$__f.nodir" "$__f.env" "$__f.cwd"
  printf '%%s%%sE%%s %%s %%s %%s%%s%%s\n' "$2" "$3" "$__rc" "$__fr" "$__nd" "$__c" "$2" "$3"
  printf '%%s%%sE\n' "$2" "$3" >&3
}
__hj() {
  __ta=$2; __tb=$3
  mkdir -p "$1" && printf '%%s' "$4" >"$1/script.sh" && printf '%%s' "$5" >"$1/run.w" || { printf '%%s%%sJ0 0%%s%%s\n' "$__ta" "$__tb" "$__ta" "$__tb"; printf '%%s%%sE\n' "$__ta" "$__tb" >&3; return; }
  if [ -f "$__hsd/shell.env" ]; then $__hss env -i "$__hs" "$1/run.w" "$1" </dev/null >/dev/null 2>&1 3>&- 4<&- &
  else $__hss "$__hs" "$1/run.w" "$1" </dev/null >/dev/null 2>&1 3>&- 4<&- &
  fi
  __p=$!; __t=0
  if [ -r "/proc/$__p/stat" ]; then IFS= read -r __l <"/proc/$__p/stat"; __l=${__l##*) }; set -- $__l; __t=${20}; fi
  printf '%%s%%sJ%%s %%s%%s%%s\n' "$__ta" "$__tb" "$__p" "$__t" "$__ta" "$__tb"
  printf '%%s%%sE\n' "$__ta" "$__tb" >&3
}
`

// killFuncs defines __hk PID: stop, then kill, PID's process group and every descendant of
// PID (also those that made a process group of their own), from /proc or ps.
const killFuncs = `__hps() {
  if [ -r /proc/self/stat ]; then
    for __s in /proc/[0-9]*/stat; do
      IFS= read -r __l <"$__s" 2>/dev/null || continue
      __q=${__s#/proc/}; __q=${__q%/stat}
      __l=${__l##*) }
      set -- $__l
      echo "$__q $2 $3"
    done
  else
    ps -A -o pid= -o ppid= -o pgid= 2>/dev/null || ps -o pid= -o ppid= -o pgid=
  fi
}
__hk() {
  __kt=" $1 "; __kn=0
  kill -STOP -"$1" 2>/dev/null; kill -STOP "$1" 2>/dev/null
  while [ $__kn -lt 30 ]; do
    __kn=$((__kn+1)); __knew=0
    __kl=$(__hps)
    while read -r __a __b __c; do
      case "$__kt" in *" $__a "*) continue;; esac
      __ok=0
      case "$__kt" in *" $__b "*) __ok=1;; esac
      [ "$__c" = "$1" ] && __ok=1
      if [ $__ok = 1 ]; then __kt="$__kt$__a "; kill -STOP "$__a" 2>/dev/null; __knew=1; fi
    done <<__HERMES_EOF__
$__kl
__HERMES_EOF__
    [ $__knew = 0 ] && break
  done
  for __a in $__kt; do kill -KILL "$__a" 2>/dev/null; done
  kill -KILL -"$1" 2>/dev/null
  return 0
}
`

// syncCommand makes the shell print TOKEN Y statedir TOKEN home TOKEN hasstate TOKEN on
// stdout and TOKEN Y on stderr, after whatever rc files printed.
func syncCommand(ta, tb string) string {
	return fmt.Sprintf(`__hst=0; [ -f "$__hsd/shell.env" ] && __hst=1; printf '%%s%%sY%%s%%s%%s%%s%%s%%s%%s%%s%%s\n' %s %s "$__hsd" %s %s "$HOME" %s %s "$__hst" %s %s; printf '%%s%%sY\n' %s %s >&3`+"\n",
		ta, tb, ta, tb, ta, tb, ta, tb, ta, tb)
}

// shellPath renders a remote path for a script: ~ and ~/x become "$HOME"/x, anything else is
// quoted.
func shellPath(p string) string {
	switch {
	case p == "~":
		return `"$HOME"`
	case strings.HasPrefix(p, "~/"):
		return `"$HOME"/` + shq(p[2:])
	}
	return shq(p)
}

// wrapperSpec describes the script that runs one command in the plain-shell protocol.
type wrapperSpec struct {
	stateDir   string // shell word
	initialCwd string // shell word
	dir        string // shell word, or ""
	env        map[string]string
	argv       []string // set for an argv command
	job        bool     // a background job: output to files in the job directory ($1)
	jobTimeout int64    // a job's lifetime in whole seconds (0 = none)
}

// wrapper generates the per-command script. $1 is the command's file prefix (or the job
// directory).
func (w wrapperSpec) wrapper() (string, error) {
	var b strings.Builder
	b.WriteString("__hf=$1; __hsd=" + w.stateDir + "\n")
	b.WriteString(`if [ -f "$__hsd/shell.env" ]; then . "$__hsd/shell.env"; else [ -d ` + w.initialCwd + ` ] || mkdir -p ` + w.initialCwd + ` 2>/dev/null; fi` + "\n")
	b.WriteString("__hc=${__HERMES_CWD-}; unset __HERMES_CWD\n")
	b.WriteString(`{ [ -n "$__hc" ] && cd -- "$__hc"; } 2>/dev/null || cd -- ` + w.initialCwd + ` 2>/dev/null || cd -- "$HOME" 2>/dev/null || cd /` + "\n")
	if w.dir != "" {
		if w.job {
			b.WriteString("cd -- " + w.dir + ` 2>/dev/null || { echo "hermes: no such directory: "` + w.dir + ` >"$__hf/stderr"; echo 1 >"$__hf/exit"; exit 1; }` + "\n")
		} else {
			b.WriteString("cd -- " + w.dir + ` 2>/dev/null || { : >"$__hf.nodir"; exit 1; }` + "\n")
		}
	}
	names := make([]string, 0, len(w.env))
	for k := range w.env {
		if !shellwrap.ValidName(k) {
			return "", fmt.Errorf("environment name %q: the plain-shell protocol takes only shell identifiers", k)
		}
		names = append(names, k)
	}
	sort.Strings(names)
	var restore strings.Builder
	for i, k := range names {
		v := shq(w.env[k])
		fmt.Fprintf(&b, "__ho%d=${%s+x}; __hv%d=${%s-}; %s=%s; export %s\n", i, k, i, k, k, v, k)
		// A per-command variable does not carry over unless the command changed it.
		fmt.Fprintf(&restore, "  if [ -n \"${%s+x}\" ] && [ \"$%s\" = %s ]; then if [ -n \"$__ho%d\" ]; then %s=$__hv%d; export %s; else unset %s; fi; fi\n",
			k, k, v, i, k, i, k, k)
	}
	switch {
	case w.job && w.jobTimeout > 0:
		// A sleep is the clock: the job kills it when it ends first; when it ends first, the
		// job is recorded as timed out (124) and its whole process group (its own session)
		// is killed, this shell included.
		fmt.Fprintf(&b, "sleep %d </dev/null >/dev/null 2>&1 & __hw=$!\n", w.jobTimeout)
		b.WriteString(`{ ( . "$__hf/script.sh" ) </dev/null >"$__hf/stdout" 2>"$__hf/stderr"; echo $? >"$__hf/exit.tmp" && mv -f "$__hf/exit.tmp" "$__hf/exit"; kill $__hw 2>/dev/null; } &` + "\n")
		b.WriteString(`wait $__hw` + "\n")
		b.WriteString(`if [ ! -e "$__hf/exit" ]; then : >"$__hf/timedout"; echo 124 >"$__hf/exit.tmp" && mv -f "$__hf/exit.tmp" "$__hf/exit"; kill -KILL 0; fi` + "\n")
	case w.job:
		b.WriteString(`( . "$__hf/script.sh" ) </dev/null >"$__hf/stdout" 2>"$__hf/stderr"` + "\n")
		b.WriteString(`echo $? >"$__hf/exit.tmp" && mv -f "$__hf/exit.tmp" "$__hf/exit"` + "\n")
	case len(w.argv) > 0:
		words := make([]string, len(w.argv))
		for i, a := range w.argv {
			words[i] = shq(a)
		}
		b.WriteString("exec " + strings.Join(words, " ") + "\n")
	default:
		// The state is saved when the script returns, and by the EXIT trap when it calls exit,
		// so a script that sets its own EXIT trap keeps its cd and export. A save that fails
		// (a full disk) leaves no .cwd file, which the caller reports as state not saved.
		b.WriteString("__hermes_st=$__hf\n")
		b.WriteString("__hermes_save() {\n  __hermes_rc=$?\n  if [ -z \"${__hermes_saved-}\" ]; then\n  __hermes_saved=1\n")
		b.WriteString(restore.String())
		b.WriteString("  __HERMES_CWD=$PWD; export __HERMES_CWD\n")
		b.WriteString(`  { { export -p; } >"$__hermes_st.env" && printf '%s' "$PWD" >"$__hermes_st.cwd"; } 2>/dev/null || rm -f "$__hermes_st.env" "$__hermes_st.cwd" 2>/dev/null` + "\n")
		b.WriteString("  fi\n  exit $__hermes_rc\n}\n")
		b.WriteString("trap __hermes_save EXIT\n")
		b.WriteString(`. "$__hf.sh"` + "\n")
		b.WriteString("__hermes_save\n")
	}
	return b.String(), nil
}

// stream reads one of a shell channel's output streams and splits it at tokens.
type stream struct {
	r       io.Reader
	buf     []byte
	scratch []byte
	err     error
}

func newStream(r io.Reader) *stream { return &stream{r: r, scratch: make([]byte, 32<<10)} }

func (s *stream) fill() error {
	if s.err != nil {
		return s.err
	}
	n, err := s.r.Read(s.scratch)
	s.buf = append(s.buf, s.scratch[:n]...)
	if err != nil {
		s.err = err
		if n == 0 {
			return err
		}
	}
	return nil
}

// until passes bytes to w (which must copy them) up to tok, and consumes tok. Only a tail
// that could start the token is held back, so output streams without delay.
func (s *stream) until(tok []byte, w func([]byte)) error {
	for {
		if i := bytes.Index(s.buf, tok); i >= 0 {
			if w != nil && i > 0 {
				w(s.buf[:i])
			}
			s.buf = s.buf[i+len(tok):]
			return nil
		}
		keep := 0
		for k := min(len(s.buf), len(tok)-1); k > 0; k-- {
			if bytes.HasSuffix(s.buf, tok[:k]) {
				keep = k
				break
			}
		}
		if n := len(s.buf) - keep; n > 0 {
			if w != nil {
				w(s.buf[:n])
			}
			s.buf = append(s.buf[:0], s.buf[n:]...)
		}
		if err := s.fill(); err != nil {
			return err
		}
	}
}

// readByte returns the next byte.
func (s *stream) readByte() (byte, error) {
	for len(s.buf) == 0 {
		if err := s.fill(); err != nil {
			return 0, err
		}
	}
	c := s.buf[0]
	s.buf = s.buf[1:]
	return c, nil
}

// collect returns the bytes up to tok.
func (s *stream) collect(tok []byte) ([]byte, error) {
	var out []byte
	err := s.until(tok, func(p []byte) { out = append(out, p...) })
	return out, err
}
