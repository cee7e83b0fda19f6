//go:build unix

package modal

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/moby/moby/api/pkg/stdcopy"
	"github.com/moby/moby/client"
	pb "github.com/modal-labs/modal-client/go/proto/modal_proto"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

const fsToolsPath = "/__modal/.bin/modal-sandbox-fs-tools"

// argMax is what a command line may carry in a Modal exec: the service runs it with execve
// and Linux's ARG_MAX there (131072 bytes, "by probing in production", sandbox.go
// validateExecArgs). The SDK refuses more than half of it before sending anything.
const argMax = 1 << 17

// fakeRouter is the task command router: execs as real processes in the sandbox's container.
type fakeRouter struct {
	pb.UnimplementedTaskCommandRouterServer
	f *fakeModal
}

// fakeExec is one process; its output is kept from the lowest offset a reader may still ask for.
type fakeExec struct {
	id string
	sb *fakeSandbox

	mu       sync.Mutex
	changed  chan struct{} // closed and replaced when output or state changes
	out      [2][]byte     // stdout, stderr not yet acknowledged
	base     [2]uint64     // offset of out[i][0]
	outDone  bool
	exited   bool
	code     int32
	signal   int32
	written  uint64 // stdin bytes delivered
	closed   bool   // stdin EOF sent
	streams  int64  // stdin streams opened so far (each is numbered)
	evicted  int64  // streams numbered up to this one were evicted by TaskExecStdinStatus
	conn     io.WriteCloser
	closeW   func() error
	pid      int
	timedOut bool
}

func (e *fakeExec) notifyLocked() {
	close(e.changed)
	e.changed = make(chan struct{})
}

func (e *fakeExec) hasExited() bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.exited
}

// kill ends the process (its container is going away, or its timeout passed).
func (e *fakeExec) kill() {
	e.mu.Lock()
	pid := e.pid
	e.mu.Unlock()
	if pid > 0 {
		syscall.Kill(pid, syscall.SIGKILL)
	}
	e.mu.Lock()
	if !e.exited {
		e.exited, e.signal = true, 9
		e.outDone = true
		e.notifyLocked()
	}
	e.mu.Unlock()
}

// writer is where output bound for fd goes (-1: discarded).
func (e *fakeExec) writer(fd int) io.Writer {
	if fd < 0 {
		return io.Discard
	}
	return fdWriter{e, fd}
}

type fdWriter struct {
	e  *fakeExec
	fd int
}

func (w fdWriter) Write(p []byte) (int, error) {
	w.e.mu.Lock()
	w.e.out[w.fd] = append(w.e.out[w.fd], p...)
	w.e.notifyLocked()
	w.e.mu.Unlock()
	return len(p), nil
}

// sandboxOfTask checks that the router call's task matches its JWT and is running.
func (r *fakeRouter) sandboxOfTask(ctx context.Context, taskID string) (*fakeSandbox, error) {
	if taskID == "" {
		return nil, status.Error(codes.InvalidArgument, "task_id is required")
	}
	if r.f.taskOfJWT(ctx) != taskID {
		return nil, status.Error(codes.PermissionDenied, "the JWT is for another task")
	}
	r.f.mu.Lock()
	defer r.f.mu.Unlock()
	for _, sb := range r.f.sandboxes {
		if sb.taskID == taskID {
			if !sb.running() {
				return nil, status.Errorf(codes.NotFound, "task %s has finished", taskID)
			}
			return sb, nil
		}
	}
	return nil, status.Errorf(codes.NotFound, "task %s not found", taskID)
}

func (r *fakeRouter) exec(ctx context.Context, taskID, execID string) (*fakeExec, error) {
	sb, err := r.sandboxOfTask(ctx, taskID)
	if err != nil {
		return nil, err
	}
	sb.mu.Lock()
	defer sb.mu.Unlock()
	e, ok := sb.execs[execID]
	if !ok {
		return nil, status.Errorf(codes.NotFound, "exec %s not found", execID)
	}
	return e, nil
}

func (r *fakeRouter) TaskExecStart(ctx context.Context, req *pb.TaskExecStartRequest) (*pb.TaskExecStartResponse, error) {
	sb, err := r.sandboxOfTask(ctx, req.GetTaskId())
	if err != nil {
		return nil, err
	}
	args := req.GetCommandArgs()
	if req.GetExecId() == "" || len(args) == 0 {
		return nil, status.Error(codes.InvalidArgument, "exec_id and command_args are required")
	}
	n := 0
	for _, a := range args {
		n += len(a)
	}
	if n > argMax {
		return nil, status.Errorf(codes.InvalidArgument, "[Errno 7] Argument list too long: %d bytes", n)
	}
	if req.GetContainerId() != "" { // the fake's tasks have no sidecar containers
		return nil, status.Errorf(codes.NotFound, "container %s not found", req.GetContainerId())
	}
	if ids := req.GetSecretIds(); len(ids) > 0 {
		return nil, status.Errorf(codes.NotFound, "Secret %s not found", ids[0])
	}
	// Output goes where stdout_config and stderr_config say; their zero values discard it
	// (task_command_router.proto, TaskExecStdoutConfig, TaskExecStderrConfig).
	var toStdout, toStderr int
	switch req.GetStdoutConfig() {
	case pb.TaskExecStdoutConfig_TASK_EXEC_STDOUT_CONFIG_DEVNULL:
		toStdout = -1
	case pb.TaskExecStdoutConfig_TASK_EXEC_STDOUT_CONFIG_PIPE:
		toStdout = 0
	default:
		return nil, status.Errorf(codes.InvalidArgument, "unknown stdout_config %v", req.GetStdoutConfig())
	}
	switch req.GetStderrConfig() {
	case pb.TaskExecStderrConfig_TASK_EXEC_STDERR_CONFIG_DEVNULL:
		toStderr = -1
	case pb.TaskExecStderrConfig_TASK_EXEC_STDERR_CONFIG_PIPE:
		toStderr = 1
	case pb.TaskExecStderrConfig_TASK_EXEC_STDERR_CONFIG_STDOUT:
		toStderr = 0
	default:
		return nil, status.Errorf(codes.InvalidArgument, "unknown stderr_config %v", req.GetStderrConfig())
	}
	if req.HasWorkdir() && !strings.HasPrefix(req.GetWorkdir(), "/") {
		return nil, status.Error(codes.InvalidArgument, "workdir must be absolute")
	}
	if req.HasPtyInfo() {
		return nil, status.Error(codes.Unimplemented, "the fake has no PTY execs")
	}
	sb.mu.Lock()
	_, dup := sb.execs[req.GetExecId()]
	sb.mu.Unlock()
	if dup {
		return &pb.TaskExecStartResponse{}, nil // a retried start: it runs once
	}
	var env []string
	for k, v := range req.GetEnv() {
		env = append(env, k+"="+v)
	}
	for _, src := range req.GetSecretSources() {
		if !src.HasEnv() {
			return nil, status.Error(codes.NotFound, "the fake knows no stored secrets")
		}
		for k, v := range src.GetEnv().GetContents() {
			env = append(env, k+"="+v)
		}
	}
	if args[0] == fsToolsPath {
		if args, err = fsToolsCommand(args); err != nil {
			return nil, err
		}
	}
	if toStderr == 0 {
		// One descriptor for both, as the service gives: docker captures stdout and stderr
		// through pipes of their own and interleaves what they carry in no fixed order.
		args = append([]string{"/bin/sh", "-c", `exec "$@" 2>&1`, "sh"}, args...)
	}
	cli := r.f.docker
	ex, err := cli.ExecCreate(ctx, sb.containerID(), client.ExecCreateOptions{Cmd: args, Env: env, WorkingDir: req.GetWorkdir(),
		AttachStdin: true, AttachStdout: true, AttachStderr: true})
	if err != nil {
		return nil, status.Errorf(codes.NotFound, "exec in sandbox: %v", err)
	}
	hr, err := cli.ExecAttach(ctx, ex.ID, client.ExecAttachOptions{})
	if err != nil {
		return nil, status.Errorf(codes.Unavailable, "attach: %v", err)
	}
	e := &fakeExec{id: req.GetExecId(), sb: sb, changed: make(chan struct{}), conn: hr.Conn, closeW: hr.CloseWrite}
	sb.mu.Lock()
	sb.execs[e.id] = e
	sb.lastActive = time.Now()
	sb.mu.Unlock()
	if ins, err := cli.ExecInspect(ctx, ex.ID, client.ExecInspectOptions{}); err == nil {
		e.mu.Lock()
		e.pid = ins.PID
		e.mu.Unlock()
	}
	if req.HasTimeoutSecs() && req.GetTimeoutSecs() > 0 {
		time.AfterFunc(time.Duration(req.GetTimeoutSecs())*time.Second, func() {
			e.mu.Lock()
			e.timedOut = !e.exited
			e.mu.Unlock()
			e.kill()
		})
	}
	go func() {
		stdcopy.StdCopy(e.writer(toStdout), e.writer(toStderr), hr.Reader)
		hr.Close()
		var code int32 = -1
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		for ctx.Err() == nil {
			ins, err := cli.ExecInspect(ctx, ex.ID, client.ExecInspectOptions{})
			if err != nil {
				break
			}
			if !ins.Running {
				code = int32(ins.ExitCode)
				break
			}
			time.Sleep(5 * time.Millisecond)
		}
		e.mu.Lock()
		if !e.exited {
			e.exited = true
			if code < 0 {
				e.signal = 9
			} else {
				e.code = code
			}
		}
		e.outDone = true
		e.notifyLocked()
		e.mu.Unlock()
		sb.touch()
	}()
	return &pb.TaskExecStartResponse{}, nil
}

// fsToolsCommand answers the SDK's filesystem tool with a shell command doing the same, in the
// tool's contract: one JSON operation, an absolute path, errors as JSON on stderr.
func fsToolsCommand(args []string) ([]string, error) {
	if len(args) != 2 {
		return nil, status.Error(codes.InvalidArgument, "modal-sandbox-fs-tools takes one JSON argument")
	}
	var op map[string]struct {
		Path string `json:"path"`
	}
	if err := json.Unmarshal([]byte(args[1]), &op); err != nil || len(op) != 1 {
		return nil, status.Errorf(codes.InvalidArgument, "bad fs-tools request %q", args[1])
	}
	fail := func(kind, msg string) string {
		return fmt.Sprintf(`{ printf '%%s' '{"error_kind":"%s","message":"%s"}' >&2; exit 1; }`, kind, msg)
	}
	for name, o := range op {
		if !strings.HasPrefix(o.Path, "/") {
			return nil, status.Errorf(codes.InvalidArgument, "%s: path must be absolute", name)
		}
		var script string
		switch name {
		case "WriteFile":
			script = `[ -d "$1" ] && ` + fail("IsDirectory", "Is a directory") + `; mkdir -p "${1%/*}" 2>/dev/null; cat > "$1" || ` + fail("PermissionDenied", "Permission denied")
		case "ReadFile":
			script = `[ -e "$1" ] || ` + fail("NotFound", "No such file or directory") + `; [ -d "$1" ] && ` + fail("IsDirectory", "Is a directory") + `; cat "$1"`
		default:
			script = fail("Unsupported", "the fake does not implement "+name)
		}
		return []string{"/bin/sh", "-c", script, "fs-tools", o.Path}, nil
	}
	return nil, nil
}

func (r *fakeRouter) TaskExecStdinWrite(ctx context.Context, req *pb.TaskExecStdinWriteRequest) (*pb.TaskExecStdinWriteResponse, error) {
	e, err := r.exec(ctx, req.GetTaskId(), req.GetExecId())
	if err != nil {
		return nil, err
	}
	if err := e.writeStdin(req.GetOffset(), req.GetData(), req.GetEof(), -1); err != nil {
		return nil, err
	}
	return &pb.TaskExecStdinWriteResponse{}, nil
}

// writeStdin delivers data at offset: a retried write (offset below what was delivered) is
// applied once; a gap is refused. stream is the stdin stream writing (its number), -1 for
// the unary write; a stream that TaskExecStdinStatus evicted writes nothing more.
func (e *fakeExec) writeStdin(offset uint64, data []byte, eof bool, stream int64) error {
	e.sb.touch()
	e.mu.Lock()
	defer e.mu.Unlock()
	if stream >= 0 && stream <= e.evicted {
		return status.Error(codes.Aborted, "this stdin stream was evicted by TaskExecStdinStatus")
	}
	if e.closed {
		if len(data) == 0 && eof {
			return nil
		}
		return status.Error(codes.FailedPrecondition, "stdin is closed")
	}
	if offset > e.written {
		return status.Errorf(codes.OutOfRange, "stdin offset %d is past the %d bytes written", offset, e.written)
	}
	skip := e.written - offset
	if skip < uint64(len(data)) {
		if e.exited {
			return status.Error(codes.FailedPrecondition, "the process has exited")
		}
		n, err := e.conn.Write(data[skip:])
		e.written += uint64(n)
		if err != nil {
			return status.Errorf(codes.FailedPrecondition, "write stdin: %v", err)
		}
	}
	if eof {
		e.closed = true
		e.closeW()
	}
	return nil
}

func (r *fakeRouter) TaskExecStdinWriteStream(stream grpc.ClientStreamingServer[pb.TaskExecStdinWriteStreamRequest, pb.TaskExecStdinWriteStreamResponse]) error {
	first, err := stream.Recv()
	if err != nil {
		return err
	}
	if first.WhichPayload() != pb.TaskExecStdinWriteStreamRequest_Start_case {
		return status.Error(codes.InvalidArgument, "the first message must be start")
	}
	st := first.GetStart()
	e, err := r.exec(stream.Context(), st.GetTaskId(), st.GetExecId())
	if err != nil {
		return err
	}
	e.mu.Lock()
	e.streams++
	self := e.streams
	e.mu.Unlock()
	off := st.GetOffset()
	for {
		m, err := stream.Recv()
		if err != nil {
			return err // broken before End: stdin stays open for a resume
		}
		switch m.WhichPayload() {
		case pb.TaskExecStdinWriteStreamRequest_Data_case:
			if err := e.writeStdin(off, m.GetData(), false, self); err != nil {
				return err
			}
			off += uint64(len(m.GetData()))
		case pb.TaskExecStdinWriteStreamRequest_End_case:
			if err := e.writeStdin(off, nil, true, self); err != nil {
				return err
			}
			return stream.SendAndClose(&pb.TaskExecStdinWriteStreamResponse{})
		default:
			return status.Error(codes.InvalidArgument, "a second start")
		}
	}
}

func (r *fakeRouter) TaskExecStdinStatus(ctx context.Context, req *pb.TaskExecStdinStatusRequest) (*pb.TaskExecStdinStatusResponse, error) {
	e, err := r.exec(ctx, req.GetTaskId(), req.GetExecId())
	if err != nil {
		return nil, err
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	e.evicted = e.streams // evicts the stream in flight (task_command_router.proto, TaskExecStdinStatus)
	return pb.TaskExecStdinStatusResponse_builder{NumBytesWritten: e.written, Closed: e.closed}.Build(), nil
}

func (r *fakeRouter) TaskExecStdioRead(req *pb.TaskExecStdioReadRequest, stream grpc.ServerStreamingServer[pb.TaskExecStdioReadResponse]) error {
	e, err := r.exec(stream.Context(), req.GetTaskId(), req.GetExecId())
	if err != nil {
		return err
	}
	var fd int
	switch req.GetFileDescriptor() {
	case pb.TaskExecStdioFileDescriptor_TASK_EXEC_STDIO_FILE_DESCRIPTOR_STDOUT:
		fd = 0
	case pb.TaskExecStdioFileDescriptor_TASK_EXEC_STDIO_FILE_DESCRIPTOR_STDERR:
		fd = 1
	default:
		return status.Error(codes.InvalidArgument, "file_descriptor must be stdout or stderr")
	}
	off := req.GetOffset()
	for {
		e.mu.Lock()
		if off < e.base[fd] {
			e.mu.Unlock()
			return status.Errorf(codes.OutOfRange, "offset %d was already read past", off)
		}
		// What the reader asks from here on is never asked again: drop what is before it.
		drop := off - e.base[fd]
		if drop > 0 {
			e.out[fd] = e.out[fd][min(drop, uint64(len(e.out[fd]))):]
			e.base[fd] = off
		}
		var chunk []byte
		if n := len(e.out[fd]); n > 0 {
			chunk = append([]byte(nil), e.out[fd][:min(n, 1<<20)]...)
		}
		done, changed := e.outDone, e.changed
		e.mu.Unlock()
		if len(chunk) > 0 {
			if err := stream.Send(pb.TaskExecStdioReadResponse_builder{Data: chunk}.Build()); err != nil {
				return err
			}
			off += uint64(len(chunk))
			continue
		}
		if done {
			return nil
		}
		select {
		case <-changed:
		case <-stream.Context().Done():
			return status.FromContextError(stream.Context().Err()).Err()
		}
	}
}

func (r *fakeRouter) TaskExecWait(ctx context.Context, req *pb.TaskExecWaitRequest) (*pb.TaskExecWaitResponse, error) {
	e, err := r.exec(ctx, req.GetTaskId(), req.GetExecId())
	if err != nil {
		return nil, err
	}
	for {
		e.mu.Lock()
		exited, code, sig, changed := e.exited, e.code, e.signal, e.changed
		e.mu.Unlock()
		if exited {
			if sig != 0 {
				return pb.TaskExecWaitResponse_builder{Signal: &sig}.Build(), nil
			}
			return pb.TaskExecWaitResponse_builder{Code: &code}.Build(), nil
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return nil, status.FromContextError(ctx.Err()).Err()
		}
	}
}

func (r *fakeRouter) TaskSnapshotFilesystem(ctx context.Context, req *pb.TaskSnapshotFilesystemRequest) (*pb.TaskSnapshotFilesystemResponse, error) {
	sb, err := r.sandboxOfTask(ctx, req.GetTaskId())
	if err != nil {
		return nil, err
	}
	// ttl_seconds must be set, and be positive or -1 (no expiry); snapshot_id makes the
	// request idempotent (task_command_router.proto, TaskSnapshotFilesystemRequest).
	if req.GetSnapshotId() == "" {
		return nil, status.Error(codes.InvalidArgument, "snapshot_id is required")
	}
	if !req.HasTtlSeconds() || (req.GetTtlSeconds() <= 0 && req.GetTtlSeconds() != -1) {
		return nil, status.Errorf(codes.InvalidArgument, "ttl_seconds must be set to a positive number of seconds or -1, got %v", req.GetTtlSeconds())
	}
	if req.GetContainerId() != "" {
		return nil, status.Errorf(codes.NotFound, "container %s not found", req.GetContainerId())
	}
	key := req.GetTaskId() + "/" + req.GetSnapshotId()
	r.f.snapshotMu.Lock() // one commit per snapshot_id, however often it is retried
	defer r.f.snapshotMu.Unlock()
	r.f.mu.Lock()
	id, done := r.f.snapshots[key]
	r.f.mu.Unlock()
	if done {
		return pb.TaskSnapshotFilesystemResponse_builder{ImageId: id}.Build(), nil
	}
	res, err := r.f.docker.ContainerCommit(ctx, sb.containerID(), client.ContainerCommitOptions{})
	if err != nil {
		return nil, status.Errorf(codes.Internal, "snapshot: %v", err)
	}
	id = randID("im-")
	r.f.mu.Lock()
	r.f.images[id] = res.ID
	r.f.snapshots[key] = id
	r.f.committed = append(r.f.committed, res.ID)
	r.f.mu.Unlock()
	return pb.TaskSnapshotFilesystemResponse_builder{ImageId: id}.Build(), nil
}
