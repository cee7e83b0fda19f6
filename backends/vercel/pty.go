package vercel

// The helper channel over the session's interactive PTY WebSocket. POST …/interactive
// returns {url, token}; the socket takes one JSON start frame (the token, the program, its
// arguments, directory, environment and terminal size), then carries the terminal's bytes
// in binary frames both ways; the server ends with an {"type":"exit","exitCode":N} text
// frame, and {"type":"resize",…} frames resize the terminal. The helper is started behind
// `stty raw -echo`, so the terminal passes its framed protocol through unchanged: no echo,
// no line editing, no CR/LF translation, no signal characters, 8-bit clean.

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/coder/websocket"

	"github.com/hermes-sandbox/hermes-sandbox/internal/agent"
	"github.com/hermes-sandbox/hermes-sandbox/internal/agentbin"
)

// ptyStart is the first frame on the PTY WebSocket.
type ptyStart struct {
	Type    string            `json:"type"` // "start"
	Token   string            `json:"token"`
	Command string            `json:"command"`
	Args    []string          `json:"args"`
	Cwd     string            `json:"cwd,omitempty"`
	Env     map[string]string `json:"env,omitempty"`
	Cols    int               `json:"cols"`
	Rows    int               `json:"rows"`
}

// helperScript starts the helper on the terminal in raw mode; its own diagnostics go to a
// log file in the state directory, never into the channel. $0 is the helper, $1 the state
// directory, $2 the working directory of a fresh session, $3 the shell, $4 the subcommand
// that precedes "serve" when the binary is hermes-sandbox itself (__agent) or empty.
const helperScript = `[ -x "$0" ] || exit 98
mkdir -p "$1" || exit 97
stty raw -echo 2>/dev/null || exit 96
exec "$0" $4 serve --state "$1" --cwd "$2" --shell "$3" 2>>"$1/helper.log"`

// agentUpload is the helper binary, packed once for fs/write.
type agentUpload struct {
	sum  string // first 12 hex digits of its sha256
	data []byte
	args []string // how the binary starts its server (before "serve")

	packOnce sync.Once
	tgz      []byte
	packErr  error
}

// packed is the helper as a gzipped tar, made once per process.
func (up *agentUpload) packed() ([]byte, error) {
	up.packOnce.Do(func() {
		up.tgz, up.packErr = tarGz(map[string][]byte{"sandbox-agent-" + up.sum: up.data}, 0o755)
	})
	return up.tgz, up.packErr
}

// agents caches the helper per binary path for the life of the process.
var agents sync.Map // path → *agentUpload

func (b *Backend) helperBinary() (*agentUpload, error) {
	b.agentMu.Lock()
	defer b.agentMu.Unlock()
	if b.agent != nil {
		return b.agent, nil
	}
	// Vercel sandboxes are x86_64 microVMs.
	p, args, err := agentbin.Path("amd64")
	if err != nil {
		return nil, err
	}
	fi, err := os.Stat(p)
	if err != nil {
		return nil, err
	}
	key := fmt.Sprintf("%s\x00%d\x00%d", p, fi.Size(), fi.ModTime().UnixNano())
	if up, ok := agents.Load(key); ok {
		b.agent = up.(*agentUpload)
		return b.agent, nil
	}
	data, err := os.ReadFile(p)
	if err != nil {
		return nil, err
	}
	sum := sha256.Sum256(data)
	up, _ := agents.LoadOrStore(key, &agentUpload{sum: hex.EncodeToString(sum[:])[:12], data: data, args: args})
	b.agent = up.(*agentUpload)
	return b.agent, nil
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

// uploadHelper puts the helper into the sandbox with fs/mkdir and fs/write.
func (b *Backend) uploadHelper(ctx context.Context, vm *VMSession, up *agentUpload) error {
	dir, _, _ := helperPaths(vm.Cwd, up.sum)
	if err := b.api.Mkdir(ctx, vm.ID, dir, ""); err != nil && !isConflict(err) {
		return b.apiErr("upload helper", vm.ID, err)
	}
	tgz, err := up.packed()
	if err != nil {
		return err
	}
	return b.apiErr("upload helper", vm.ID, b.api.WriteFiles(ctx, vm.ID, dir, tgz))
}

// dialHelper opens the PTY WebSocket and starts the helper on it.
func (b *Backend) dialHelper(ctx context.Context, vm *VMSession, up *agentUpload) (*agent.Client, error) {
	wsURL, token, err := b.api.Interactive(ctx, vm.ID)
	if err != nil {
		return nil, b.apiErr("open terminal", vm.ID, err)
	}
	var hc *http.Client
	if b.extra.HTTPClient != nil {
		hc = b.extra.HTTPClient
	}
	conn, _, err := websocket.Dial(ctx, wsURL, &websocket.DialOptions{HTTPClient: hc,
		HTTPHeader: http.Header{"Authorization": {"Bearer " + token}}})
	if err != nil {
		return nil, b.apiErr("open terminal", vm.ID, fmt.Errorf("dial %s: %w", redactURL(wsURL), err))
	}
	conn.SetReadLimit(1 << 24)
	_, bin, state := helperPaths(vm.Cwd, up.sum)
	shell := b.shell
	if shell == "" {
		shell = "auto"
	}
	cwd := vm.Cwd
	if cwd == "" {
		cwd = "/vercel/sandbox"
	}
	sub := ""
	if len(up.args) > 1 { // the binary is hermes-sandbox itself: `hermes-sandbox __agent serve`
		sub = up.args[0]
	}
	start := ptyStart{Type: "start", Token: token, Command: "/bin/sh", Cwd: cwd, Env: b.passEnv(),
		Args: []string{"-c", helperScript, bin, state, cwd, shell, sub}, Cols: 200, Rows: 50}
	msg, _ := json.Marshal(start)
	if err := conn.Write(ctx, websocket.MessageText, msg); err != nil {
		conn.CloseNow()
		return nil, b.apiErr("open terminal", vm.ID, err)
	}
	// The connection lives as long as the helper, beyond this call's context.
	life, cancel := context.WithCancel(context.Background())
	nc := websocket.NetConn(life, conn, websocket.MessageBinary)
	var once sync.Once
	closeFn := func() error {
		once.Do(func() {
			conn.Close(websocket.StatusNormalClosure, "")
			cancel()
		})
		return nil
	}
	client, err := agent.NewClient(ctx, nc, nc, closeFn)
	if err != nil {
		closeFn()
		return nil, err
	}
	return client, nil
}

// passEnv is terminal.env_passthrough, given to the helper once.
func (b *Backend) passEnv() map[string]string {
	out := map[string]string{}
	for _, kv := range b.opts.Passthrough() {
		k, v, _ := strings.Cut(kv, "=")
		out[k] = v
	}
	return out
}

func redactURL(s string) string {
	if i := bytes.IndexByte([]byte(s), '?'); i >= 0 {
		return s[:i] + "?…"
	}
	return s
}
