//go:build linux

package owner

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math/rand"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"
)

// helloEqual compares two hellos, treating a nil list and an empty one as the same (the
// wire format does not tell them apart).
func helloEqual(a, b Hello) bool {
	return slices.Equal(a.Args, b.Args) && slices.Equal(a.Environ, b.Environ) && a.Key.Equal(b.Key) &&
		a.StdinTTY == b.StdinTTY && a.TTY == b.TTY
}

func sampleHello() Hello {
	return Hello{
		Args:     []string{"--sandbox", "dev", "exec", "--", "sh", "-c", "echo 'héllo wörld' && printf '\\0'"},
		Environ:  []string{"HOME=/home/x", "LANG=ja_JP.UTF-8", "GREETING=こんにちは", "EMPTY=", "WEIRD=a=b=c"},
		Key:      Key{UID: 1000, Exe: "/usr/bin/hermes-sandbox|123|456|789", Cwd: "/tmp/日本", Ctx: "Umask: 0022", Env: []string{"A=1", "B=2"}},
		StdinTTY: true,
		TTY:      false,
	}
}

func TestHelloRoundTrip(t *testing.T) {
	long := strings.Repeat("x", 70000)
	cases := map[string]Hello{
		"zero":          {},
		"empty lists":   {Args: []string{}, Environ: []string{}, Key: Key{Env: []string{}}},
		"empty strings": {Args: []string{"", ""}, Environ: []string{""}, Key: Key{Env: []string{""}}},
		"sample":        sampleHello(),
		"unicode and control bytes": {
			Args:    []string{"exec", "--", "echo", "🦀", "\x00\x01\xff", "line\nbreak"},
			Environ: []string{"Ω=ω", "TAB=\t"},
			Key:     Key{UID: 0, Exe: "ëxe", Cwd: "/ü", Ctx: "ctx", Env: []string{"Ω=ω"}},
		},
		"negative uid":  {Key: Key{UID: -1}},
		"long strings":  {Args: []string{long}, Key: Key{Cwd: long}},
		"flags tty":     {TTY: true},
		"flags stdin":   {StdinTTY: true},
		"flags both":    {TTY: true, StdinTTY: true},
		"many elements": {Args: slices.Repeat([]string{"a"}, 1000), Environ: slices.Repeat([]string{"K=V"}, 500)},
	}
	for name, h := range cases {
		t.Run(name, func(t *testing.T) {
			enc := EncodeHello(h)
			got, err := DecodeHello(enc)
			if err != nil {
				t.Fatalf("DecodeHello(EncodeHello(%+v)): %v", h, err)
			}
			if !helloEqual(got, h) {
				t.Fatalf("round trip changed the hello:\n got  %+v\n want %+v", got, h)
			}
			// Decoding does not alias the input: changing the buffer afterwards changes nothing.
			for i := range enc {
				enc[i] = 0xAA
			}
			if !helloEqual(got, h) {
				t.Fatalf("decoded hello aliases its input buffer")
			}
		})
	}
}

func TestHelloFlagsAreIndependent(t *testing.T) {
	for _, stdinTTY := range []bool{false, true} {
		for _, tty := range []bool{false, true} {
			h := Hello{Args: []string{"exec"}, StdinTTY: stdinTTY, TTY: tty}
			got, err := DecodeHello(EncodeHello(h))
			if err != nil {
				t.Fatal(err)
			}
			if got.StdinTTY != stdinTTY || got.TTY != tty {
				t.Errorf("flags (StdinTTY=%v, TTY=%v) came back as (%v, %v)", stdinTTY, tty, got.StdinTTY, got.TTY)
			}
		}
	}
}

func TestDecodeHelloRejectsEveryTruncation(t *testing.T) {
	for name, h := range map[string]Hello{"sample": sampleHello(), "zero": {}, "empty strings": {Args: []string{""}}} {
		enc := EncodeHello(h)
		for n := 0; n < len(enc); n++ {
			got, err := decodeNoPanic(t, enc[:n])
			if !errors.Is(err, errBadHello) {
				t.Fatalf("%s: DecodeHello of the first %d of %d bytes = (%+v, %v), want errBadHello", name, n, len(enc), got, err)
			}
			if !helloEqual(got, Hello{}) {
				t.Fatalf("%s: a rejected hello came back non-empty: %+v", name, got)
			}
		}
		// One byte too many is as bad as one too few.
		if _, err := decodeNoPanic(t, append(slices.Clone(enc), 0)); !errors.Is(err, errBadHello) {
			t.Fatalf("%s: trailing byte accepted: %v", name, err)
		}
	}
}

func TestDecodeHelloRejectsGarbage(t *testing.T) {
	u32 := func(n uint32) []byte { return binary.BigEndian.AppendUint32(nil, n) }
	cat := func(parts ...[]byte) []byte { return bytes.Join(parts, nil) }
	str := func(s string) []byte { return cat(u32(uint32(len(s))), []byte(s)) }
	// A valid hello from its parts, to spoil one part at a time.
	valid := func(uid, umask string) []byte {
		return cat(u32(0), u32(0), str(uid), str("exe"), str("cwd"), str(umask), u32(0), []byte{0, 0})
	}
	if _, err := DecodeHello(valid("1", "18")); err != nil {
		t.Fatalf("the hand-made hello is not valid: %v", err)
	}
	cases := map[string][]byte{
		"nil":                      nil,
		"huge list count":          cat(u32(0xFFFFFFFF), u32(0)),
		"list count over the rest": cat(u32(3), str("a"), str("b")),
		"huge string length":       cat(u32(1), u32(0xFFFFFFFF), []byte("abc")),
		"string over the rest":     cat(u32(1), u32(10), []byte("abc")),
		"uid not a number":         valid("abc", "18"),
		"uid empty":                valid("", "18"),
		"uid overflows int":        valid("99999999999999999999999", "18"),
		"missing flags":            valid("1", "18")[:len(valid("1", "18"))-2],
		"all ones":                 bytes.Repeat([]byte{0xFF}, 64),
	}
	for name, b := range cases {
		if _, err := decodeNoPanic(t, b); !errors.Is(err, errBadHello) {
			t.Errorf("%s: DecodeHello(%x) err = %v, want errBadHello", name, b, err)
		}
	}
	// Random garbage and random corruptions of a valid hello must never panic.
	rng := rand.New(rand.NewSource(1))
	enc := EncodeHello(sampleHello())
	for i := 0; i < 5000; i++ {
		var b []byte
		if i%2 == 0 {
			b = make([]byte, rng.Intn(200))
			rng.Read(b)
		} else {
			b = slices.Clone(enc)
			for j := 0; j < 1+rng.Intn(4); j++ {
				b[rng.Intn(len(b))] = byte(rng.Intn(256))
			}
			b = b[:rng.Intn(len(b)+1)]
		}
		_, _ = decodeNoPanic(t, b)
	}
}

func FuzzDecodeHello(f *testing.F) {
	f.Add(EncodeHello(sampleHello()))
	f.Add(EncodeHello(Hello{}))
	f.Add([]byte{0xFF, 0xFF, 0xFF, 0xFF})
	f.Fuzz(func(t *testing.T, b []byte) {
		h, err := decodeNoPanic(t, b)
		if err != nil {
			return
		}
		// Whatever decodes must survive another round trip unchanged.
		h2, err := DecodeHello(EncodeHello(h))
		if err != nil || !helloEqual(h, h2) {
			t.Fatalf("re-encoding a decoded hello: %v, %+v != %+v", err, h2, h)
		}
	})
}

func decodeNoPanic(t testing.TB, b []byte) (h Hello, err error) {
	t.Helper()
	defer func() {
		if r := recover(); r != nil {
			t.Fatalf("DecodeHello(%x) panicked: %v", b, r)
		}
	}()
	return DecodeHello(b)
}

func TestIsExec(t *testing.T) {
	cases := []struct {
		args []string
		want bool
	}{
		{[]string{"exec"}, true},
		{[]string{"exec", "--", "ls"}, true},
		{[]string{"--sandbox", "x", "exec", "ls"}, true},
		{[]string{"--sandbox=x", "exec"}, true},
		{[]string{"--terminal", "t", "exec"}, true},
		{[]string{"--terminal=t", "exec"}, true},
		{[]string{"--config", "f.yaml", "exec"}, true},
		{[]string{"--config=f.yaml", "--sandbox", "x", "exec"}, true},
		{[]string{"--sandbox", "exec", "exec"}, true}, // the first "exec" is the flag's value
		{[]string{"--sandbox", "exec"}, false},        // ... and here there is no subcommand
		{[]string{"version"}, false},
		{[]string{"version", "exec"}, false},
		{[]string{"--sandbox", "x"}, false},
		{[]string{"--sandbox"}, false},
		{[]string{"-v", "exec"}, false},
		{[]string{"--verbose", "exec"}, false},
		{[]string{"run", "--", "exec"}, false},
		{[]string{"execute"}, false},
		{[]string{"EXEC"}, false},
		{[]string{""}, false},
		{[]string{}, false},
		{nil, false},
	}
	for _, c := range cases {
		if got := IsExec(c.args); got != c.want {
			t.Errorf("IsExec(%q) = %v, want %v", c.args, got, c.want)
		}
	}
}

func TestKeyEqual(t *testing.T) {
	base := Key{UID: 1, Exe: "e", Cwd: "/c", Ctx: "c", Env: []string{"A=1", "B=2"}}
	if !base.Equal(base) {
		t.Fatal("a key is not equal to itself")
	}
	same := base
	same.Env = slices.Clone(base.Env)
	if !base.Equal(same) {
		t.Fatal("a key is not equal to its copy")
	}
	if !(Key{}).Equal(Key{Env: []string{}}) {
		t.Error("nil and empty Env differ")
	}
	for name, mut := range map[string]func(*Key){
		"UID":       func(k *Key) { k.UID = 2 },
		"Exe":       func(k *Key) { k.Exe = "f" },
		"Cwd":       func(k *Key) { k.Cwd = "/d" },
		"Ctx":       func(k *Key) { k.Ctx = "other" },
		"Env value": func(k *Key) { k.Env = []string{"A=1", "B=3"} },
		"Env extra": func(k *Key) { k.Env = []string{"A=1", "B=2", "C=3"} },
		"Env less":  func(k *Key) { k.Env = []string{"A=1"} },
		"Env nil":   func(k *Key) { k.Env = nil },
	} {
		k := base
		k.Env = slices.Clone(base.Env)
		mut(&k)
		if base.Equal(k) || k.Equal(base) {
			t.Errorf("keys that differ in %s are Equal", name)
		}
		if base.hash() == k.hash() {
			t.Errorf("keys that differ in %s hash the same", name)
		}
	}
}

func TestCurrentKey(t *testing.T) {
	env := []string{"HOME=/h", "PATH=/bin", "PWD=/a", "OLDPWD=/b", "SHLVL=1", "_=/usr/bin/x", "FOO=1"}
	k, err := CurrentKey(env)
	if err != nil {
		t.Fatal(err)
	}
	if k.UID != os.Getuid() {
		t.Errorf("UID = %d, want %d", k.UID, os.Getuid())
	}
	wd, _ := os.Getwd()
	var st syscall.Stat_t
	if err := syscall.Stat(".", &st); err != nil {
		t.Fatal(err)
	}
	if want := fmt.Sprintf("%s|%d:%d", wd, st.Dev, st.Ino); k.Cwd != want {
		t.Errorf("Cwd = %q, want %q (the path, and the directory's device and inode)", k.Cwd, want)
	}
	mask := syscall.Umask(0)
	syscall.Umask(mask)
	if want := fmt.Sprintf("Umask: %04o\n", mask); !strings.Contains(k.Ctx, want) {
		t.Errorf("Ctx = %q; want it to hold %q", k.Ctx, want)
	}
	exe, _ := os.Executable()
	if !strings.HasPrefix(k.Exe, exe+"|") || strings.Count(k.Exe, ":") != 3 {
		t.Errorf("Exe = %q, want %q with its device, inode, size and mtime", k.Exe, exe)
	}
	if want := []string{"FOO=1", "HOME=/h", "PATH=/bin"}; !slices.Equal(k.Env, want) {
		t.Errorf("Env = %q, want %q (sorted, without the volatile variables)", k.Env, want)
	}

	sock := func(env []string) string {
		k, err := CurrentKey(env)
		if err != nil {
			t.Fatal(err)
		}
		p, err := SocketPath([]string{"HOME=/h"}, k)
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	// Volatile variables, and the order of the environment, do not change the key.
	for _, other := range [][]string{
		{"HOME=/h", "PATH=/bin", "PWD=/elsewhere", "OLDPWD=/x", "SHLVL=7", "_=/bin/sh", "FOO=1"},
		{"FOO=1", "PATH=/bin", "HOME=/h"},
		{"_=", "FOO=1", "PATH=/bin", "HOME=/h", "SHLVL=2"},
	} {
		k2, err := CurrentKey(other)
		if err != nil {
			t.Fatal(err)
		}
		if !k.Equal(k2) {
			t.Errorf("CurrentKey(%q) differs from CurrentKey(%q): %q vs %q", other, env, k2.Env, k.Env)
		}
		if sock(other) != sock(env) {
			t.Errorf("environments %q and %q reach different sockets", other, env)
		}
	}
	// Any other variable does.
	for _, other := range [][]string{
		{"HOME=/h", "PATH=/bin", "FOO=2"},
		{"HOME=/h", "PATH=/bin", "FOO=1", "BAR=1"},
		{"HOME=/h", "PATH=/bin"},
		{"HOME=/h", "PATH=/bin", "FOO=1", "PWDX=1"},
		{"HOME=/h", "PATH=/bin", "FOO=1", "__=1"},
		{"HOME=/h", "PATH=/bin", "FOO=1", "pwd=/a"},
		{"HOME=/h", "PATH=/bin", "FOO=1", "NOEQUALS"},
	} {
		k2, err := CurrentKey(other)
		if err != nil {
			t.Fatal(err)
		}
		if k.Equal(k2) {
			t.Errorf("CurrentKey(%q) equals CurrentKey(%q)", other, env)
		}
		if sock(other) == sock(env) {
			t.Errorf("environments %q and %q reach the same socket", other, env)
		}
	}
}

func TestEnvMatches(t *testing.T) {
	env := []string{"HOME=/h", "PWD=/a", "SHLVL=1", "FOO=1"}
	k, err := CurrentKey(env)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range [][]string{env, {"FOO=1", "HOME=/h"}, {"SHLVL=9", "_=/x", "OLDPWD=/o", "FOO=1", "HOME=/h"}} {
		if !EnvMatches(e, k) {
			t.Errorf("EnvMatches(%q) for the key of %q = false", e, env)
		}
	}
	for _, e := range [][]string{nil, {"HOME=/h"}, {"HOME=/h", "FOO=2"}, {"HOME=/h", "FOO=1", "BAR=1"}} {
		if EnvMatches(e, k) {
			t.Errorf("EnvMatches(%q) for the key of %q = true", e, env)
		}
	}
	if !EnvMatches(nil, Key{}) || !EnvMatches([]string{"PWD=/x"}, Key{}) {
		t.Error("an empty environment does not match an empty key")
	}
}

func TestDir(t *testing.T) {
	cases := []struct {
		env     []string
		want    string
		wantErr bool
	}{
		{env: []string{"HOME=/home/u"}, want: "/home/u/.local/state/hermes-sandbox/owners"},
		{env: []string{"HOME=/home/u", "XDG_STATE_HOME=/xdg"}, want: "/xdg/hermes-sandbox/owners"},
		{env: []string{"HOME=/home/u", "XDG_STATE_HOME=relative"}, want: "/home/u/.local/state/hermes-sandbox/owners"},
		{env: []string{"HOME=/home/u", "XDG_STATE_HOME="}, want: "/home/u/.local/state/hermes-sandbox/owners"},
		{env: []string{"XDG_STATE_HOME=/xdg"}, want: "/xdg/hermes-sandbox/owners"},
		{env: []string{"HOME=/home/u", "XDG_STATE_HOME=/xdg", "HERMES_SANDBOX_TERMINAL_STATE_DIR=/state"}, want: "/state/owners"},
		{env: []string{"HERMES_SANDBOX_TERMINAL_STATE_DIR=/state/"}, want: "/state/owners"},
		{env: []string{"HOME=/home/u", "HERMES_SANDBOX_TERMINAL_STATE_DIR=~"}, want: "/home/u/owners"},
		{env: []string{"HOME=/home/u", "HERMES_SANDBOX_TERMINAL_STATE_DIR=~/st"}, want: "/home/u/st/owners"},
		{env: []string{"HERMES_SANDBOX_TERMINAL_STATE_DIR=~/st"}, wantErr: true},
		{env: []string{"HOME=/home/u", "HERMES_SANDBOX_TERMINAL_STATE_DIR="}, want: "/home/u/.local/state/hermes-sandbox/owners"},
		// The last definition of a variable wins, as in a process's environment.
		{env: []string{"HOME=/first", "HOME=/second"}, want: "/second/.local/state/hermes-sandbox/owners"},
		{env: []string{"HERMES_SANDBOX_TERMINAL_STATE_DIR=/a", "HERMES_SANDBOX_TERMINAL_STATE_DIR=/b"}, want: "/b/owners"},
		{env: []string{"HOMEX=/x", "HOME"}, wantErr: true},
		{env: nil, wantErr: true},
		{env: []string{"HOME="}, wantErr: true},
	}
	for _, c := range cases {
		got, err := Dir(c.env)
		if c.wantErr {
			if err == nil {
				t.Errorf("Dir(%q) = %q, want an error", c.env, got)
			}
			continue
		}
		if err != nil || got != c.want {
			t.Errorf("Dir(%q) = (%q, %v), want %q", c.env, got, err, c.want)
		}
	}
}

func TestSocketPath(t *testing.T) {
	k1 := Key{UID: 1, Exe: "e", Cwd: "/c", Ctx: "c", Env: []string{"A=1"}}
	k2 := k1
	k2.Cwd = "/d"
	env := []string{"HOME=/home/u", "HERMES_SANDBOX_TERMINAL_STATE_DIR=/state"}
	p1, err := SocketPath(env, k1)
	if err != nil {
		t.Fatal(err)
	}
	p2, err := SocketPath(env, k2)
	if err != nil {
		t.Fatal(err)
	}
	if filepath.Dir(p1) != "/state/owners" || !strings.HasSuffix(p1, ".sock") || len(filepath.Base(p1)) != 16+len(".sock") {
		t.Errorf("SocketPath = %q, want /state/owners/<16 hex digits>.sock", p1)
	}
	if p1 == p2 {
		t.Errorf("different keys share the socket %q", p1)
	}
	if again, _ := SocketPath(env, k1); again != p1 {
		t.Errorf("SocketPath is not stable: %q then %q", p1, again)
	}
	if _, err := SocketPath(nil, k1); err == nil {
		t.Error("SocketPath without HOME or a state directory did not fail")
	}
	if p, err := SocketPath([]string{"XDG_STATE_HOME=/x"}, k1); err != nil || filepath.Dir(p) != "/x/hermes-sandbox/owners" {
		t.Errorf("SocketPath with XDG_STATE_HOME = (%q, %v)", p, err)
	}
}

// deepDir makes a directory whose path is longer than a sockaddr_un can hold.
func deepDir(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	for len(dir) < 160 {
		dir = filepath.Join(dir, "a-rather-long-directory-name")
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	return dir
}

func TestSockaddrShortPathIsUnchanged(t *testing.T) {
	p := "/tmp/x.sock"
	addr, done, err := Sockaddr(p)
	if err != nil || addr != p {
		t.Fatalf("Sockaddr(%q) = (%q, %v)", p, addr, err)
	}
	done()
}

func TestSockaddrLongPath(t *testing.T) {
	sock := filepath.Join(deepDir(t), "owner.sock")
	if len(sock) <= 108 {
		t.Fatalf("test path is only %d bytes", len(sock))
	}
	// Without Sockaddr the path does not fit.
	if ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: sock, Net: "unix"}); err == nil {
		ln.Close()
		t.Fatalf("listening on a %d-byte path worked without Sockaddr; the test does not test anything", len(sock))
	}

	addr, done, err := Sockaddr(sock)
	if err != nil {
		t.Fatal(err)
	}
	if len(addr) >= 108 {
		t.Fatalf("Sockaddr returned a %d-byte address %q", len(addr), addr)
	}
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: addr, Net: "unix"})
	done()
	if err != nil {
		t.Fatalf("listen on %q for %q: %v", addr, sock, err)
	}
	ln.SetUnlinkOnClose(false)
	defer ln.Close()
	if st, err := os.Lstat(sock); err != nil || st.Mode()&os.ModeSocket == 0 {
		t.Fatalf("no socket at the long path: %v, %v", st, err)
	}

	accepted := make(chan []byte, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			accepted <- nil
			return
		}
		defer c.Close()
		typ, p, err := ReadFrame(c)
		if err != nil || typ != FrameStdin {
			accepted <- nil
			return
		}
		accepted <- p
	}()
	conn, err := Dial(sock)
	if err != nil {
		t.Fatalf("Dial(%q): %v", sock, err)
	}
	defer conn.Close()
	if err := WriteFrame(conn, FrameStdin, []byte("through a long path")); err != nil {
		t.Fatal(err)
	}
	select {
	case p := <-accepted:
		if string(p) != "through a long path" {
			t.Fatalf("server read %q", p)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the server did not get the frame")
	}
}

func TestSockaddrMissingDir(t *testing.T) {
	p := filepath.Join(deepDir(t), "missing", "owner.sock")
	if _, _, err := Sockaddr(p); err == nil {
		t.Fatal("Sockaddr of a path in a missing directory did not fail")
	}
	if _, err := Dial(p); err == nil {
		t.Fatal("Dial of a missing long path did not fail")
	}
}

func TestFrames(t *testing.T) {
	var buf bytes.Buffer
	for _, p := range [][]byte{nil, []byte("x"), bytes.Repeat([]byte{7}, 100000)} {
		if err := WriteFrame(&buf, FrameStdout, p); err != nil {
			t.Fatal(err)
		}
	}
	for _, want := range []int{0, 1, 100000} {
		typ, p, err := ReadFrame(&buf)
		if err != nil || typ != FrameStdout || len(p) != want {
			t.Fatalf("ReadFrame = (%q, %d bytes, %v), want %d bytes", typ, len(p), err, want)
		}
	}
	if _, _, err := ReadFrame(&buf); err != io.EOF {
		t.Fatalf("ReadFrame at the end = %v, want EOF", err)
	}
	if err := WriteFrame(&buf, FrameStdout, make([]byte, maxFrame+1)); err == nil || buf.Len() != 0 {
		t.Fatalf("an oversized frame was written (%v, %d bytes)", err, buf.Len())
	}
	// A header that claims too much is refused before anything is allocated or read.
	hdr := append([]byte{FrameStdin}, binary.BigEndian.AppendUint32(nil, maxFrame+1)...)
	if _, _, err := ReadFrame(bytes.NewReader(hdr)); err == nil {
		t.Fatal("an oversized frame header was accepted")
	}
	// A truncated frame is an error, not a short payload.
	if _, _, err := ReadFrame(bytes.NewReader(append(append([]byte{FrameStdin}, binary.BigEndian.AppendUint32(nil, 10)...), "abc"...))); err == nil {
		t.Fatal("a truncated frame was accepted")
	}
}

// fakeOwner listens on a fresh socket and runs serve for the first connection, after checking
// that the client's first frame is its hello.
func fakeOwner(t *testing.T, want Hello, serve func(c net.Conn)) string {
	t.Helper()
	sock := filepath.Join(t.TempDir(), "o.sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		typ, p, err := ReadFrame(c)
		if err != nil || typ != FrameHello {
			t.Errorf("first frame: %q, %v", typ, err)
			return
		}
		if h, err := DecodeHello(p); err != nil || !helloEqual(h, want) {
			t.Errorf("owner got hello %+v (%v), want %+v", h, err, want)
			return
		}
		serve(c)
	}()
	return sock
}

func exitFrame(code int32) []byte { return binary.BigEndian.AppendUint32(nil, uint32(code)) }

func TestForwardAgainstFakeOwner(t *testing.T) {
	h := sampleHello()
	cases := []struct {
		name      string
		serve     func(c net.Conn)
		code      int
		noOwner   bool
		errSubstr string
		out       string
	}{
		{name: "exit", code: 3, out: "hi", serve: func(c net.Conn) {
			WriteFrame(c, FrameStarted, nil)
			WriteFrame(c, FrameStdout, []byte("hi"))
			WriteFrame(c, FrameExit, exitFrame(3))
		}},
		{name: "negative exit", code: -1, serve: func(c net.Conn) {
			WriteFrame(c, FrameExit, exitFrame(-1))
		}},
		{name: "closed before started", noOwner: true, serve: func(c net.Conn) {}},
		{name: "closed after started", code: ExitLost, errSubstr: "went away", serve: func(c net.Conn) {
			WriteFrame(c, FrameStarted, nil)
		}},
		{name: "fallback", noOwner: true, errSubstr: "not mine", serve: func(c net.Conn) {
			WriteFrame(c, FrameFallback, []byte("not mine"))
		}},
		{name: "fallback after started", code: ExitLost, errSubstr: "declined a call it had started", serve: func(c net.Conn) {
			WriteFrame(c, FrameStarted, nil)
			WriteFrame(c, FrameFallback, []byte("too late"))
		}},
		{name: "malformed exit", code: ExitLost, errSubstr: "malformed exit", serve: func(c net.Conn) {
			WriteFrame(c, FrameExit, []byte{1, 2})
		}},
		{name: "unknown frame", code: ExitLost, errSubstr: "unexpected frame", serve: func(c net.Conn) {
			WriteFrame(c, 'Z', nil)
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			sock := fakeOwner(t, h, c.serve)
			var out bytes.Buffer
			code, err := Forward(sock, h, nil, &out, io.Discard)
			if errors.Is(err, ErrNoOwner) != c.noOwner {
				t.Fatalf("Forward err = %v, want ErrNoOwner: %v", err, c.noOwner)
			}
			if c.errSubstr != "" && (err == nil || !strings.Contains(err.Error(), c.errSubstr)) {
				t.Fatalf("Forward err = %v, want it to mention %q", err, c.errSubstr)
			}
			if c.errSubstr == "" && !c.noOwner && err != nil {
				t.Fatalf("Forward err = %v", err)
			}
			if !c.noOwner && code != c.code {
				t.Fatalf("Forward code = %d, want %d", code, c.code)
			}
			if out.String() != c.out {
				t.Fatalf("stdout = %q, want %q", out.String(), c.out)
			}
		})
	}
}

func TestForwardWithoutOwner(t *testing.T) {
	dir := t.TempDir()
	if _, err := Forward(filepath.Join(dir, "none.sock"), Hello{}, nil, io.Discard, io.Discard); !errors.Is(err, ErrNoOwner) {
		t.Fatalf("Forward to a missing socket: %v, want ErrNoOwner", err)
	}
	// A socket file nobody listens on.
	stale := filepath.Join(dir, "stale.sock")
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: stale, Net: "unix"})
	if err != nil {
		t.Fatal(err)
	}
	ln.SetUnlinkOnClose(false)
	ln.Close()
	if _, err := Forward(stale, Hello{}, nil, io.Discard, io.Discard); !errors.Is(err, ErrNoOwner) {
		t.Fatalf("Forward to a stale socket: %v, want ErrNoOwner", err)
	}
}

func TestPrivateDir(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "a", "b")
	if err := PrivateDir(dir); err != nil {
		t.Fatal(err)
	}
	if st, err := os.Stat(dir); err != nil || st.Mode().Perm() != 0o700 {
		t.Fatalf("new dir: %v, %v", st.Mode(), err)
	}
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := PrivateDir(dir); err != nil {
		t.Fatal(err)
	}
	if st, _ := os.Stat(dir); st.Mode().Perm() != 0o700 {
		t.Fatalf("an open dir was left %v", st.Mode())
	}
	// A symlink to a directory is not a private directory.
	link := filepath.Join(t.TempDir(), "link")
	if err := os.Symlink(dir, link); err != nil {
		t.Fatal(err)
	}
	if err := PrivateDir(link); err == nil {
		t.Fatal("PrivateDir accepted a symlink")
	}
	file := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := PrivateDir(file); err == nil {
		t.Fatal("PrivateDir accepted a file")
	}
}

func TestForgetEncoding(t *testing.T) {
	for _, c := range [][2]string{{"docker", "s1"}, {"kubernetes", ""}, {"", ""}, {"bäckend", "séssion 日本"}} {
		b, s, err := DecodeForget(EncodeForget(c[0], c[1]))
		if err != nil || b != c[0] || s != c[1] {
			t.Errorf("DecodeForget(EncodeForget(%q, %q)) = (%q, %q, %v)", c[0], c[1], b, s, err)
		}
	}
	for name, p := range map[string][]byte{
		"garbage":  []byte("junk"),
		"empty":    nil,
		"one arg":  EncodeHello(Hello{Args: []string{"docker"}}),
		"3 args":   EncodeHello(Hello{Args: []string{"docker", "s1", "x"}}),
		"truncate": EncodeForget("docker", "s1")[:10],
	} {
		if _, _, err := DecodeForget(p); err == nil {
			t.Errorf("%s: DecodeForget accepted %x", name, p)
		}
	}
}

func TestForgetReachesEveryOwner(t *testing.T) {
	dir := t.TempDir()
	type got struct {
		name             string
		backend, session string
	}
	heard := make(chan got, 8)
	fake := func(name string, answer bool) {
		ln, err := net.Listen("unix", filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { ln.Close() })
		go func() {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			defer c.Close()
			typ, p, err := ReadFrame(c)
			if err != nil || typ != FrameForget {
				heard <- got{name: name + ": bad frame"}
				return
			}
			b, s, err := DecodeForget(p)
			if err != nil {
				heard <- got{name: name + ": bad payload"}
				return
			}
			heard <- got{name, b, s}
			if answer {
				WriteFrame(c, FrameExit, exitFrame(0))
			} else {
				// A stuck owner: wait for the client to give up.
				_, _, _ = ReadFrame(c)
			}
		}()
	}
	fake("a.sock", true)
	fake("b.sock", true)
	fake("stuck.sock", false)
	fake("not-an-owner", true) // no .sock suffix: not asked
	stale := filepath.Join(dir, "stale.sock")
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: stale, Net: "unix"})
	if err != nil {
		t.Fatal(err)
	}
	ln.SetUnlinkOnClose(false)
	ln.Close()
	if err := os.WriteFile(filepath.Join(dir, "file.sock"), nil, 0o600); err != nil {
		t.Fatal(err)
	}

	done := make(chan time.Duration, 1)
	go func() {
		t0 := time.Now()
		Forget(dir, "docker", "s1")
		done <- time.Since(t0)
	}()
	var took time.Duration
	select {
	case took = <-done:
	case <-time.After(20 * time.Second):
		t.Fatal("Forget did not return: a stuck owner held it up")
	}
	if took > 5*time.Second {
		t.Errorf("Forget took %v with one stuck owner", took)
	}
	names := map[string]bool{}
	for len(names) < 3 {
		select {
		case g := <-heard:
			if g.backend != "docker" || g.session != "s1" {
				t.Fatalf("%s heard %+v", g.name, g)
			}
			names[g.name] = true
		case <-time.After(20 * time.Second):
			t.Fatalf("only %v heard the forget", names)
		}
	}
	if !names["a.sock"] || !names["b.sock"] || !names["stuck.sock"] {
		t.Fatalf("heard by %v", names)
	}
	select {
	case g := <-heard:
		t.Fatalf("%s was asked too", g.name)
	default:
	}
	// A missing directory is nothing to do.
	Forget(filepath.Join(dir, "missing"), "docker", "")
}
