//go:build unix

package agent

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// linkTree makes a home with a key and a working directory full of links into it, and
// returns their real (link-free) paths.
func linkTree(t *testing.T) (home, work string) {
	t.Helper()
	d, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	home, work = filepath.Join(d, "home"), filepath.Join(d, "work")
	for _, dir := range []string{home + "/.ssh", work + "/sub"} {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(home+"/.ssh/id_ed25519", []byte("key"), 0o600); err != nil {
		t.Fatal(err)
	}
	for link, target := range map[string]string{
		"innocent": home + "/.ssh/id_ed25519", // absolute
		"keys":     "../home/.ssh",            // relative, to a directory
		"hop":      "innocent",                // to a link
		"dangling": home + "/.bashrc",         // to a file not there yet
		"loop1":    "loop2",
		"loop2":    "loop1",
	} {
		if err := os.Symlink(target, filepath.Join(work, link)); err != nil {
			t.Fatal(err)
		}
	}
	return home, work
}

func TestRealPath(t *testing.T) {
	home, work := linkTree(t)
	key := home + "/.ssh/id_ed25519"
	for _, tt := range []struct{ in, want string }{
		{work + "/innocent", key},
		{work + "/hop", key},
		{work + "/keys/id_ed25519", key},
		{work + "/dangling", home + "/.bashrc"},
		{work + "/keys/new/deeper.txt", home + "/.ssh/new/deeper.txt"},
		{work + "/sub/new.txt", work + "/sub/new.txt"},
		{work + "/keys/../.ssh/id_ed25519", key}, // ".." after a link is the link target's parent
		{work, work},
		{"/", "/"},
	} {
		if got, err := realPath(tt.in); err != nil || got != tt.want {
			t.Errorf("realPath(%q) = %q, %v; want %q", tt.in, got, err, tt.want)
		}
	}
	if got, err := realPath(work + "/loop1"); err == nil || !errors.Is(err, errInvalid) {
		t.Errorf("realPath(a link loop) = %q, %v; want an error", got, err)
	}
}

// serve runs a helper for opts over pipes and returns a client of it.
func serve(t *testing.T, opts Options) *Client {
	t.Helper()
	srv, err := NewServer(opts)
	if err != nil {
		t.Fatal(err)
	}
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	done := make(chan struct{})
	go func() {
		defer close(done)
		err := srv.Serve(inR, outW)
		outW.CloseWithError(errors.Join(err, io.EOF))
		inR.Close()
	}()
	c, err := NewClient(t.Context(), outR, inW, func() error { inW.Close(); <-done; return nil })
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// TestResolvePathCall: the helper resolves as its file calls open, in the session's state:
// "~" with the session's HOME, relative to its directory (wherever a command moved it), and
// links followed.
func TestResolvePathCall(t *testing.T) {
	home, work := linkTree(t)
	c := serve(t, Options{StateDir: t.TempDir(), Shell: "/bin/sh", Env: []string{"PATH=/usr/bin:/bin", "HOME=" + home}, Cwd: work})
	ctx := t.Context()
	key := home + "/.ssh/id_ed25519"
	check := func(in, want string) {
		t.Helper()
		if got, err := c.ResolvePath(ctx, in); err != nil || got != want {
			t.Errorf("ResolvePath(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	check("~/.ssh/id_ed25519", key)
	check("~", home)
	check("./innocent", key)
	check("keys/id_ed25519", key)
	check("dangling", home+"/.bashrc")
	check("sub/new.txt", work+"/sub/new.txt")
	check("~user/x", work+"/~user/x") // as read_file takes it: a relative name
	// The file the helper's read_file opens is the one it resolved to.
	var buf strings.Builder
	if err := c.Call(ctx, CallRequest{Op: opReadFile, Path: "./innocent"}, nil, &buf, nil); err != nil || buf.String() != "key" {
		t.Errorf("read_file(./innocent) = %q, %v; want the key it resolved to", buf.String(), err)
	}
	if _, err := c.Run(ctx, RunRequest{Script: "cd ../home"}, nil, nil, nil); err != nil {
		t.Fatal(err)
	}
	check(".ssh/id_ed25519", key)
	if _, err := c.ResolvePath(ctx, filepath.Join(work, "loop1")); err == nil {
		t.Errorf("ResolvePath(a link loop) succeeded; want an error")
	}
}

// TestResolvePathOlderHelper: a helper that predates resolve_path answers it as any unknown
// call, which the client reports as ErrNoResolve, not as a path.
func TestResolvePathOlderHelper(t *testing.T) {
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	done := make(chan struct{})
	go func() { // what Serve does, as far as an old helper goes, for an operation it lacks
		defer close(done)
		defer outW.Close()
		w := newFrameWriter(outW)
		hello, _ := json.Marshal(Hello{Version: Version})
		if w.writeRaw(frameMagic) != nil || w.write(tHello, 0, hello) != nil {
			return
		}
		r := bufio.NewReader(inR)
		for {
			f, err := readFrame(r)
			if err != nil {
				return
			}
			var req CallRequest
			if f.typ == tCall && json.Unmarshal(f.payload, &req) == nil {
				e, _ := json.Marshal(RemoteError{Kind: KindUnsupported, Message: "unknown operation " + req.Op})
				_ = w.write(tError, f.id, e)
			}
		}
	}()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	c, err := NewClient(ctx, outR, inW, func() error { inW.Close(); inR.Close(); <-done; return nil })
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	got, err := c.ResolvePath(ctx, "~/.ssh/id_ed25519")
	if !errors.Is(err, ErrNoResolve) || got != "" || !strings.Contains(err.Error(), "~/.ssh/id_ed25519") {
		t.Errorf("ResolvePath on an older helper = %q, %v; want ErrNoResolve naming the path", got, err)
	}
}
