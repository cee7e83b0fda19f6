package ssh

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
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

// goArch maps uname -m to a Go architecture the helper is built for; "" when there is none.
func goArch(machine string) string {
	switch machine {
	case "x86_64", "amd64":
		return "amd64"
	case "aarch64", "arm64", "armv8l":
		return "arm64"
	}
	return ""
}

// helperImage is a local static helper binary to install remotely.
type helperImage struct {
	path string
	args []string // before --state: "serve", or "__agent serve"
	sha  string
	size int64
}

// skipSpaceCheck lets tests exercise a disk that fills up during the upload.
var skipSpaceCheck bool

var shaCache sync.Map // path|size|mtime → hex sha256

// lookupHelper finds the local helper for an architecture; tests replace it to simulate a
// host no helper is built for.
var lookupHelper = localHelper

// localHelper finds the helper for arch and its SHA-256 (cached in memory and in stateDir,
// since hashing a 30 MB binary on every CLI run would cost tens of milliseconds).
func localHelper(arch, stateDir string) (*helperImage, error) {
	p, args, err := agentbin.Path(arch)
	if err != nil {
		return nil, err
	}
	fi, err := os.Stat(p)
	if err != nil {
		return nil, err
	}
	key := fmt.Sprintf("%s|%d|%d", p, fi.Size(), fi.ModTime().UnixNano())
	img := &helperImage{path: p, args: args, size: fi.Size()}
	if v, ok := shaCache.Load(key); ok {
		img.sha = v.(string)
		return img, nil
	}
	cacheFile := ""
	disk := map[string]string{}
	if stateDir != "" {
		cacheFile = filepath.Join(stateDir, "ssh", "helper-sha256.json")
		if b, err := os.ReadFile(cacheFile); err == nil {
			_ = json.Unmarshal(b, &disk)
		}
		if s, ok := disk[key]; ok && len(s) == 64 {
			shaCache.Store(key, s)
			img.sha = s
			return img, nil
		}
	}
	f, err := os.Open(p)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	hh := sha256.New()
	if _, err := io.Copy(hh, f); err != nil {
		return nil, err
	}
	img.sha = hex.EncodeToString(hh.Sum(nil))
	shaCache.Store(key, img.sha)
	if cacheFile != "" {
		disk = map[string]string{key: img.sha} // keep only the current binary
		if b, err := json.Marshal(disk); err == nil {
			_ = os.MkdirAll(filepath.Dir(cacheFile), 0o700)
			tmp := cacheFile + ".tmp" + strconv.Itoa(os.Getpid())
			if os.WriteFile(tmp, b, 0o600) == nil {
				_ = os.Rename(tmp, cacheFile)
			}
		}
	}
	return img, nil
}

// guessPlacement is where the helper for this machine's architecture would be if an earlier
// run installed it; starting it there costs nothing extra when the guess is right.
func guessPlacement(stateDir string) *placement {
	img, err := lookupHelper(agentbin.HostArch(), stateDir)
	if err != nil {
		return nil
	}
	return &placement{pathExpr: `"$HOME"/` + remoteAgentDir + "/" + img.sha + "/sandbox-agent", args: img.args, guessed: true}
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
	arch := goArch(info.arch)
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
	cands := []candidate{{"", path.Join(info.home, remoteAgentDir, img.sha)}}
	if path.IsAbs(info.runtimeDir) {
		root := path.Join(info.runtimeDir, "hermes-sandbox")
		cands = append(cands, candidate{root, path.Join(root, "agent", img.sha)})
	}
	if info.uid != "" {
		root := path.Join("/tmp", "hermes-sandbox-"+info.uid)
		cands = append(cands, candidate{root, path.Join(root, "agent", img.sha)})
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
		ok, why := canExec(ctx, h, p, img.args)
		if ok {
			if i > 0 {
				b.progressf("ssh: %s: the helper cannot run from %s (%s); using %s\n", h.s.target.String(), cands[0].dir, strings.Join(notes, "; "), c.dir)
			}
			return &placement{pathExpr: shq(p), args: img.args}, nil
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

// upload installs img as dir/sandbox-agent unless a file of that size is there already (the
// directory is named by the SHA-256, and files only ever appear there by rename). The bytes
// go to a temporary name, are checked against the SHA-256 remotely when sha256sum exists, and
// are renamed into place; on any failure the temporary file is removed.
func (b *Backend) upload(ctx context.Context, h *host, dir string, img *helperImage) (string, error) {
	final := path.Join(dir, "sandbox-agent")
	cl, err := h.sftp(ctx)
	if errors.Is(err, ErrNoSFTP) {
		return b.uploadExec(ctx, h, dir, img)
	}
	if err != nil {
		return "", &UploadError{Host: h.s.target.String(), Path: final, Err: err}
	}
	if fi, err := cl.Stat(final); err == nil && fi.Size() == img.size {
		return final, nil
	}
	uerr := func(err error) error {
		e := &UploadError{Host: h.s.target.String(), Path: final, Err: err, Need: img.size}
		if vfs, verr := cl.StatVFS(dir); verr == nil {
			free := int64(vfs.Frsize) * int64(vfs.Bavail)
			if free < img.size+(64<<10) {
				e.DiskFull, e.Free = true, free
			}
		}
		return e
	}
	if err := mkdirPrivate(cl, dir); err != nil {
		return "", uerr(err)
	}
	if vfs, err := cl.StatVFS(dir); err == nil && !skipSpaceCheck {
		if free := int64(vfs.Frsize) * int64(vfs.Bavail); free < img.size+(64<<10) {
			return "", &UploadError{Host: h.s.target.String(), Path: final, DiskFull: true, Free: free, Need: img.size, Err: errors.New("no space left")}
		}
	}
	start := time.Now()
	b.progressf("ssh: installing the sandbox helper on %s (%s) in %s …\n", h.s.target.String(), human(img.size), dir)
	tmp := path.Join(dir, ".sandbox-agent.tmp-"+randomHex(6))
	src, err := os.Open(img.path)
	if err != nil {
		return "", &UploadError{Host: h.s.target.String(), Path: final, Err: err}
	}
	defer src.Close()
	f, err := cl.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL)
	if err != nil {
		return "", uerr(err)
	}
	sum := sha256.New()
	_, err = f.ReadFromWithConcurrency(&ctxReader{ctx: ctx, r: io.TeeReader(src, sum)}, 64)
	if err == nil {
		err = f.Chmod(0o700)
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil && hex.EncodeToString(sum.Sum(nil)) != img.sha {
		err = fmt.Errorf("local helper %s changed while uploading; retry", img.path)
	}
	if err == nil {
		err = verifyRemote(ctx, h, tmp, img.sha)
	}
	if err == nil {
		if _, ok := cl.HasExtension("posix-rename@openssh.com"); ok {
			err = cl.PosixRename(tmp, final)
		} else if err = cl.Rename(tmp, final); err != nil {
			if fi, serr := cl.Stat(final); serr == nil && fi.Size() == img.size {
				err = nil // another process won the race
			}
		}
	}
	if err != nil {
		cl.Remove(tmp)
		return "", uerr(err)
	}
	b.progressf("ssh: helper installed in %.1f s\n", time.Since(start).Seconds())
	return final, nil
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

// uploadExec is upload for a host without SFTP: the bytes go through `cat` on an exec
// channel into a temporary file, are checked by size and (where sha256sum exists) by SHA-256,
// and are renamed into place.
func (b *Backend) uploadExec(ctx context.Context, h *host, dir string, img *helperImage) (string, error) {
	final := path.Join(dir, "sandbox-agent")
	size := strconv.FormatInt(img.size, 10)
	if out, _, code, err := h.run(ctx, "echo "+probeMarker+"; wc -c < "+shq(final)+" 2>/dev/null", nil); err == nil && code == 0 {
		_, got, _ := bytes.Cut(out, []byte(probeMarker+"\n"))
		if strings.TrimSpace(string(got)) == size {
			return final, nil
		}
	}
	start := time.Now()
	b.progressf("ssh: installing the sandbox helper on %s (%s) in %s over an exec channel (no SFTP) …\n", h.s.target.String(), human(img.size), dir)
	src, err := os.Open(img.path)
	if err != nil {
		return "", &UploadError{Host: h.s.target.String(), Path: final, Err: err}
	}
	defer src.Close()
	tmp := path.Join(dir, ".sandbox-agent.tmp-"+randomHex(6))
	sum := sha256.New()
	script := "umask 077 && mkdir -p " + shq(dir) + " && cat > " + shq(tmp) + " && [ \"$(wc -c < " + shq(tmp) + ")\" = " + size +
		" ] && chmod 700 " + shq(tmp)
	_, errOut, code, err := h.run(ctx, script, &ctxReader{ctx: ctx, r: io.TeeReader(src, sum)})
	if err == nil && code != 0 {
		err = fmt.Errorf("exit %d: %s", code, oneLine(errOut, 300))
		if bytes.Contains(errOut, []byte("No space left")) {
			h.run(ctx, "rm -f "+shq(tmp), nil)
			return "", &UploadError{Host: h.s.target.String(), Path: final, DiskFull: true, Need: img.size, Err: err}
		}
	}
	if err == nil && hex.EncodeToString(sum.Sum(nil)) != img.sha {
		err = fmt.Errorf("local helper %s changed while uploading; retry", img.path)
	}
	if err == nil {
		err = verifyRemote(ctx, h, tmp, img.sha)
	}
	if err == nil {
		_, errOut, code, err = h.run(ctx, "mv -f "+shq(tmp)+" "+shq(final), nil)
		if err == nil && code != 0 {
			err = fmt.Errorf("rename: exit %d: %s", code, oneLine(errOut, 300))
		}
	}
	if err != nil {
		h.run(context.WithoutCancel(ctx), "rm -f "+shq(tmp), nil)
		return "", &UploadError{Host: h.s.target.String(), Path: final, Err: err, Need: img.size}
	}
	b.progressf("ssh: helper installed in %.1f s\n", time.Since(start).Seconds())
	return final, nil
}

// verifyRemote checks the uploaded file's SHA-256 with the remote sha256sum, when present.
func verifyRemote(ctx context.Context, h *host, p, want string) error {
	out, _, code, err := h.run(ctx, "echo "+probeMarker+"; sha256sum "+shq(p), nil)
	if err != nil {
		return err
	}
	if code != 0 {
		return nil // no sha256sum there: the local hash of what was sent stands
	}
	_, out, _ = bytes.Cut(out, []byte(probeMarker+"\n")) // skip what rc files printed
	got, _, _ := strings.Cut(strings.TrimSpace(string(out)), " ")
	if got != want {
		return fmt.Errorf("uploaded helper has SHA-256 %s, want %s (corrupted in transit?)", got, want)
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
// and exits 2; a noexec file system gives 126.
func canExec(ctx context.Context, h *host, p string, args []string) (bool, string) {
	words := []string{shq(p)}
	for _, a := range args[:len(args)-1] {
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

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// shq quotes s as one POSIX shell word.
var shq = sandbox.ShellQuote
