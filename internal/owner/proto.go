// Package owner keeps a session's backend warm between CLI processes, as ssh's ControlMaster
// does for connections. The first `hermes-sandbox exec` starts a detached owner process; later
// exec processes hand it their command line, environment and standard streams over a private
// unix socket and exit with the code it sends back. The owner runs the command through the
// same CLI code (config, gate, approvals, audit) as an in-process run, so those stay one layer.
//
// The owner is keyed by everything that can change what a run does: the user, the binary, the
// working directory, the environment and the process context (credentials, umask,
// confinement, namespaces, cgroup, limits, nice). A call that differs in any of them reaches a
// different owner, and the owner checks every part of the key against the connecting process
// itself (VerifyPeer), so neither a hash collision nor a lying client makes a call run in a
// context other than its own.
//
// The client half (Forward) imports only the standard library's low-level packages: it runs
// from package early's init, before the rest of the binary has initialised, which is what
// makes a warm exec cost a few milliseconds instead of the binary's full start.
package owner

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"slices"
	"strconv"
	"strings"
)

// Frame types. Client to owner: hello (or forget), stdin, stdinEOF, signal, ttyAnswer. Owner to client:
// stdout, stderr, wantStdin, ttyPrompt, started, exit, fallback.
const (
	FrameHello     byte = 'H'
	FrameStdin     byte = 'i'
	FrameStdinEOF  byte = 'e'
	FrameSignal    byte = 's'
	FrameTTYAnswer byte = 'a'
	// FrameForget, instead of a hello, says a session was removed (EncodeForget).
	FrameForget byte = 'F'

	FrameStdout    byte = 'o'
	FrameStderr    byte = 'r'
	FrameWantStdin byte = 'w'
	FrameTTYPrompt byte = 'p'
	FrameStarted   byte = 'S'
	FrameExit      byte = 'x'
	FrameFallback  byte = 'f'
)

// maxFrame bounds one frame's payload; a larger one is a protocol error.
const maxFrame = 16 << 20

func WriteFrame(w io.Writer, typ byte, payload []byte) error {
	if len(payload) > maxFrame {
		return fmt.Errorf("owner: frame of %d bytes is over the %d limit", len(payload), maxFrame)
	}
	buf := make([]byte, 5+len(payload))
	buf[0] = typ
	binary.BigEndian.PutUint32(buf[1:5], uint32(len(payload)))
	copy(buf[5:], payload)
	_, err := w.Write(buf)
	return err
}

func ReadFrame(r io.Reader) (byte, []byte, error) {
	var h [5]byte
	if _, err := io.ReadFull(r, h[:]); err != nil {
		return 0, nil, err
	}
	n := binary.BigEndian.Uint32(h[1:])
	if n > maxFrame {
		return 0, nil, fmt.Errorf("owner: frame of %d bytes is over the %d limit", n, maxFrame)
	}
	p := make([]byte, n)
	if _, err := io.ReadFull(r, p); err != nil {
		return 0, nil, err
	}
	return h[0], p, nil
}

// Hello is what a client sends first: its command line and everything its key is made of.
type Hello struct {
	Args    []string // the command line after the program name
	Environ []string // the whole environment, as os.Environ
	Key     Key
	// StdinTTY says the client's standard input is a terminal (then it is not forwarded).
	StdinTTY bool
	// TTY says the client has a controlling terminal for approval prompts.
	TTY bool
}

// Key is what decides which owner may serve a call.
type Key struct {
	UID int
	Exe string // the binary's path, device, inode, size and mtime
	Cwd string // the working directory's path, device and inode
	// Ctx is the process context: credentials, umask, capabilities, no_new_privs, seccomp,
	// namespaces, cgroup, limits and nice (procContext).
	Ctx string
	Env []string // the environment without the variables that shells change on their own
}

// volatileEnv are variables shells change between calls without changing what a run does.
var volatileEnv = []string{"_", "OLDPWD", "PWD", "SHLVL"}

// CurrentKey is this process's key.
func CurrentKey(environ []string) (Key, error) {
	k, _, err := currentKey(environ)
	return k, err
}

// NewHello is this process's call: its command line, environment and key, and whether it
// has a controlling terminal (read with the key's process context, once).
func NewHello(args, environ []string, stdinTTY bool) (Hello, error) {
	k, tty, err := currentKey(environ)
	if err != nil {
		return Hello{}, err
	}
	return Hello{Args: args, Environ: environ, Key: k, StdinTTY: stdinTTY, TTY: tty}, nil
}

func currentKey(environ []string) (Key, bool, error) {
	exe, err := exeIdentity("self")
	if err != nil {
		return Key{}, false, err
	}
	wd, err := os.Getwd()
	if err != nil {
		return Key{}, false, err
	}
	cwd, err := cwdIdentity("self", wd)
	if err != nil {
		return Key{}, false, err
	}
	ctx, tty, err := procContext("self")
	if err != nil {
		return Key{}, false, err
	}
	return Key{UID: os.Getuid(), Exe: exe, Cwd: cwd, Ctx: ctx, Env: keyEnv(environ)}, tty, nil
}

func keyEnv(environ []string) []string {
	out := make([]string, 0, len(environ))
	for _, kv := range environ {
		k, _, _ := strings.Cut(kv, "=")
		if !slices.Contains(volatileEnv, k) {
			out = append(out, kv)
		}
	}
	slices.Sort(out)
	return out
}

// EnvMatches reports whether environ is the environment key k was made from.
func EnvMatches(environ []string, k Key) bool { return slices.Equal(keyEnv(environ), k.Env) }

// Equal reports whether two keys are the same.
func (k Key) Equal(o Key) bool {
	return k.UID == o.UID && k.Exe == o.Exe && k.Cwd == o.Cwd && k.Ctx == o.Ctx && slices.Equal(k.Env, o.Env)
}

// hash is a short FNV-1a hash of the key: it names the socket, and the owner checks the
// whole key.
func (k Key) hash() string {
	h := uint64(14695981039346656037)
	add := func(s string) {
		for i := 0; i < len(s); i++ {
			h ^= uint64(s[i])
			h *= 1099511628211
		}
		h ^= 0
		h *= 1099511628211
	}
	add(strconv.Itoa(k.UID))
	add(k.Exe)
	add(k.Cwd)
	add(k.Ctx)
	for _, e := range k.Env {
		add(e)
	}
	return fmt.Sprintf("%016x", h)
}

// Dir is the private directory (0700) that holds the owners' sockets: owners/ in the default
// state directory ($HERMES_SANDBOX_TERMINAL_STATE_DIR, else $XDG_STATE_HOME/hermes-sandbox,
// else ~/.local/state/hermes-sandbox). It is found from the environment alone, because the
// client looks for it before any configuration is read.
func Dir(environ []string) (string, error) {
	get := func(name string) string {
		for i := len(environ) - 1; i >= 0; i-- {
			if k, v, ok := strings.Cut(environ[i], "="); ok && k == name {
				return v
			}
		}
		return ""
	}
	home := get("HOME")
	if sd := get("HERMES_SANDBOX_TERMINAL_STATE_DIR"); sd != "" {
		if sd == "~" || strings.HasPrefix(sd, "~/") {
			if home == "" {
				return "", errors.New("owner: HOME is not set")
			}
			sd = path.Join(home, sd[1:])
		}
		return path.Join(sd, "owners"), nil
	}
	if x := get("XDG_STATE_HOME"); path.IsAbs(x) {
		return path.Join(x, "hermes-sandbox", "owners"), nil
	}
	if home == "" {
		return "", errors.New("owner: HOME is not set")
	}
	return path.Join(home, ".local", "state", "hermes-sandbox", "owners"), nil
}

// SocketPath is the socket of the owner for key k.
func SocketPath(environ []string, k Key) (string, error) {
	dir, err := Dir(environ)
	if err != nil {
		return "", err
	}
	return path.Join(dir, k.hash()+".sock"), nil
}

// EncodeHello and DecodeHello use a plain length-prefixed layout rather than a general
// encoding, to keep the client's imports small.
func EncodeHello(h Hello) []byte {
	var b []byte
	str := func(s string) {
		b = binary.BigEndian.AppendUint32(b, uint32(len(s)))
		b = append(b, s...)
	}
	list := func(l []string) {
		b = binary.BigEndian.AppendUint32(b, uint32(len(l)))
		for _, s := range l {
			str(s)
		}
	}
	flag := func(v bool) {
		if v {
			b = append(b, 1)
		} else {
			b = append(b, 0)
		}
	}
	list(h.Args)
	list(h.Environ)
	str(strconv.Itoa(h.Key.UID))
	str(h.Key.Exe)
	str(h.Key.Cwd)
	str(h.Key.Ctx)
	list(h.Key.Env)
	flag(h.StdinTTY)
	flag(h.TTY)
	return b
}

var errBadHello = errors.New("owner: malformed hello")

// EncodeForget and DecodeForget carry a FrameForget's backend and session ("" = all).
func EncodeForget(backend, session string) []byte {
	return EncodeHello(Hello{Args: []string{backend, session}})
}

func DecodeForget(b []byte) (backend, session string, err error) {
	h, err := DecodeHello(b)
	if err != nil || len(h.Args) != 2 {
		return "", "", errBadHello
	}
	return h.Args[0], h.Args[1], nil
}

func DecodeHello(b []byte) (Hello, error) {
	var h Hello
	bad := false
	str := func() string {
		if len(b) < 4 {
			bad = true
			return ""
		}
		n := binary.BigEndian.Uint32(b)
		b = b[4:]
		if uint64(n) > uint64(len(b)) {
			bad = true
			return ""
		}
		s := string(b[:n])
		b = b[n:]
		return s
	}
	list := func() []string {
		if len(b) < 4 {
			bad = true
			return nil
		}
		n := binary.BigEndian.Uint32(b)
		b = b[4:]
		if uint64(n) > uint64(len(b))/4 {
			bad = true
			return nil
		}
		l := make([]string, 0, n)
		for i := uint32(0); i < n && !bad; i++ {
			l = append(l, str())
		}
		return l
	}
	flag := func() bool {
		if len(b) < 1 {
			bad = true
			return false
		}
		v := b[0] == 1
		b = b[1:]
		return v
	}
	h.Args = list()
	h.Environ = list()
	uid, err1 := strconv.Atoi(str())
	h.Key.UID = uid
	h.Key.Exe = str()
	h.Key.Cwd = str()
	h.Key.Ctx = str()
	var err2 error
	h.Key.Env = list()
	h.StdinTTY = flag()
	h.TTY = flag()
	if bad || err1 != nil || err2 != nil || len(b) != 0 {
		return Hello{}, errBadHello
	}
	return h, nil
}

// IsExec reports whether a command line (without the program name) runs `exec`: the only
// subcommand an owner serves.
func IsExec(args []string) bool {
	for i := 0; i < len(args); i++ {
		a := args[i]
		switch {
		case a == "exec":
			return true
		case a == "--sandbox" || a == "--terminal" || a == "--config":
			i++ // the flag's value
		case strings.HasPrefix(a, "--sandbox=") || strings.HasPrefix(a, "--terminal=") || strings.HasPrefix(a, "--config="):
		default:
			return false
		}
	}
	return false
}
