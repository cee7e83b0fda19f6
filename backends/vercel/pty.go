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
	"io"
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

// agentUpload is the helper binary.
type agentUpload struct {
	bin *agentbin.Binary
}

// sum is the first 12 hex digits of the helper's SHA-256, in its name in the sandbox.
func (up *agentUpload) sum() string { return up.bin.SHA256[:12] }

// agents caches the helper per content for the life of the process.
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

// uploadHelper installs the helper with agentbin.Install: its bytes go up with one fs/write,
// as the SDK's writeFiles does (a gzipped tar extracted at "/", its entry named by the path
// relative to it; the service makes the missing directories, and the gzip stream's CRC-32
// and length make it refuse a damaged upload), to a name of their own; a command checks
// their size and SHA-256 there before renaming them into place. A process starting the
// helper meanwhile finds it absent or whole, never half-written.
func (b *Backend) uploadHelper(ctx context.Context, vm *VMSession, up *agentUpload) error {
	_, bin, _ := helperPaths(vm.Cwd, up.sum())
	return b.apiErr("upload helper", vm.ID, agentbin.Install(ctx, installTarget{b, vm}, up.bin, bin))
}

// installTarget is agentbin.Target over the sandbox's file and command endpoints.
type installTarget struct {
	b  *Backend
	vm *VMSession
}

func (t installTarget) Write(ctx context.Context, p string, r io.Reader, size int64) error {
	data, err := io.ReadAll(io.LimitReader(r, size+1))
	if err != nil {
		return err
	}
	tgz, err := tarGz(map[string][]byte{strings.TrimPrefix(p, "/"): data}, 0o600)
	if err != nil {
		return err
	}
	return t.b.api.WriteFiles(ctx, t.vm.ID, "/", tgz)
}

func (t installTarget) Run(ctx context.Context, script string, args ...string) (int, string, error) {
	var out bytes.Buffer
	cmd, err := t.b.api.RunCommand(ctx, t.vm.ID, RunCommandRequest{Command: "/bin/sh", Args: append([]string{"-c", script, "sh"}, args...)}, &out, &out, nil)
	if err != nil {
		return 0, "", err
	}
	if cmd.ExitCode == nil {
		return 0, out.String(), fmt.Errorf("the install command %s ended without an exit status", cmd.ID)
	}
	return *cmd.ExitCode, out.String(), nil
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
