package vercel

// The helper channel over the session's interactive PTY, used the way Vercel's own `sandbox`
// CLI uses it (shared/specs/vercel-sandbox/interactive-shell.ts): POST …/interactive returns
// {url, token}; the client connects to url?token=… (the token in the query, nowhere else),
// sends one JSON start frame (program, arguments, directory, the environment as an array of
// "KEY=VALUE" strings, terminal size), then the terminal's bytes travel in binary frames
// both ways; {"type":"resize","cols","rows"} text frames resize it, and the server's last
// text frame is {"type":"exit","code":N}. The helper is started behind `stty raw -echo`, so
// the terminal passes its framed protocol through unchanged: no echo, no line editing, no
// CR/LF translation, no signal characters, 8-bit clean.

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"fmt"
	"path"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/hermes-sandbox/hermes-sandbox/internal/agent"
	"github.com/hermes-sandbox/hermes-sandbox/internal/agentbin"
)

// ptyStart is the first frame on the PTY WebSocket (interactive-shell.ts sends type,
// command, args, env, cwd, cols, rows; nothing else).
type ptyStart struct {
	Type    string   `json:"type"` // "start"
	Command string   `json:"command"`
	Args    []string `json:"args"`
	Env     []string `json:"env"` // "KEY=VALUE"
	Cwd     string   `json:"cwd"`
	Cols    int      `json:"cols"`
	Rows    int      `json:"rows"`
}

// ptyControl is a text frame from the server; "exit" carries the program's exit status.
type ptyControl struct {
	Type string `json:"type"`
	Code *int   `json:"code"`
}

// helperScript starts the helper on the terminal in raw mode; its own diagnostics go to a
// log file in the state directory, never into the channel. $0 is the helper, $1 the state
// directory, $2 the working directory of a fresh session, $3 the shell, $4 the subcommand
// that precedes "serve" when the binary is hermes-sandbox itself (__agent) or empty. It exits
// with agentbin's start statuses.
const helperScript = `[ -x "$0" ] || exit 97
mkdir -p "$1" || exit 98
stty raw -echo 2>/dev/null || exit 96
exec "$0" $4 serve --state "$1" --cwd "$2" --shell "$3" 2>>"$1/helper.log"`

// agentUpload is the helper binary, packed once per directory for fs/write.
type agentUpload struct {
	bin *agentbin.Binary

	packMu sync.Mutex
	tgz    map[string][]byte // guarded by packMu; sandbox working directory → gzipped tar
}

// sum is the first 12 hex digits of the helper's SHA-256, in its name in the sandbox.
func (up *agentUpload) sum() string { return up.bin.SHA256[:12] }

// packed is the helper as a gzipped tar whose one entry is its path under cwd relative to
// "/", made once per process and directory. The gzip stream's CRC-32 and length make the
// service refuse a damaged upload.
func (up *agentUpload) packed(cwd string) ([]byte, error) {
	up.packMu.Lock()
	defer up.packMu.Unlock()
	if t, ok := up.tgz[cwd]; ok {
		return t, nil
	}
	data, err := up.bin.Bytes()
	if err != nil {
		return nil, err
	}
	_, bin, _ := helperPaths(cwd, up.sum())
	t, err := tarGz(map[string][]byte{strings.TrimPrefix(bin, "/"): data}, 0o755)
	if err != nil {
		return nil, err
	}
	if up.tgz == nil {
		up.tgz = map[string][]byte{}
	}
	up.tgz[cwd] = t
	return t, nil
}

// agents caches the packed helper per content for the life of the process.
var agents sync.Map // SHA-256 → *agentUpload

func (b *Backend) helperBinary() (*agentUpload, error) {
	bin, err := b.helperBin.Load("amd64") // Vercel sandboxes are x86_64 microVMs.
	if err != nil {
		return nil, err
	}
	up, _ := agents.LoadOrStore(bin.SHA256, &agentUpload{bin: bin})
	return up.(*agentUpload), nil
}

// helperPaths are where the helper and its state live in a sandbox.
func helperPaths(cwd, sum string) (dir, bin, state string) {
	if cwd == "" {
		cwd = "/vercel/sandbox"
	}
	dir = path.Join(cwd, ".hermes")
	return dir, path.Join(dir, "sandbox-agent-"+sum), path.Join(dir, "state")
}

// tarGz packs files (name → content, mode) into a gzipped tar for fs/write.
func tarGz(files map[string][]byte, mode int64) ([]byte, error) {
	var buf bytes.Buffer
	gz, _ := gzip.NewWriterLevel(&buf, gzip.BestSpeed)
	tw := tar.NewWriter(gz)
	names := make([]string, 0, len(files))
	for n := range files {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		if err := tw.WriteHeader(&tar.Header{Name: n, Mode: mode, Size: int64(len(files[n])), ModTime: time.Now(), Typeflag: tar.TypeReg}); err != nil {
			return nil, err
		}
		if _, err := tw.Write(files[n]); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	if err := gz.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// uploadHelper puts the helper into the sandbox with one fs/write, as the SDK's writeFiles
// does: a gzipped tar extracted at "/" (x-cwd), its entry named by the path relative to
// it; the service makes the missing directories. Writing it again is harmless: the name
// holds the checksum, so a file already there has the same bytes.
func (b *Backend) uploadHelper(ctx context.Context, vm *VMSession, up *agentUpload) error {
	tgz, err := up.packed(vm.Cwd)
	if err != nil {
		return err
	}
	return b.apiErr("upload helper", vm.ID, b.api.WriteFiles(ctx, vm.ID, "/", tgz))
}

// dialHelper opens the PTY and starts the helper on it.
func (b *Backend) dialHelper(ctx context.Context, vm *VMSession, up *agentUpload) (*agent.Client, error) {
	_, bin, state := helperPaths(vm.Cwd, up.sum())
	shell := b.shell
	if shell == "" {
		shell = "auto"
	}
	cwd := vm.Cwd
	if cwd == "" {
		cwd = "/vercel/sandbox"
	}
	sub := ""
	if len(up.bin.Args) > 0 { // the binary is hermes-sandbox itself: `hermes-sandbox __agent serve`
		sub = up.bin.Args[0]
	}
	pc, err := b.openPTY(ctx, vm.ID, ptyStart{Type: "start", Command: "/bin/sh", Cwd: cwd, Env: b.passEnv(),
		Args: []string{"-c", helperScript, bin, state, cwd, shell, sub}, Cols: 200, Rows: 50})
	if err != nil {
		return nil, err
	}
	client, err := agent.NewClient(ctx, pc, pc, pc.Close)
	if err != nil {
		pc.Close()
		if code, ok := pc.exitCode(); ok {
			return nil, fmt.Errorf("the helper exited with status %d before it started (%s): %w", code, agentbin.Explain(code), err)
		}
		return nil, err
	}
	return client, nil
}

// passEnv is terminal.env_passthrough, given to the helper once, as "KEY=VALUE" strings.
func (b *Backend) passEnv() []string {
	out := []string{}
	for _, kv := range b.opts.Passthrough() {
		if k, _, ok := strings.Cut(kv, "="); ok && k != "" {
			out = append(out, kv)
		}
	}
	return out
}
