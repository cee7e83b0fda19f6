package channel

// A session owner holds one session's warm backend session (its helper stream, its
// container, its SSH connection) in a long-lived process, and serves it to short-lived CLI
// processes over a private unix socket, like ssh's ControlMaster. The policy gate, approvals
// and the audit log stay in the calling process: the owner only runs what it is sent. It
// speaks the helper's framing (internal/agent) with a session-level vocabulary: a command
// and its result, stdin, output, a cancel, and calls for jobs and files.

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net"
	"os"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/hermes-sandbox/hermes-sandbox/internal/agent"
	"github.com/hermes-sandbox/hermes-sandbox/sandbox"
)

// OwnerVersion is the owner protocol's version; the client refuses another.
const OwnerVersion = 1

// Owner protocol frame types.
const (
	oExec   = 'R' // client: JSON ownerExec
	oStdin  = 'I' // client: stdin bytes
	oEOF    = 'E' // client: end of stdin
	oCancel = 'S' // client: cancel the request (the command's tree is killed)
	oCall   = 'C' // client: JSON ownerCall
	oRetire = 'Q' // client: stop taking new clients and exit when idle
	oHello  = 'H' // owner: JSON OwnerHello, first
	oStdout = 'o'
	oStderr = 'e'
	oResult = 'x' // owner: JSON ownerResult
	oReply  = 'r' // owner: JSON reply to a call
	oError  = '!' // owner: JSON wireError
)

// OwnerHello is the owner's greeting.
type OwnerHello struct {
	Version      int                  `json:"version"`
	PID          int                  `json:"pid"`
	Backend      string               `json:"backend"`
	Session      string               `json:"session"`
	Fingerprint  string               `json:"fingerprint"`
	Capabilities sandbox.Capabilities `json:"capabilities"`
	Jobs         bool                 `json:"jobs"`
	Files        bool                 `json:"files"`
	// WorkDir is the backend's sandbox.Workspace directory ("" = none).
	WorkDir string `json:"work_dir,omitempty"`
}

type ownerExec struct {
	Script      agent.Bytes            `json:"script,omitempty"`
	Argv        []agent.Bytes          `json:"argv,omitempty"`
	Dir         string                 `json:"dir,omitempty"`
	Env         map[string]agent.Bytes `json:"env,omitempty"`
	TimeoutNS   int64                  `json:"timeout_ns,omitempty"`
	OutputLimit int                    `json:"output_limit,omitempty"`
	Stdin       bool                   `json:"stdin,omitempty"`
	Stream      bool                   `json:"stream,omitempty"`
}

func (e ownerExec) command() sandbox.Command {
	argv := make([]string, len(e.Argv))
	for i, a := range e.Argv {
		argv[i] = string(a)
	}
	if len(argv) == 0 {
		argv = nil
	}
	var env map[string]string
	if e.Env != nil {
		env = make(map[string]string, len(e.Env))
		for k, v := range e.Env {
			env[k] = string(v)
		}
	}
	return sandbox.Command{Script: string(e.Script), Argv: argv, Dir: e.Dir, Env: env,
		Timeout: time.Duration(e.TimeoutNS), OutputLimit: e.OutputLimit}
}

func execOf(c sandbox.Command) ownerExec {
	return ownerExec{Script: agent.Bytes(c.Script), Argv: agent.BytesSlice(c.Argv), Dir: c.Dir, Env: agent.BytesMap(c.Env),
		TimeoutNS: int64(c.Timeout), OutputLimit: c.OutputLimit, Stdin: c.Stdin != nil, Stream: c.Stdout != nil || c.Stderr != nil}
}

type ownerResult struct {
	Result        *sandbox.Result `json:"result,omitempty"`
	DurationNS    int64           `json:"duration_ns,omitempty"`
	StateNotSaved bool            `json:"state_not_saved,omitempty"`
	Err           *wireError      `json:"error,omitempty"`
}

type ownerCall struct {
	Op     string     `json:"op"`
	Path   string     `json:"path,omitempty"`
	Offset int64      `json:"offset,omitempty"`
	Limit  int64      `json:"limit,omitempty"`
	Mode   uint32     `json:"mode,omitempty"`
	Data   []byte     `json:"data,omitempty"`
	JobID  string     `json:"job_id,omitempty"`
	Exec   *ownerExec `json:"exec,omitempty"`
	WaitNS int64      `json:"wait_ns,omitempty"`
}

// wireError carries an error's message and the sentinel it matches.
type wireError struct {
	Kind    string `json:"kind"`
	Message string `json:"message"`
}

var wireKinds = []struct {
	kind string
	err  error
}{
	{"canceled", context.Canceled}, {"deadline", context.DeadlineExceeded},
	{"not_found", sandbox.ErrNotFound}, {"closed", sandbox.ErrClosed}, {"timeout", sandbox.ErrTimeout},
	{"denied", sandbox.ErrDenied}, {"unsupported", sandbox.ErrUnsupported}, {"invalid", sandbox.ErrInvalidConfig},
	{"unavailable", sandbox.ErrUnavailable}, {"limit", ErrLimit}, {"permission", fs.ErrPermission},
	{"conn_lost", agent.ErrConnLost},
}

func toWire(err error) *wireError {
	if err == nil {
		return nil
	}
	w := &wireError{Kind: "other", Message: err.Error()}
	for _, k := range wireKinds {
		if errors.Is(err, k.err) {
			w.Kind = k.kind
			break
		}
	}
	return w
}

func (w *wireError) err() error {
	if w == nil {
		return nil
	}
	for _, k := range wireKinds {
		if k.kind == w.Kind {
			return sandbox.WithKind(k.err, errors.New(w.Message))
		}
	}
	return errors.New(w.Message)
}

// OwnerOptions configure Serve.
type OwnerOptions struct {
	Hello OwnerHello
	// KeepAlive is how long the owner stays with no client before Serve returns.
	KeepAlive time.Duration
	// Socket, if set, is the path clients dial: once it is gone (removed with the state
	// directory, or by a newer owner's start), the owner takes no new clients and exits
	// when its current ones are done.
	Socket string
	Logger *slog.Logger
}

// socketCheck is how often an owner looks for its socket.
const socketCheck = 2 * time.Second

// Serve serves sess to the clients of ln until it has had no client for KeepAlive, a client
// retires it, or ctx ends. Only connections from this user are accepted. When a client goes
// away, the commands it started are cancelled, which kills their process trees.
func Serve(ctx context.Context, ln *net.UnixListener, sess sandbox.Session, opts OwnerOptions) error {
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	o := &owner{sess: sess, hello: opts.Hello, log: log, idle: make(chan struct{}, 1), retiredC: make(chan struct{})}
	o.hello.Version = OwnerVersion
	o.hello.PID = os.Getpid()
	_, o.hello.Jobs = sess.(sandbox.JobRunner)
	_, o.hello.Files = sess.(sandbox.FileSystem)
	ctx, stop := context.WithCancel(ctx)
	defer stop()
	accepted := make(chan net.Conn)
	go func() {
		defer close(accepted)
		for {
			c, err := ln.AcceptUnix()
			if err != nil {
				return
			}
			if !samePeer(c) {
				log.Warn("refused a connection from another user")
				c.Close()
				continue
			}
			select {
			case accepted <- c:
			case <-ctx.Done():
				c.Close()
				return
			}
		}
	}()
	var wg sync.WaitGroup
	defer wg.Wait()
	defer ln.Close()
	timer := time.NewTimer(opts.KeepAlive)
	defer timer.Stop()
	retired := o.retire()
	var check <-chan time.Time
	var sockIno uint64
	if opts.Socket != "" {
		var st unix.Stat_t
		_ = unix.Stat(opts.Socket, &st)
		sockIno = st.Ino
		t := time.NewTicker(socketCheck)
		defer t.Stop()
		check = t.C
	}
	for {
		select {
		case <-ctx.Done():
			return nil
		case c, ok := <-accepted:
			if !ok {
				return nil
			}
			o.mu.Lock()
			o.clients++
			o.mu.Unlock()
			timer.Stop()
			wg.Add(1)
			go func() {
				defer wg.Done()
				o.serveConn(ctx, c)
				o.mu.Lock()
				o.clients--
				last := o.clients == 0
				o.mu.Unlock()
				if last {
					select {
					case o.idle <- struct{}{}:
					default:
					}
				}
			}()
		case <-o.idle:
			o.mu.Lock()
			n, retired := o.clients, o.retired
			o.mu.Unlock()
			if n == 0 {
				if retired {
					return nil
				}
				timer.Reset(opts.KeepAlive)
			}
		case <-retired:
			// Stop taking clients (the socket goes); finish with the ones connected.
			retired = nil
			ln.Close()
			o.mu.Lock()
			n := o.clients
			o.mu.Unlock()
			if n == 0 {
				return nil
			}
		case <-check:
			var st unix.Stat_t
			if unix.Stat(opts.Socket, &st) != nil || st.Ino != sockIno {
				log.Debug("socket gone; retiring", "socket", opts.Socket)
				o.setRetired()
			}
		case <-timer.C:
			o.mu.Lock()
			n := o.clients
			o.mu.Unlock()
			if n == 0 {
				log.Debug("idle; exiting", "keep_alive", opts.KeepAlive)
				return nil
			}
		}
	}
}

// samePeer reports whether the other end of c runs as this user (SO_PEERCRED).
func samePeer(c *net.UnixConn) bool {
	raw, err := c.SyscallConn()
	if err != nil {
		return false
	}
	var cred *unix.Ucred
	var cerr error
	if err := raw.Control(func(fd uintptr) {
		cred, cerr = unix.GetsockoptUcred(int(fd), unix.SOL_SOCKET, unix.SO_PEERCRED)
	}); err != nil || cerr != nil {
		return false
	}
	return cred.Uid == uint32(os.Getuid())
}

type owner struct {
	sess  sandbox.Session
	hello OwnerHello
	log   *slog.Logger
	idle  chan struct{}

	mu       sync.Mutex
	clients  int
	retired  bool
	retiredC chan struct{}
}

func (o *owner) retire() <-chan struct{} {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.retiredC
}

func (o *owner) setRetired() {
	o.mu.Lock()
	defer o.mu.Unlock()
	if !o.retired {
		o.retired = true
		close(o.retiredC)
	}
}

// request is one exec or call in flight on a connection.
type request struct {
	cancel context.CancelFunc
	stdin  *byteQueue
}

func (o *owner) serveConn(ctx context.Context, c net.Conn) {
	defer c.Close()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel() // the client is gone: its commands are cancelled and their trees killed
	fw := agent.NewFrameWriter(c)
	if err := fw.WriteJSON(oHello, 0, o.hello); err != nil {
		return
	}
	var mu sync.Mutex
	reqs := map[uint32]*request{}
	var wg sync.WaitGroup
	// The client is gone (or the owner stops): cancel its requests first, which kills their
	// commands' trees, then wait for them.
	defer wg.Wait()
	defer cancel()
	start := func(id uint32, stdin *byteQueue, fn func(ctx context.Context, r *request)) {
		rctx, rcancel := context.WithCancel(ctx)
		r := &request{cancel: rcancel, stdin: stdin}
		mu.Lock()
		reqs[id] = r
		mu.Unlock()
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer rcancel()
			fn(rctx, r)
			mu.Lock()
			delete(reqs, id)
			mu.Unlock()
		}()
	}
	br := bufio.NewReaderSize(c, 64<<10)
	for {
		f, err := agent.ReadFrame(br)
		if err != nil {
			mu.Lock()
			for _, r := range reqs {
				if r.stdin != nil {
					r.stdin.close()
				}
			}
			mu.Unlock()
			return
		}
		mu.Lock()
		r := reqs[f.ID]
		mu.Unlock()
		switch f.Type {
		case oExec:
			var ex ownerExec
			if err := json.Unmarshal(f.Payload, &ex); err != nil {
				_ = fw.WriteJSON(oResult, f.ID, ownerResult{Err: toWire(fmt.Errorf("bad request: %v: %w", err, sandbox.ErrInvalidConfig))})
				continue
			}
			var q *byteQueue
			if ex.Stdin {
				q = newByteQueue()
			}
			start(f.ID, q, func(ctx context.Context, r *request) {
				o.exec(ctx, fw, f.ID, ex, q)
			})
		case oStdin:
			if r != nil && r.stdin != nil {
				r.stdin.push(f.Payload)
			}
		case oEOF:
			if r != nil && r.stdin != nil {
				r.stdin.close()
			}
		case oCancel:
			if r != nil {
				r.cancel()
			}
		case oCall:
			var call ownerCall
			if err := json.Unmarshal(f.Payload, &call); err != nil {
				_ = fw.WriteJSON(oError, f.ID, toWire(fmt.Errorf("bad call: %v: %w", err, sandbox.ErrInvalidConfig)))
				continue
			}
			start(f.ID, nil, func(ctx context.Context, r *request) {
				reply, err := o.call(ctx, call)
				if err != nil {
					_ = fw.WriteJSON(oError, f.ID, toWire(err))
					return
				}
				_ = fw.WriteJSON(oReply, f.ID, reply)
			})
		case oRetire:
			o.setRetired()
		}
	}
}

// frameOut streams one kind of output frame for a request.
type frameOut struct {
	fw  *agent.FrameWriter
	typ byte
	id  uint32
}

func (w frameOut) Write(p []byte) (int, error) {
	// A client that stopped reading loses its live copy; the result still has the output.
	_ = w.fw.Write(w.typ, w.id, p)
	return len(p), nil
}

func (o *owner) exec(ctx context.Context, fw *agent.FrameWriter, id uint32, ex ownerExec, stdin *byteQueue) {
	cmd := ex.command()
	if stdin != nil {
		cmd.Stdin = stdin
	}
	if ex.Stream {
		cmd.Stdout = frameOut{fw, oStdout, id}
		cmd.Stderr = frameOut{fw, oStderr, id}
	}
	res, err := o.sess.Exec(ctx, cmd)
	if stdin != nil {
		stdin.close()
	}
	out := ownerResult{Result: res, Err: toWire(err)}
	if res != nil {
		out.DurationNS, out.StateNotSaved = int64(res.Duration), res.StateNotSaved
	}
	_ = fw.WriteJSON(oResult, id, out)
}

func (o *owner) call(ctx context.Context, c ownerCall) (any, error) {
	jr, jobs := o.sess.(sandbox.JobRunner)
	fsys, files := o.sess.(sandbox.FileSystem)
	unsupported := fmt.Errorf("%s: %w", c.Op, sandbox.ErrUnsupported)
	switch c.Op {
	case "read_file", "write_file", "list_dir":
		if !files {
			return nil, unsupported
		}
	default:
		if !jobs {
			return nil, unsupported
		}
	}
	if c.WaitNS > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, time.Duration(c.WaitNS))
		defer cancel()
	}
	switch c.Op {
	case "read_file":
		return fsys.ReadFile(ctx, c.Path, c.Offset, c.Limit)
	case "write_file":
		return struct{}{}, fsys.WriteFile(ctx, c.Path, c.Data, c.Mode)
	case "list_dir":
		return fsys.ListDir(ctx, c.Path)
	case "job_start":
		if c.Exec == nil {
			return nil, fmt.Errorf("job_start without a command: %w", sandbox.ErrInvalidConfig)
		}
		return jr.StartJob(ctx, c.Exec.command())
	case "job_list":
		return jr.Jobs(ctx)
	case "job_poll":
		return jr.PollJob(ctx, c.JobID)
	case "job_wait":
		return jr.WaitJob(ctx, c.JobID)
	case "job_kill":
		return jr.KillJob(ctx, c.JobID)
	}
	return nil, fmt.Errorf("unknown call %q: %w", c.Op, sandbox.ErrInvalidConfig)
}

// byteQueue is an io.Reader fed without blocking: a command's stdin, held until it reads.
type byteQueue struct {
	mu     sync.Mutex
	cond   *sync.Cond
	chunks [][]byte
	closed bool
}

func newByteQueue() *byteQueue {
	q := &byteQueue{}
	q.cond = sync.NewCond(&q.mu)
	return q
}

func (q *byteQueue) push(p []byte) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if !q.closed {
		q.chunks = append(q.chunks, p)
		q.cond.Signal()
	}
}

// close ends the input: a reader gets what is queued, then EOF.
func (q *byteQueue) close() {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.closed = true
	q.cond.Broadcast()
}

func (q *byteQueue) Read(p []byte) (int, error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	for len(q.chunks) == 0 && !q.closed {
		q.cond.Wait()
	}
	if len(q.chunks) == 0 {
		return 0, io.EOF
	}
	n := copy(p, q.chunks[0])
	if n == len(q.chunks[0]) {
		q.chunks = q.chunks[1:]
	} else {
		q.chunks[0] = q.chunks[0][n:]
	}
	return n, nil
}
