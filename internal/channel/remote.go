package channel

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"time"

	"github.com/hermes-sandbox/hermes-sandbox/internal/agent"
	"github.com/hermes-sandbox/hermes-sandbox/sandbox"
)

// Remote is a session served by a session owner (see Serve), reached through its socket. It
// implements sandbox.Session, JobRunner and FileSystem; a call the owner's session does not
// support fails with sandbox.ErrUnsupported.
type Remote struct {
	conn  net.Conn
	fw    *agent.FrameWriter
	hello OwnerHello

	mu      sync.Mutex
	nextID  uint32
	calls   map[uint32]*remoteCall
	err     error
	done    chan struct{}
	closing bool
}

type remoteCall struct {
	stdout, stderr io.Writer
	result         chan agent.Frame
}

// ErrNoOwner says no owner listens on the socket (none was started, or it exited).
var ErrNoOwner = errors.New("no session owner")

// DialOwner connects to the owner listening on path and reads its greeting.
func DialOwner(ctx context.Context, path string) (*Remote, error) {
	var d net.Dialer
	conn, err := d.DialContext(ctx, "unix", path)
	if err != nil {
		return nil, fmt.Errorf("%w at %s: %v", ErrNoOwner, path, err)
	}
	if dl, ok := ctx.Deadline(); ok {
		conn.SetReadDeadline(dl)
	}
	br := bufio.NewReaderSize(conn, 64<<10)
	f, err := agent.ReadFrame(br)
	var h OwnerHello
	if err == nil && (f.Type != oHello || json.Unmarshal(f.Payload, &h) != nil) {
		err = errors.New("bad greeting")
	}
	if err != nil {
		conn.Close()
		return nil, fmt.Errorf("%w at %s: %v", ErrNoOwner, path, err)
	}
	if h.Version != OwnerVersion {
		conn.Close()
		return nil, fmt.Errorf("%w at %s: it speaks protocol %d, this client %d", ErrNoOwner, path, h.Version, OwnerVersion)
	}
	conn.SetReadDeadline(time.Time{})
	r := &Remote{conn: conn, fw: agent.NewFrameWriter(conn), hello: h, calls: map[uint32]*remoteCall{}, done: make(chan struct{})}
	go r.readLoop(br)
	return r, nil
}

// Hello returns the owner's greeting.
func (r *Remote) Hello() OwnerHello { return r.hello }

// Name returns the session name.
func (r *Remote) Name() string { return r.hello.Session }

// Retire asks the owner to take no new clients and to exit once its current ones are done.
func (r *Remote) Retire() error { return r.fw.Write(oRetire, 0, nil) }

// Close disconnects; the owner cancels whatever this client still runs.
func (r *Remote) Close() error {
	r.mu.Lock()
	if r.closing {
		r.mu.Unlock()
		return nil
	}
	r.closing = true
	r.mu.Unlock()
	err := r.conn.Close()
	<-r.done
	return err
}

func (r *Remote) readLoop(br *bufio.Reader) {
	var err error
	for {
		var f agent.Frame
		if f, err = agent.ReadFrame(br); err != nil {
			break
		}
		r.mu.Lock()
		c := r.calls[f.ID]
		r.mu.Unlock()
		if c == nil {
			continue
		}
		switch f.Type {
		case oStdout:
			if c.stdout != nil {
				c.stdout.Write(f.Payload)
			}
		case oStderr:
			if c.stderr != nil {
				c.stderr.Write(f.Payload)
			}
		case oResult, oReply, oError:
			r.mu.Lock()
			delete(r.calls, f.ID)
			r.mu.Unlock()
			c.result <- f
		}
	}
	r.mu.Lock()
	r.err = fmt.Errorf("the session owner went away: %v: %w", err, agent.ErrConnLost)
	if r.closing {
		r.err = sandbox.ErrClosed
	}
	for id, c := range r.calls {
		delete(r.calls, id)
		close(c.result)
	}
	r.mu.Unlock()
	close(r.done)
}

func (r *Remote) wrap(op string, err error) error {
	if err == nil {
		return nil
	}
	var se *sandbox.Error
	if errors.As(err, &se) {
		return err
	}
	return &sandbox.Error{Backend: r.hello.Backend, Op: op, ID: r.hello.Session, Err: err}
}

// send registers a request and sends its first frame.
func (r *Remote) send(typ byte, payload any, c *remoteCall) (uint32, error) {
	r.mu.Lock()
	if r.err != nil || r.closing {
		r.mu.Unlock()
		return 0, sandbox.ErrClosed
	}
	r.nextID++
	id := r.nextID
	c.result = make(chan agent.Frame, 1)
	r.calls[id] = c
	r.mu.Unlock()
	if err := r.fw.WriteJSON(typ, id, payload); err != nil {
		r.mu.Lock()
		delete(r.calls, id)
		r.mu.Unlock()
		return 0, fmt.Errorf("%w: %v", agent.ErrConnLost, err)
	}
	return id, nil
}

// await waits for a request's last frame; when ctx ends first it cancels the request on the
// owner and still waits (bounded) for the answer, which then says the command was killed.
func (r *Remote) await(ctx context.Context, id uint32, c *remoteCall) (agent.Frame, error) {
	select {
	case f, ok := <-c.result:
		if !ok {
			return f, r.lostErr()
		}
		return f, nil
	case <-ctx.Done():
	}
	_ = r.fw.Write(oCancel, id, nil)
	t := time.NewTimer(15 * time.Second)
	defer t.Stop()
	select {
	case f, ok := <-c.result:
		if !ok {
			return f, r.lostErr()
		}
		return f, nil
	case <-t.C:
		return agent.Frame{}, fmt.Errorf("the session owner did not confirm the cancel: %w", ctx.Err())
	}
}

func (r *Remote) lostErr() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.err
}

// Exec runs cmd in the owner's session.
func (r *Remote) Exec(ctx context.Context, cmd sandbox.Command) (*sandbox.Result, error) {
	if cmd.Script == "" && len(cmd.Argv) == 0 {
		return nil, r.wrap("exec", fmt.Errorf("empty command: %w", sandbox.ErrInvalidConfig))
	}
	c := &remoteCall{stdout: cmd.Stdout, stderr: cmd.Stderr}
	id, err := r.send(oExec, execOf(cmd), c)
	if err != nil {
		return nil, r.wrap("exec", err)
	}
	if cmd.Stdin != nil {
		stop := make(chan struct{})
		pumped := make(chan struct{})
		go func() {
			defer close(pumped)
			r.pumpStdin(id, cmd.Stdin, stop)
		}()
		defer agent.EndPump(cmd.Stdin, stop, pumped)
	}
	f, err := r.await(ctx, id, c)
	if err != nil {
		return nil, r.wrap("exec", err)
	}
	var out ownerResult
	if err := json.Unmarshal(f.Payload, &out); err != nil {
		return nil, r.wrap("exec", fmt.Errorf("bad result from the session owner: %w", err))
	}
	if out.Result != nil {
		out.Result.Duration = time.Duration(out.DurationNS)
		out.Result.StateNotSaved = out.StateNotSaved
	}
	return out.Result, out.Err.err()
}

func (r *Remote) pumpStdin(id uint32, in io.Reader, stop <-chan struct{}) {
	buf := make([]byte, 32<<10)
	for {
		n, err := in.Read(buf)
		select {
		case <-stop:
			return
		default:
		}
		if n > 0 && r.fw.Write(oStdin, id, buf[:n]) != nil {
			return
		}
		if err != nil {
			_ = r.fw.Write(oEOF, id, nil)
			return
		}
	}
}

// call performs a job or file call and decodes its reply into out.
func (r *Remote) call(ctx context.Context, op string, req ownerCall, out any) error {
	if dl, ok := ctx.Deadline(); ok {
		req.WaitNS = int64(time.Until(dl))
	}
	c := &remoteCall{}
	id, err := r.send(oCall, req, c)
	if err != nil {
		return r.wrap(op, err)
	}
	f, err := r.await(ctx, id, c)
	if err != nil {
		return r.wrap(op, err)
	}
	if f.Type == oError {
		var we wireError
		if err := json.Unmarshal(f.Payload, &we); err != nil {
			return r.wrap(op, fmt.Errorf("bad error from the session owner: %s", f.Payload))
		}
		return we.err()
	}
	if out == nil {
		return nil
	}
	return json.Unmarshal(f.Payload, out)
}

// ReadFile reads up to limit bytes (0 = all) from offset.
func (r *Remote) ReadFile(ctx context.Context, p string, offset, limit int64) ([]byte, error) {
	var b []byte
	err := r.call(ctx, "read "+p, ownerCall{Op: "read_file", Path: p, Offset: offset, Limit: limit}, &b)
	if err == nil && b == nil {
		b = []byte{}
	}
	return b, err
}

// WriteFile writes data to p.
func (r *Remote) WriteFile(ctx context.Context, p string, data []byte, mode uint32) error {
	return r.call(ctx, "write "+p, ownerCall{Op: "write_file", Path: p, Data: data, Mode: mode}, nil)
}

// ListDir lists a directory.
func (r *Remote) ListDir(ctx context.Context, p string) ([]sandbox.FileInfo, error) {
	var out []sandbox.FileInfo
	return out, r.call(ctx, "list "+p, ownerCall{Op: "list_dir", Path: p}, &out)
}

// StartJob starts a background job.
func (r *Remote) StartJob(ctx context.Context, cmd sandbox.Command) (sandbox.JobStatus, error) {
	ex := execOf(cmd)
	var st sandbox.JobStatus
	return st, r.call(ctx, "job start", ownerCall{Op: "job_start", Exec: &ex}, &st)
}

// Jobs lists background jobs.
func (r *Remote) Jobs(ctx context.Context) ([]sandbox.JobStatus, error) {
	var out []sandbox.JobStatus
	return out, r.call(ctx, "job list", ownerCall{Op: "job_list"}, &out)
}

// PollJob returns a job's new output.
func (r *Remote) PollJob(ctx context.Context, id string) (sandbox.JobOutput, error) {
	var out sandbox.JobOutput
	return out, r.call(ctx, "job poll", ownerCall{Op: "job_poll", JobID: id}, &out)
}

// WaitJob waits for a job to end, or for ctx.
func (r *Remote) WaitJob(ctx context.Context, id string) (sandbox.JobOutput, error) {
	var out sandbox.JobOutput
	return out, r.call(ctx, "job wait", ownerCall{Op: "job_wait", JobID: id}, &out)
}

// KillJob kills a job's whole process tree.
func (r *Remote) KillJob(ctx context.Context, id string) (sandbox.JobStatus, error) {
	var st sandbox.JobStatus
	return st, r.call(ctx, "job kill", ownerCall{Op: "job_kill", JobID: id}, &st)
}

// RemoteBackend presents an owner's session as a backend with that one session, so the gate
// can wrap it like any other.
type RemoteBackend struct{ R *Remote }

// Name returns the owner's backend name.
func (b RemoteBackend) Name() string { return b.R.hello.Backend }

// Capabilities returns the owner's backend capabilities.
func (b RemoteBackend) Capabilities() sandbox.Capabilities { return b.R.hello.Capabilities }

// Open returns the owner's session; it has no other.
func (b RemoteBackend) Open(ctx context.Context, name string) (sandbox.Session, error) {
	if name != b.R.hello.Session {
		return nil, &sandbox.Error{Backend: b.Name(), Op: "open", ID: name, Err: fmt.Errorf("this owner serves session %q: %w", b.R.hello.Session, sandbox.ErrNotFound)}
	}
	return b.R, nil
}

// Close closes the connection to the owner.
func (b RemoteBackend) Close() error { return b.R.Close() }

// WorkDir is the owner's backend's working tree.
func (b RemoteBackend) WorkDir() string { return b.R.hello.WorkDir }

var (
	_ sandbox.Session    = (*Remote)(nil)
	_ sandbox.JobRunner  = (*Remote)(nil)
	_ sandbox.FileSystem = (*Remote)(nil)
	_ sandbox.Backend    = RemoteBackend{}
	_ sandbox.Workspace  = RemoteBackend{}
)
