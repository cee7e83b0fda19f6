package ssh

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/pkg/sftp"

	"github.com/hermes-sandbox/hermes-sandbox/internal/agentbin"
	"github.com/hermes-sandbox/hermes-sandbox/sandbox"
)

// Remote layout, under the remote user's home.
const (
	remoteBase     = ".cache/hermes-sandbox"
	remoteAgentDir = remoteBase + "/agent"
	remoteSessions = remoteBase + "/sessions"
)

// remoteInfo is what a probe learned about the remote account.
type remoteInfo struct {
	os         string // uname -s
	arch       string // uname -m
	home       string
	uid        string
	runtimeDir string
}

// placement says how sessions run on a host: through the helper at path, or with the
// plain-shell protocol.
type placement struct {
	shell  bool
	reason string // why the plain shell is used
	// pathExpr is the helper's path as a shell word: quoted, or "$HOME"/… when guessed.
	pathExpr string
	args     []string
	guessed  bool // derived without probing; may be wrong
}

// lockSetup takes the host's setup slot (probe and upload run once at a time).
func (h *host) lockSetup(ctx context.Context) (func(), error) {
	select {
	case h.setup <- struct{}{}:
		return func() { <-h.setup }, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// probeMarker separates the remote rc files' noise from the probe's answer.
const probeMarker = "HERMES-PROBE-b1f0c3"

// remote learns the remote architecture, home, uid and runtime directory once per host.
// The caller holds the setup slot.
func (h *host) remote(ctx context.Context) (*remoteInfo, error) {
	if h.info != nil {
		return h.info, nil
	}
	// Plain words only, so any login shell (sh, bash, zsh, fish) runs it.
	cmd := `echo ` + probeMarker + `; uname -s; uname -m; echo "$HOME"; id -u; echo "$XDG_RUNTIME_DIR"`
	out, errOut, code, err := h.run(ctx, cmd, nil)
	if err != nil {
		return nil, fmt.Errorf("probe the remote system: %w", err)
	}
	_, after, ok := bytes.Cut(out, []byte(probeMarker+"\n"))
	if !ok || code != 0 {
		return nil, fmt.Errorf("probe the remote system: exit %d: %s %s", code, oneLine(out, 300), oneLine(errOut, 300))
	}
	lines := strings.Split(string(after), "\n")
	for len(lines) < 5 {
		lines = append(lines, "")
	}
	info := &remoteInfo{os: strings.TrimSpace(lines[0]), arch: strings.TrimSpace(lines[1]), home: lines[2],
		uid: strings.TrimSpace(lines[3]), runtimeDir: lines[4]}
	if !path.IsAbs(info.home) {
		return nil, fmt.Errorf("probe the remote system: $HOME is %q, not an absolute path", info.home)
	}
	h.info = info
	return info, nil
}

// skipSpaceCheck lets tests exercise a disk that fills up during the upload.
var skipSpaceCheck bool

// lookupHelper finds the local helper for an architecture, with its SHA-256 cached in
// stateDir; tests replace it to simulate a host no helper is built for.
var lookupHelper = agentbin.Load

// guessPlacement is where the helper for this machine's architecture would be if an earlier
// run installed it; starting it there costs nothing extra when the guess is right.
func guessPlacement(stateDir string) *placement {
	img, err := lookupHelper(agentbin.HostArch(), stateDir)
	if err != nil {
		return nil
	}
	return &placement{pathExpr: `"$HOME"/` + remoteAgentDir + "/" + img.SHA256 + "/sandbox-agent", args: serveArgs(img), guessed: true}
}

// setupPlacement probes the host, installs the helper where it can be executed, and returns
// the placement; the plain shell when no helper can run there. The caller holds the setup
// slot.
func (b *Backend) setupPlacement(ctx context.Context, h *host) (*placement, error) {
	info, err := h.remote(ctx)
	if err != nil {
		return nil, err
	}
	if info.os != "Linux" {
		return b.shellPlacement(h, fmt.Sprintf("the sandbox helper is built for Linux, and the remote system is %q", info.os)), nil
	}
	arch := agentbin.GoArch(info.arch)
	if arch == "" {
		return b.shellPlacement(h, fmt.Sprintf("no sandbox helper is built for the remote architecture %q", info.arch)), nil
	}
	img, err := lookupHelper(arch, b.fo.StateDir)
	if err != nil {
		return b.shellPlacement(h, err.Error()), nil
	}
	// The home cache first; where home is mounted noexec, a private directory under
	// $XDG_RUNTIME_DIR or /tmp.
	type candidate struct{ root, dir string }
	cands := []candidate{{"", path.Join(info.home, remoteAgentDir, img.SHA256)}}
	if path.IsAbs(info.runtimeDir) {
		root := path.Join(info.runtimeDir, "hermes-sandbox")
		cands = append(cands, candidate{root, path.Join(root, "agent", img.SHA256)})
	}
	if info.uid != "" {
		root := path.Join("/tmp", "hermes-sandbox-"+info.uid)
		cands = append(cands, candidate{root, path.Join(root, "agent", img.SHA256)})
	}
	var notes []string
	for i, c := range cands {
		if c.root != "" {
			if err := privateRoot(ctx, h, c.root, info.uid); err != nil {
				notes = append(notes, err.Error())
				continue
			}
		}
		p, err := b.upload(ctx, h, c.dir, img)
		if err != nil {
			return nil, err
		}
		ok, why := canExec(ctx, h, p, img.Args)
		if ok {
			if i > 0 {
				b.progressf("ssh: %s: the helper cannot run from %s (%s); using %s\n", h.s.target.String(), cands[0].dir, strings.Join(notes, "; "), c.dir)
			}
			return &placement{pathExpr: shq(p), args: serveArgs(img)}, nil
		}
		notes = append(notes, fmt.Sprintf("%s: %s", c.dir, why))
	}
	return b.shellPlacement(h, "the helper cannot be executed in "+strings.Join(notes, "; ")+" (file systems mounted noexec?)"), nil
}

func (b *Backend) shellPlacement(h *host, reason string) *placement {
	b.progressf("ssh: %s: %s; using the plain-shell protocol instead (slower per command)\n", h.s.target.String(), reason)
	return &placement{shell: true, reason: reason}
}

// privateRoot makes sure the top of an alternate helper directory outside the home (such as
// /tmp/hermes-sandbox-UID) is ours and private, so no other user can swap the binary.
func privateRoot(ctx context.Context, h *host, root, uid string) error {
	cl, err := h.sftp(ctx)
	if errors.Is(err, ErrNoSFTP) {
		return privateRootShell(ctx, h, root, uid)
	}
	if err != nil {
		return err
	}
	if err := cl.Mkdir(root); err != nil && !errors.Is(err, os.ErrExist) {
		if _, serr := cl.Lstat(root); serr != nil {
			return fmt.Errorf("%s: %v", root, err)
		}
	}
	fi, err := cl.Lstat(root)
	if err != nil {
		return fmt.Errorf("%s: %v", root, err)
	}
	st, ok := fi.Sys().(*sftp.FileStat)
	if !fi.IsDir() || !ok || strconv.Itoa(int(st.UID)) != uid {
		return fmt.Errorf("%s is not a directory owned by uid %s", root, uid)
	}
	if fi.Mode().Perm()&0o077 != 0 {
		if err := cl.Chmod(root, 0o700); err != nil {
			return fmt.Errorf("%s: %v", root, err)
		}
	}
	return nil
}

// serveArgs is what comes between the helper's path and its flags.
func serveArgs(img *agentbin.Binary) []string { return append(slices.Clip(img.Args), "serve") }

// upload installs img as dir/sandbox-agent unless a file of that size is there already (the
// directory is named by the SHA-256, and files only ever appear there by rename), over SFTP
// or, without it, through `cat` on an exec channel; agentbin.Install checks the bytes by size
// and SHA-256 remotely before the rename, and removes them on any failure.
func (b *Backend) upload(ctx context.Context, h *host, dir string, img *agentbin.Binary) (string, error) {
	final := path.Join(dir, "sandbox-agent")
	t := &hostTarget{h: h}
	cl, err := h.sftp(ctx)
	var free int64 = -1
	switch {
	case errors.Is(err, ErrNoSFTP):
		out, _, code, err := h.run(ctx, "echo "+probeMarker+"; wc -c < "+shq(final)+" 2>/dev/null", nil)
		if _, got, _ := bytes.Cut(out, []byte(probeMarker+"\n")); err == nil && code == 0 && strings.TrimSpace(string(got)) == strconv.FormatInt(img.Size, 10) {
			return final, nil
		}
	case err != nil:
		return "", &UploadError{Host: h.s.target.String(), Path: final, Err: err}
	default:
		t.cl = cl
		if fi, err := cl.Stat(final); err == nil && fi.Size() == img.Size {
			return final, nil
		}
		if err := mkdirPrivate(cl, dir); err != nil {
			return "", &UploadError{Host: h.s.target.String(), Path: final, Err: err, Need: img.Size}
		}
		if vfs, err := cl.StatVFS(dir); err == nil && !skipSpaceCheck {
			free = int64(vfs.Frsize) * int64(vfs.Bavail)
		}
	}
	if free >= 0 && free < img.Size+(64<<10) {
		return "", &UploadError{Host: h.s.target.String(), Path: final, DiskFull: true, Free: free, Need: img.Size, Err: errors.New("no space left")}
	}
	start := time.Now()
	how := ""
	if t.cl == nil {
		how = " over an exec channel (no SFTP)"
	}
	b.progressf("ssh: installing the sandbox helper on %s (%s) in %s%s …\n", h.s.target.String(), human(img.Size), dir, how)
	if err := agentbin.Install(ctx, t, img, final); err != nil {
		e := &UploadError{Host: h.s.target.String(), Path: final, Err: err, Need: img.Size, DiskFull: t.full}
		if t.cl != nil {
			if vfs, verr := t.cl.StatVFS(dir); verr == nil {
				e.Free = int64(vfs.Frsize) * int64(vfs.Bavail)
				e.DiskFull = e.Free < img.Size+(64<<10)
			}
		}
		return "", e
	}
	b.progressf("ssh: helper installed in %.1f s\n", time.Since(start).Seconds())
	return final, nil
}

// hostTarget installs the helper over SFTP when cl is set, else through exec channels
// (agentbin.Target).
type hostTarget struct {
	h    *host
	cl   *sftp.Client
	full bool // the remote shell said the disk is full
}

func (t *hostTarget) Write(ctx context.Context, p string, r io.Reader, size int64) error {
	r = &ctxReader{ctx: ctx, r: r}
	if t.cl == nil {
		_, errOut, code, err := t.h.run(ctx, "umask 077 && mkdir -p "+shq(path.Dir(p))+" && cat > "+shq(p), r)
		if err == nil && code != 0 {
			t.full = bytes.Contains(errOut, []byte("No space left"))
			err = fmt.Errorf("exit %d: %s", code, oneLine(errOut, 300))
		}
		return err
	}
	f, err := t.cl.OpenFile(p, os.O_WRONLY|os.O_CREATE|os.O_EXCL)
	if err != nil {
		return err
	}
	_, err = f.ReadFromWithConcurrency(r, 64)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// Run runs script with sh, whatever the remote user's login shell.
func (t *hostTarget) Run(ctx context.Context, script string, args ...string) (int, string, error) {
	words := []string{"sh", "-c", shq(script), "sh"}
	for _, a := range args {
		words = append(words, shq(a))
	}
	out, errOut, code, err := t.h.run(ctx, strings.Join(words, " "), nil)
	return code, string(out) + string(errOut), err
}

// privateRootShell is privateRoot for a host without SFTP, in one shell command.
func privateRootShell(ctx context.Context, h *host, root, uid string) error {
	q := shq(root)
	script := "mkdir " + q + " 2>/dev/null; [ -d " + q + " ] && [ ! -L " + q + " ] && [ \"$(stat -c %u " + q + ")\" = " + shq(uid) +
		" ] && chmod 700 " + q
	_, errOut, code, err := h.run(ctx, script, nil)
	if err != nil {
		return fmt.Errorf("%s: %v", root, err)
	}
	if code != 0 {
		return fmt.Errorf("%s is not a directory owned by uid %s %s", root, uid, oneLine(errOut, 200))
	}
	return nil
}

// mkdirPrivate creates dir and its missing parents, making the hermes-sandbox ones 0700.
func mkdirPrivate(cl *sftp.Client, dir string) error {
	if fi, err := cl.Stat(dir); err == nil && fi.IsDir() {
		return nil
	}
	if err := cl.MkdirAll(dir); err != nil {
		return err
	}
	for d := dir; strings.Contains(d, "hermes-sandbox"); d = path.Dir(d) {
		_ = cl.Chmod(d, 0o700)
	}
	return nil
}

// canExec runs the installed helper with a bad argument: a helper that runs prints its usage
// and exits 2; a noexec file system gives 126. args come before "serve".
func canExec(ctx context.Context, h *host, p string, args []string) (bool, string) {
	words := []string{shq(p)}
	for _, a := range args {
		words = append(words, shq(a))
	}
	words = append(words, "hermes-probe")
	_, errOut, code, err := h.run(ctx, strings.Join(words, " "), nil)
	if err != nil {
		return false, err.Error()
	}
	if code == 2 && bytes.Contains(errOut, []byte("usage: sandbox-agent")) {
		return true, ""
	}
	return false, fmt.Sprintf("exit %d: %s", code, oneLine(errOut, 200))
}

// ctxReader stops a copy when ctx ends.
type ctxReader struct {
	ctx context.Context
	r   io.Reader
}

func (c *ctxReader) Read(p []byte) (int, error) {
	if err := c.ctx.Err(); err != nil {
		return 0, err
	}
	return c.r.Read(p)
}

// shq quotes s as one POSIX shell word.
var shq = sandbox.ShellQuote
