//go:build unix

package modal

// The fake against the vendor's contract: requests put together by hand, as the SDK would
// send them or with one thing changed, and what the fake must answer. Each check here fails
// when the rule it names is taken out of the fake.

import (
	"context"
	"errors"
	"io"
	"strings"
	"testing"
	"time"

	pb "github.com/modal-labs/modal-client/go/proto/modal_proto"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/hermes-sandbox/hermes-sandbox/sandbox"
)

// rawClient speaks to the fake with no SDK in between: every header is the test's own.
type rawClient struct {
	f    *fakeModal
	cp   pb.ModalClientClient
	tr   pb.TaskCommandRouterClient
	auth string // an auth token from AuthTokenGet
}

func newRaw(t *testing.T, f *fakeModal) *rawClient {
	t.Helper()
	conn, err := grpc.NewClient(f.addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	r := &rawClient{f: f, cp: pb.NewModalClientClient(conn), tr: pb.NewTaskCommandRouterClient(conn)}
	resp, err := r.cp.AuthTokenGet(r.ctx(t, "x-modal-auth-token", ""), &pb.AuthTokenGetRequest{})
	if err != nil {
		t.Fatalf("AuthTokenGet with the SDK's headers = %v", err)
	}
	r.auth = resp.GetToken()
	return r
}

// ctx carries the headers the SDK puts on a unary control-plane call (client.go,
// injectRequiredHeaders and authTokenInterceptor), with key, value pairs replacing them; an
// empty value leaves the key out.
func (r *rawClient) ctx(t *testing.T, kv ...string) context.Context {
	h := map[string]string{
		"x-modal-client-type":      "9", // pb.ClientType_CLIENT_TYPE_LIBMODAL_GO
		"x-modal-client-version":   "1.0.0",
		"x-modal-libmodal-version": "modal-go/0.11.1",
		"x-modal-host":             "127.0.0.1",
		"x-modal-token-id":         r.f.tokenID,
		"x-modal-token-secret":     r.f.tokenSecret,
		"x-modal-auth-token":       r.auth,
	}
	for i := 0; i+1 < len(kv); i += 2 {
		h[kv[i]] = kv[i+1]
	}
	md := metadata.MD{}
	for k, v := range h {
		if v != "" {
			md.Set(k, v)
		}
	}
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	t.Cleanup(cancel)
	return metadata.NewOutgoingContext(ctx, md)
}

// bearer carries a router call's only header, as the SDK's authContext sets it.
func bearer(t *testing.T, value string) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	t.Cleanup(cancel)
	return metadata.AppendToOutgoingContext(ctx, "authorization", value)
}

func wantCode(t *testing.T, what string, err error, want codes.Code) {
	t.Helper()
	if got := status.Code(err); got != want {
		t.Errorf("%s = %v; want %v", what, err, want)
	}
}

// sandbox makes a running sandbox the way the SDK does and returns its id, task and a router
// JWT for the task.
func (r *rawClient) sandbox(t *testing.T) (id, task, jwt string) {
	t.Helper()
	app, err := r.cp.AppGetOrCreate(r.ctx(t), pb.AppGetOrCreateRequest_builder{AppName: "contract",
		ObjectCreationType: pb.ObjectCreationType_OBJECT_CREATION_TYPE_CREATE_IF_MISSING}.Build())
	if err != nil {
		t.Fatal(err)
	}
	img := r.image(t, app.GetAppId(), "busybox:latest")
	sb, err := r.cp.SandboxCreate(r.ctx(t), pb.SandboxCreateRequest_builder{AppId: app.GetAppId(),
		Definition: pb.Sandbox_builder{ImageId: img, TimeoutSecs: 600, Name: proto.String("")}.Build()}.Build())
	if err != nil {
		t.Fatal(err)
	}
	tid, err := r.cp.SandboxGetTaskId(r.ctx(t), pb.SandboxGetTaskIdRequest_builder{SandboxId: sb.GetSandboxId()}.Build())
	if err != nil || tid.GetTaskId() == "" {
		t.Fatalf("SandboxGetTaskId = %v, %v", tid, err)
	}
	acc, err := r.cp.TaskGetCommandRouterAccess(r.ctx(t), pb.TaskGetCommandRouterAccessRequest_builder{TaskId: tid.GetTaskId()}.Build())
	if err != nil {
		t.Fatal(err)
	}
	return sb.GetSandboxId(), tid.GetTaskId(), acc.GetJwt()
}

// image builds a registry image as the SDK does (image.go, Build): ImageGetOrCreate, then
// ImageJoinStreaming when the build has not finished.
func (r *rawClient) image(t *testing.T, appID, tag string) string {
	t.Helper()
	resp, err := r.cp.ImageGetOrCreate(r.ctx(t), pb.ImageGetOrCreateRequest_builder{AppId: appID,
		Image: pb.Image_builder{DockerfileCommands: []string{"FROM " + tag}}.Build(), BuilderVersion: "2024.10"}.Build())
	if err != nil {
		t.Fatal(err)
	}
	if resp.GetResult() == nil {
		if res := r.join(t, resp.GetImageId(), ""); res.GetStatus() != pb.GenericResult_GENERIC_STATUS_SUCCESS {
			t.Fatalf("build of %s: %v", tag, res)
		}
	}
	return resp.GetImageId()
}

// join follows a build on ImageJoinStreaming (a stream: no auth token, as the SDK sends it).
func (r *rawClient) join(t *testing.T, imageID, lastEntry string) *pb.GenericResult {
	t.Helper()
	st, err := r.cp.ImageJoinStreaming(r.ctx(t, "x-modal-auth-token", ""), pb.ImageJoinStreamingRequest_builder{
		ImageId: imageID, Timeout: 55, LastEntryId: lastEntry}.Build())
	if err != nil {
		t.Fatal(err)
	}
	for {
		m, err := st.Recv()
		if err != nil {
			t.Fatalf("ImageJoinStreaming ended without a result: %v", err)
		}
		if m.GetResult().GetStatus() != pb.GenericResult_GENERIC_STATUS_UNSPECIFIED {
			return m.GetResult()
		}
	}
}

// TestFakeControlPlaneMetadata: a control-plane call is refused unless it carries what the
// SDK's interceptors put on it; a stream is accepted without the auth token, which the SDK
// never puts on streams.
func TestFakeControlPlaneMetadata(t *testing.T) {
	f := newFake(t)
	r := newRaw(t, f)
	env := func(ctx context.Context) error {
		_, err := r.cp.EnvironmentGetOrCreate(ctx, pb.EnvironmentGetOrCreateRequest_builder{}.Build())
		return err
	}
	if err := env(r.ctx(t)); err != nil {
		t.Fatalf("EnvironmentGetOrCreate with the SDK's headers = %v", err)
	}
	for _, tc := range []struct {
		kv   []string
		want codes.Code
	}{
		{[]string{"x-modal-client-type", ""}, codes.InvalidArgument},
		{[]string{"x-modal-client-type", "0"}, codes.InvalidArgument},
		{[]string{"x-modal-client-type", "libmodal-go"}, codes.InvalidArgument},
		{[]string{"x-modal-client-version", ""}, codes.InvalidArgument},
		{[]string{"x-modal-token-id", ""}, codes.Unauthenticated},
		{[]string{"x-modal-token-secret", "as-wrong"}, codes.Unauthenticated},
		{[]string{"x-modal-auth-token", ""}, codes.Unauthenticated},
		{[]string{"x-modal-auth-token", jwt(map[string]any{"exp": time.Now().Add(time.Hour).Unix()})}, codes.Unauthenticated},
	} {
		wantCode(t, "EnvironmentGetOrCreate with "+strings.Join(tc.kv, "="), env(r.ctx(t, tc.kv...)), tc.want)
	}
	// The auth token expires (its exp claim), and a fresh one is accepted.
	f.advance(f.authTTL)
	wantCode(t, "EnvironmentGetOrCreate with an expired auth token", env(r.ctx(t)), codes.Unauthenticated)
	r = newRaw(t, f)
	if err := env(r.ctx(t)); err != nil {
		t.Errorf("EnvironmentGetOrCreate with a new auth token = %v", err)
	}
	// Streams: the SDK sends the token pair but no auth token (client.go, newClient).
	st, err := r.cp.ImageJoinStreaming(r.ctx(t, "x-modal-auth-token", ""), pb.ImageJoinStreamingRequest_builder{ImageId: "im-none"}.Build())
	if err == nil {
		_, err = st.Recv()
	}
	wantCode(t, "ImageJoinStreaming of an unknown image without an auth token", err, codes.NotFound)
	st, err = r.cp.ImageJoinStreaming(r.ctx(t, "x-modal-auth-token", "", "x-modal-token-secret", "as-wrong"), pb.ImageJoinStreamingRequest_builder{ImageId: "im-none"}.Build())
	if err == nil {
		_, err = st.Recv()
	}
	wantCode(t, "ImageJoinStreaming with a wrong token secret", err, codes.Unauthenticated)
	// Environments: one the workspace does not have is not found.
	wantCode(t, "EnvironmentGetOrCreate(nope)", func() error {
		_, err := r.cp.EnvironmentGetOrCreate(r.ctx(t), pb.EnvironmentGetOrCreateRequest_builder{DeploymentName: "nope"}.Build())
		return err
	}(), codes.NotFound)
	_, err = r.cp.AppGetOrCreate(r.ctx(t), pb.AppGetOrCreateRequest_builder{AppName: "a", EnvironmentName: "nope",
		ObjectCreationType: pb.ObjectCreationType_OBJECT_CREATION_TYPE_CREATE_IF_MISSING}.Build())
	wantCode(t, "AppGetOrCreate in environment nope", err, codes.NotFound)
	_, err = r.cp.SandboxList(r.ctx(t), pb.SandboxListRequest_builder{EnvironmentName: "nope"}.Build())
	wantCode(t, "SandboxList in environment nope", err, codes.NotFound)
}

// TestFakeRouterJWT: a router call is refused without the task's JWT as a bearer token, or
// once the JWT has expired; the SDK then fetches a new one and goes on.
func TestFakeRouterJWT(t *testing.T) {
	f := newFake(t)
	f.jwtTTL = 20 * time.Second // set before any call reads it

	// The SDK fetches a new JWT on UNAUTHENTICATED when its own expires within 30 s
	// (task_command_router_client.go, refreshJwt): the session outlives its JWT.
	b := newBackend(t, f, t.TempDir(), nil)
	sess := open(t, b, "jwt")
	run(t, sess, "true")
	before := f.count("TaskGetCommandRouterAccess")
	f.advance(time.Minute)
	if res := run(t, sess, "echo after"); res.Stdout != "after\n" {
		t.Errorf("Exec after the router JWT expired = %q; want after", res.Stdout)
	}
	if f.count("TaskGetCommandRouterAccess") == before {
		t.Errorf("the session went on with an expired router JWT")
	}

	r := newRaw(t, f)
	_, task, tok := r.sandbox(t)
	_, _, other := r.sandbox(t)
	status1 := func(ctx context.Context) error {
		_, err := r.tr.TaskExecStdinStatus(ctx, pb.TaskExecStdinStatusRequest_builder{TaskId: task, ExecId: "none"}.Build())
		return err
	}
	wantCode(t, "TaskExecStdinStatus with the task's JWT (no such exec)", status1(bearer(t, "Bearer "+tok)), codes.NotFound)
	for _, tc := range []struct {
		name, value string
		want        codes.Code
	}{
		{"no authorization", "", codes.Unauthenticated},
		{"the JWT without Bearer", tok, codes.Unauthenticated},
		{"a JWT the fake never issued", "Bearer " + jwt(map[string]any{"exp": time.Now().Add(time.Hour).Unix()}), codes.Unauthenticated},
		{"the control-plane auth token", "Bearer " + r.auth, codes.Unauthenticated},
		{"another task's JWT", "Bearer " + other, codes.PermissionDenied},
	} {
		ctx := bearer(t, tc.value)
		if tc.value == "" {
			ctx = t.Context()
		}
		wantCode(t, "TaskExecStdinStatus with "+tc.name, status1(ctx), tc.want)
	}
	f.advance(f.jwtTTL)
	wantCode(t, "TaskExecStdinStatus with an expired JWT", status1(bearer(t, "Bearer "+tok)), codes.Unauthenticated)
}

// startExec starts argv in task as the SDK builds the request (sandbox.go,
// buildTaskExecStartRequestProto), mut changing it, and returns its exec id.
func (r *rawClient) startExec(t *testing.T, task, tok string, argv []string, mut func(*pb.TaskExecStartRequest_builder)) (string, error) {
	t.Helper()
	b := pb.TaskExecStartRequest_builder{TaskId: task, ExecId: randID("ex-"), CommandArgs: argv,
		StdoutConfig: pb.TaskExecStdoutConfig_TASK_EXEC_STDOUT_CONFIG_PIPE,
		StderrConfig: pb.TaskExecStderrConfig_TASK_EXEC_STDERR_CONFIG_PIPE}
	if mut != nil {
		mut(&b)
	}
	_, err := r.tr.TaskExecStart(bearer(t, "Bearer "+tok), b.Build())
	return b.ExecId, err
}

// read returns all of an exec's output on fd, to the stream's end.
func (r *rawClient) read(t *testing.T, task, tok, exec string, fd pb.TaskExecStdioFileDescriptor) string {
	t.Helper()
	st, err := r.tr.TaskExecStdioRead(bearer(t, "Bearer "+tok), pb.TaskExecStdioReadRequest_builder{TaskId: task, ExecId: exec,
		FileDescriptor: fd}.Build())
	if err != nil {
		t.Fatal(err)
	}
	var out []byte
	for {
		m, err := st.Recv()
		if errors.Is(err, io.EOF) {
			return string(out)
		}
		if err != nil {
			t.Fatalf("TaskExecStdioRead(%v) = %v", fd, err)
		}
		out = append(out, m.GetData()...)
	}
}

// TestFakeExecStart: output goes where stdout_config and stderr_config say (their zero values
// discard it); a sidecar container, stored secrets and command lines past ARG_MAX are refused,
// and the limit is the service's, not the SDK's smaller one.
func TestFakeExecStart(t *testing.T) {
	f := newFake(t)
	r := newRaw(t, f)
	_, task, tok := r.sandbox(t)
	script := []string{"/bin/sh", "-c", "echo out; echo err >&2"}
	const (
		stdout = pb.TaskExecStdioFileDescriptor_TASK_EXEC_STDIO_FILE_DESCRIPTOR_STDOUT
		stderr = pb.TaskExecStdioFileDescriptor_TASK_EXEC_STDIO_FILE_DESCRIPTOR_STDERR
	)
	for _, tc := range []struct {
		name           string
		out            pb.TaskExecStdoutConfig
		err            pb.TaskExecStderrConfig
		wantOut, wantE string
	}{
		{"pipe, pipe", pb.TaskExecStdoutConfig_TASK_EXEC_STDOUT_CONFIG_PIPE, pb.TaskExecStderrConfig_TASK_EXEC_STDERR_CONFIG_PIPE, "out\n", "err\n"},
		{"unset (devnull)", 0, 0, "", ""},
		{"pipe, to stdout", pb.TaskExecStdoutConfig_TASK_EXEC_STDOUT_CONFIG_PIPE, pb.TaskExecStderrConfig_TASK_EXEC_STDERR_CONFIG_STDOUT, "out\nerr\n", ""},
	} {
		id, err := r.startExec(t, task, tok, script, func(b *pb.TaskExecStartRequest_builder) {
			b.StdoutConfig, b.StderrConfig = tc.out, tc.err
		})
		if err != nil {
			t.Fatalf("TaskExecStart(%s) = %v", tc.name, err)
		}
		if o, e := r.read(t, task, tok, id, stdout), r.read(t, task, tok, id, stderr); o != tc.wantOut || e != tc.wantE {
			t.Errorf("TaskExecStart(%s): stdout %q, stderr %q; want %q, %q", tc.name, o, e, tc.wantOut, tc.wantE)
		}
	}
	for _, tc := range []struct {
		name string
		argv []string
		mut  func(*pb.TaskExecStartRequest_builder)
		want codes.Code
	}{
		{"a sidecar container", script, func(b *pb.TaskExecStartRequest_builder) { b.ContainerId = "ctr-none" }, codes.NotFound},
		{"a stored secret", script, func(b *pb.TaskExecStartRequest_builder) { b.SecretIds = []string{"st-none"} }, codes.NotFound},
		{"a stored secret source", script, func(b *pb.TaskExecStartRequest_builder) {
			b.SecretSources = []*pb.SecretSource{pb.SecretSource_builder{SecretId: proto.String("st-none")}.Build()}
		}, codes.NotFound},
		{"an unknown stdout_config", script, func(b *pb.TaskExecStartRequest_builder) { b.StdoutConfig = 7 }, codes.InvalidArgument},
		{"a relative workdir", script, func(b *pb.TaskExecStartRequest_builder) { b.Workdir = proto.String("tmp") }, codes.InvalidArgument},
		{"200 KB of argv", []string{"/bin/true", strings.Repeat("a", 200_000)}, nil, codes.InvalidArgument},
		{"100 KB of argv (over the SDK's own limit only)", []string{"/bin/true", strings.Repeat("a", 100_000)}, nil, codes.OK},
	} {
		_, err := r.startExec(t, task, tok, tc.argv, tc.mut)
		wantCode(t, "TaskExecStart with "+tc.name, err, tc.want)
	}
}

// TestFakeStdinStatusEvicts: TaskExecStdinStatus ends the stdin stream in flight, so a
// resumed stream and a stale one never both write.
func TestFakeStdinStatusEvicts(t *testing.T) {
	f := newFake(t)
	r := newRaw(t, f)
	_, task, tok := r.sandbox(t)
	exec, err := r.startExec(t, task, tok, []string{"/bin/sh", "-c", "head -c 1; echo; cat >/dev/null"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	st, err := r.tr.TaskExecStdinWriteStream(bearer(t, "Bearer "+tok))
	if err != nil {
		t.Fatal(err)
	}
	send := func(m *pb.TaskExecStdinWriteStreamRequest) {
		if err := st.Send(m); err != nil && !errors.Is(err, io.EOF) {
			t.Fatal(err)
		}
	}
	send(pb.TaskExecStdinWriteStreamRequest_builder{Start: pb.TaskExecStdinWriteStreamStart_builder{TaskId: task, ExecId: exec}.Build()}.Build())
	send(pb.TaskExecStdinWriteStreamRequest_builder{Data: []byte("a")}.Build())
	// The process printed what it read: the first byte is in.
	outSt, err := r.tr.TaskExecStdioRead(bearer(t, "Bearer "+tok), pb.TaskExecStdioReadRequest_builder{TaskId: task, ExecId: exec}.Build())
	if err != nil {
		t.Fatal(err)
	}
	var echoed []byte
	for len(echoed) < 2 {
		m, err := outSt.Recv()
		if err != nil {
			t.Fatalf("the process's output = %q, %v; want a", echoed, err)
		}
		echoed = append(echoed, m.GetData()...)
	}
	if string(echoed) != "a\n" {
		t.Fatalf("the process read %q; want a", echoed)
	}
	ss, err := r.tr.TaskExecStdinStatus(bearer(t, "Bearer "+tok), pb.TaskExecStdinStatusRequest_builder{TaskId: task, ExecId: exec}.Build())
	if err != nil || ss.GetNumBytesWritten() != 1 || ss.GetClosed() {
		t.Fatalf("TaskExecStdinStatus = %v, %v; want 1 byte, open", ss, err)
	}
	send(pb.TaskExecStdinWriteStreamRequest_builder{Data: []byte("bc")}.Build())
	send(pb.TaskExecStdinWriteStreamRequest_builder{End: &pb.TaskExecStdinWriteStreamEnd{}}.Build())
	_, err = st.CloseAndRecv()
	wantCode(t, "the stdin stream after TaskExecStdinStatus", err, codes.Aborted)
	ss, err = r.tr.TaskExecStdinStatus(bearer(t, "Bearer "+tok), pb.TaskExecStdinStatusRequest_builder{TaskId: task, ExecId: exec}.Build())
	if err != nil || ss.GetNumBytesWritten() != 1 || ss.GetClosed() {
		t.Errorf("TaskExecStdinStatus after the evicted stream = %v, %v; want 1 byte, open", ss, err)
	}
}

// TestFakeSnapshotFilesystem: ttl_seconds must be set (positive or -1) and snapshot_id makes a
// retried snapshot the same image.
func TestFakeSnapshotFilesystem(t *testing.T) {
	f := newFake(t)
	r := newRaw(t, f)
	_, task, tok := r.sandbox(t)
	snap := func(id string, ttl *int64, ctr string) (string, error) {
		resp, err := r.tr.TaskSnapshotFilesystem(bearer(t, "Bearer "+tok), pb.TaskSnapshotFilesystemRequest_builder{TaskId: task,
			SnapshotId: id, TtlSeconds: ttl, ContainerId: ctr}.Build())
		return resp.GetImageId(), err
	}
	for _, tc := range []struct {
		name string
		ttl  *int64
		ctr  string
		want codes.Code
	}{
		{"no ttl_seconds", nil, "", codes.InvalidArgument},
		{"ttl_seconds 0", proto.Int64(0), "", codes.InvalidArgument},
		{"ttl_seconds -2", proto.Int64(-2), "", codes.InvalidArgument},
		{"a sidecar container", proto.Int64(60), "ctr-none", codes.NotFound},
	} {
		_, err := snap(randID("sn-"), tc.ttl, tc.ctr)
		wantCode(t, "TaskSnapshotFilesystem with "+tc.name, err, tc.want)
	}
	id := randID("sn-")
	first, err := snap(id, proto.Int64(-1), "")
	if err != nil || !strings.HasPrefix(first, "im-") {
		t.Fatalf("TaskSnapshotFilesystem(ttl -1) = %q, %v", first, err)
	}
	if again, err := snap(id, proto.Int64(-1), ""); err != nil || again != first {
		t.Errorf("TaskSnapshotFilesystem retried with the same snapshot_id = %q, %v; want %q", again, err, first)
	}
}

// TestFakeSandboxShapes: what the control plane answers about sandboxes and images has the
// service's shape.
func TestFakeSandboxShapes(t *testing.T) {
	f := newFake(t)
	r := newRaw(t, f)
	id, task, _ := r.sandbox(t)
	// A sandbox that ran and ended keeps its task id next to the result.
	sb, err := f.sandbox(id)
	if err != nil {
		t.Fatal(err)
	}
	f.terminate(sb, pb.GenericResult_GENERIC_STATUS_TERMINATED)
	resp, err := r.cp.SandboxGetTaskId(r.ctx(t), pb.SandboxGetTaskIdRequest_builder{SandboxId: id}.Build())
	if err != nil || resp.GetTaskId() != task || resp.GetTaskResult().GetStatus() != pb.GenericResult_GENERIC_STATUS_TERMINATED {
		t.Errorf("SandboxGetTaskId of an ended sandbox = %v, %v; want task %s and its result", resp, err, task)
	}
	w, err := r.cp.SandboxWait(r.ctx(t), pb.SandboxWaitRequest_builder{SandboxId: id}.Build())
	if err != nil || w.GetMetadata().GetAppId() == "" || w.GetResult() == nil {
		t.Errorf("SandboxWait = %v, %v; want the result and the app in its metadata", w, err)
	}
	// A first build answers without a result; the build is followed on ImageJoinStreaming.
	app, err := r.cp.AppGetOrCreate(r.ctx(t), pb.AppGetOrCreateRequest_builder{AppName: "contract"}.Build())
	if err != nil {
		t.Fatal(err)
	}
	build := func() *pb.ImageGetOrCreateResponse {
		resp, err := r.cp.ImageGetOrCreate(r.ctx(t), pb.ImageGetOrCreateRequest_builder{AppId: app.GetAppId(),
			Image: pb.Image_builder{DockerfileCommands: []string{"FROM python:3.12-slim"}}.Build(), BuilderVersion: "2024.10"}.Build())
		if err != nil {
			t.Fatal(err)
		}
		return resp
	}
	first := build()
	if first.GetResult() != nil {
		t.Errorf("a first build answered with a result: %v", first.GetResult())
	}
	if res := r.join(t, first.GetImageId(), ""); res.GetStatus() != pb.GenericResult_GENERIC_STATUS_SUCCESS {
		t.Errorf("ImageJoinStreaming = %v; want success", res)
	}
	if again := build(); again.GetImageId() != first.GetImageId() || again.GetResult().GetStatus() != pb.GenericResult_GENERIC_STATUS_SUCCESS {
		t.Errorf("the same recipe again = %v; want %s, built", again, first.GetImageId())
	}
	// A stored secret the workspace does not have.
	_, err = r.cp.SandboxCreate(r.ctx(t), pb.SandboxCreateRequest_builder{AppId: app.GetAppId(), Definition: pb.Sandbox_builder{
		ImageId: first.GetImageId(), TimeoutSecs: 60, SecretIds: []string{"st-none"}}.Build()}.Build())
	wantCode(t, "SandboxCreate with an unknown secret", err, codes.NotFound)
	// The backend against an environment the workspace does not have.
	b := newBackend(t, f, t.TempDir(), nil)
	b.creds.Environment = "nope"
	if err := b.Check(ctxT(t, time.Minute)); !errors.Is(err, sandbox.ErrNotFound) {
		t.Errorf("Check in environment nope = %v; want ErrNotFound", err)
	}
}
