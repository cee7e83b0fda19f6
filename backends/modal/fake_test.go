//go:build unix

package modal

// A fake Modal for tests: a gRPC server on loopback implementing the SDK's own generated
// interfaces (pb.ModalClientServer, pb.TaskCommandRouterServer). Each sandbox is a real docker
// container and each exec a real process in it (through the Engine API). Requests are checked
// against the contract, as the Modal Go SDK v0.11.1 sends them and the .proto comments document
// them (credentials, auth token, router JWT, names, tags, timeouts, resources), and what real
// Modal refuses is refused. fake_auth_test.go checks what every call carries, fake_image_test.go
// builds images, fake_router_test.go is the command router; fake_contract_test.go tests the
// fake itself against the contract.

import (
	"context"
	"crypto/rand"
	"net"
	"regexp"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/client"
	pb "github.com/modal-labs/modal-client/go/proto/modal_proto"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/emptypb"
)

const maxSandboxTTL = 24 * 60 * 60

var (
	objectName = regexp.MustCompile(`^[a-zA-Z0-9\-_.]{1,64}$`)
	appIDShape = regexp.MustCompile(`^ap-[a-zA-Z0-9]{22}$`)
	// knownGPUs are the types Modal offers.
	knownGPUs = map[string]bool{"T4": true, "L4": true, "A10G": true, "A100": true, "A100-40GB": true,
		"A100-80GB": true, "L40S": true, "H100": true, "H200": true, "B200": true}
)

// fakeModal is the control plane; fakeRouter (fake_router_test.go) the task command router.
type fakeModal struct {
	pb.UnimplementedModalClientServer

	t           testing.TB
	docker      *client.Client
	label       string            // docker label key=value put on everything made
	registry    map[string]string // registry tag → local docker image
	tokenID     string
	tokenSecret string
	envID       string
	authTTL     time.Duration // lifetime of the auth tokens AuthTokenGet issues
	jwtTTL      time.Duration // lifetime of the router JWTs TaskGetCommandRouterAccess issues
	skew        atomic.Int64  // nanoseconds the fake's clock is ahead (advance)
	addr        string
	srv         *grpc.Server
	router      *fakeRouter
	ending      sync.WaitGroup // terminations still removing their containers
	snapshotMu  sync.Mutex     // held while a snapshot is committed
	scheduling  sync.WaitGroup // SandboxCreate calls still making their containers

	mu          sync.Mutex
	closed      bool                   // no more sandboxes are accepted
	authTokens  map[string]time.Time   // auth token → expiry
	jwts        map[string]routerGrant // router JWT → task and expiry
	apps        map[string]string      // name → app id
	images      map[string]string      // image id → docker image (built images only)
	builds      map[string]*imageBuild // image id → its build
	recipes     map[string]string      // Dockerfile commands → image id
	snapshots   map[string]string      // snapshot_id → image id
	committed   []string               // docker images made by snapshots
	sandboxes   map[string]*fakeSandbox
	gpuCapacity map[string]int
	calls       map[string]int
	failures    map[string][]codes.Code // injected failures per method, consumed in order
	lostReplies map[string]int          // calls whose reply is lost after they took effect
	creates     []*pb.SandboxCreateRequest
}

type fakeSandbox struct {
	id, taskID, appID, name string
	imageID                 string
	tags                    map[string]string
	def                     *pb.Sandbox
	container               string // "" until it is scheduled
	created                 time.Time

	mu         sync.Mutex
	result     *pb.GenericResult // nil while running
	scheduled  bool              // it got a task (a container)
	done       chan struct{}
	execs      map[string]*fakeExec
	lastActive time.Time
	stopTimer  func()
}

func randID(prefix string) string {
	const alphabet = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
	var b [22]byte
	rand.Read(b[:])
	for i := range b {
		b[i] = alphabet[int(b[i])%len(alphabet)]
	}
	return prefix + string(b[:])
}

// startFake starts the fake on a loopback port; everything it made is removed at cleanup.
func startFake(t testing.TB, cli *client.Client, dockerImage, label string) *fakeModal {
	t.Helper()
	f := &fakeModal{t: t, docker: cli, label: label,
		registry:    map[string]string{"python:3.12-slim": dockerImage, "busybox:latest": dockerImage},
		tokenID:     "ak-" + randID(""),
		tokenSecret: "as-" + randID(""),
		envID:       "en-" + randID(""),
		authTTL:     time.Hour, jwtTTL: time.Hour,
		authTokens: map[string]time.Time{}, jwts: map[string]routerGrant{}, apps: map[string]string{},
		images: map[string]string{}, builds: map[string]*imageBuild{}, recipes: map[string]string{},
		snapshots: map[string]string{}, sandboxes: map[string]*fakeSandbox{},
		gpuCapacity: map[string]int{"T4": 1}, calls: map[string]int{}, failures: map[string][]codes.Code{}, lostReplies: map[string]int{}}
	f.router = &fakeRouter{f: f}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	f.addr = ln.Addr().String()
	f.srv = grpc.NewServer(grpc.ChainUnaryInterceptor(f.unaryAuth), grpc.ChainStreamInterceptor(f.streamAuth))
	pb.RegisterModalClientServer(f.srv, f)
	pb.RegisterTaskCommandRouterServer(f.srv, f.router)
	go f.srv.Serve(ln)
	t.Cleanup(f.close)
	return f
}

func (f *fakeModal) url() string { return "http://" + f.addr }

func (f *fakeModal) close() {
	f.srv.Stop()
	f.mu.Lock()
	f.closed = true
	sbs := make([]*fakeSandbox, 0, len(f.sandboxes))
	for _, sb := range f.sandboxes {
		sbs = append(sbs, sb)
	}
	committed := f.committed
	f.mu.Unlock()
	for _, sb := range sbs {
		f.terminate(sb, pb.GenericResult_GENERIC_STATUS_TERMINATED)
	}
	// A sandbox still being scheduled removes its container once it sees it was terminated; one
	// that ended on its own (idle, timeout) may still be removing its container.
	f.scheduling.Wait()
	f.ending.Wait()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for _, img := range committed {
		f.docker.ImageRemove(ctx, img, client.ImageRemoveOptions{Force: true, PruneChildren: true})
	}
}

// count returns how many times a method (short name) was called.
func (f *fakeModal) count(method string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.calls[method]
}

// failNext makes the next calls of method fail with these codes, in order.
func (f *fakeModal) failNext(method string, c ...codes.Code) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.failures[method] = append(f.failures[method], c...)
}

// sandboxByName returns the running sandbox with this name, if any.
func (f *fakeModal) sandboxByName(name string) *fakeSandbox {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, sb := range f.sandboxes {
		if sb.name == name && sb.running() {
			return sb
		}
	}
	return nil
}

func (f *fakeModal) running() []*fakeSandbox {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []*fakeSandbox
	for _, sb := range f.sandboxes {
		if sb.running() {
			out = append(out, sb)
		}
	}
	return out
}

// containerID is the sandbox's container ("" until it is scheduled).
func (sb *fakeSandbox) containerID() string {
	sb.mu.Lock()
	defer sb.mu.Unlock()
	return sb.container
}

func (sb *fakeSandbox) running() bool {
	sb.mu.Lock()
	defer sb.mu.Unlock()
	return sb.result == nil
}

func (f *fakeModal) AppGetOrCreate(ctx context.Context, req *pb.AppGetOrCreateRequest) (*pb.AppGetOrCreateResponse, error) {
	if err := environment(req.GetEnvironmentName()); err != nil {
		return nil, err
	}
	name := req.GetAppName()
	if !objectName.MatchString(name) || appIDShape.MatchString(name) {
		return nil, status.Errorf(codes.InvalidArgument, "Invalid App name: '%s'", name)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	id, ok := f.apps[name]
	if !ok {
		if req.GetObjectCreationType() != pb.ObjectCreationType_OBJECT_CREATION_TYPE_CREATE_IF_MISSING {
			return nil, status.Errorf(codes.NotFound, "App '%s' not found", name)
		}
		id = randID("ap-")
		f.apps[name] = id
	}
	return pb.AppGetOrCreateResponse_builder{AppId: id}.Build(), nil
}

func (f *fakeModal) appExists(id string) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, a := range f.apps {
		if a == id {
			return true
		}
	}
	return false
}

// validateTags applies the tag rules: non-empty unique names, bounded sizes.
func validateTags(tags []*pb.SandboxTag) (map[string]string, error) {
	out := map[string]string{}
	if len(tags) > 50 {
		return nil, status.Error(codes.InvalidArgument, "at most 50 tags")
	}
	for _, t := range tags {
		n := t.GetTagName()
		if n == "" || len(n) > 256 || len(t.GetTagValue()) > 256 {
			return nil, status.Errorf(codes.InvalidArgument, "invalid tag %q", n)
		}
		if _, dup := out[n]; dup {
			return nil, status.Errorf(codes.InvalidArgument, "duplicate tag %q", n)
		}
		out[n] = t.GetTagValue()
	}
	return out, nil
}

func (f *fakeModal) SandboxCreate(ctx context.Context, req *pb.SandboxCreateRequest) (*pb.SandboxCreateResponse, error) {
	def := req.GetDefinition()
	if def == nil {
		return nil, status.Error(codes.InvalidArgument, "definition is required")
	}
	if !f.appExists(req.GetAppId()) {
		return nil, status.Error(codes.NotFound, "App not found")
	}
	f.mu.Lock()
	local, ok := f.images[def.GetImageId()]
	f.mu.Unlock()
	if !ok {
		return nil, status.Errorf(codes.NotFound, "Image %q not found", def.GetImageId())
	}
	name := def.GetName()
	if name != "" && (!objectName.MatchString(name) || appIDShape.MatchString(name)) {
		return nil, status.Errorf(codes.InvalidArgument, "Invalid Sandbox name: '%s'", name)
	}
	if t := def.GetTimeoutSecs(); t == 0 || t > maxSandboxTTL {
		return nil, status.Errorf(codes.InvalidArgument, "timeout must be between 1 and %d seconds, got %d", maxSandboxTTL, t)
	}
	if def.HasIdleTimeoutSecs() && def.GetIdleTimeoutSecs() == 0 {
		return nil, status.Error(codes.InvalidArgument, "idle_timeout must be positive")
	}
	if def.HasWorkdir() && !strings.HasPrefix(def.GetWorkdir(), "/") {
		return nil, status.Error(codes.InvalidArgument, "workdir must be absolute")
	}
	if ids := def.GetSecretIds(); len(ids) > 0 { // the fake stores no secrets
		return nil, status.Errorf(codes.NotFound, "Secret %s not found", ids[0])
	}
	na := def.GetNetworkAccess()
	switch na.GetNetworkAccessType() {
	case pb.NetworkAccess_BLOCKED:
		if len(na.GetAllowedCidrs())+len(na.GetAllowedDomains()) > 0 {
			return nil, status.Error(codes.InvalidArgument, "a blocked network takes no allowlist")
		}
	case pb.NetworkAccess_ALLOWLIST:
		for _, c := range na.GetAllowedCidrs() {
			if _, _, err := net.ParseCIDR(c); err != nil {
				return nil, status.Errorf(codes.InvalidArgument, "invalid CIDR %q", c)
			}
		}
	}
	res := def.GetResources()
	if g := res.GetGpuConfig(); g.GetGpuType() != "" || g.GetCount() > 0 {
		if !knownGPUs[g.GetGpuType()] || g.GetCount() < 1 {
			return nil, status.Errorf(codes.InvalidArgument, "unknown GPU %q (count %d)", g.GetGpuType(), g.GetCount())
		}
		f.mu.Lock()
		free := f.gpuCapacity[g.GetGpuType()]
		f.mu.Unlock()
		if free < int(g.GetCount()) {
			return nil, status.Errorf(codes.ResourceExhausted, "no capacity for %d × %s GPU", g.GetCount(), g.GetGpuType())
		}
	}
	tags, err := validateTags(req.GetTags())
	if err != nil {
		return nil, err
	}
	// The name is taken the moment the request is accepted, before the sandbox is scheduled
	// (here: before its container exists), and the check and the taking are one step: the
	// service lets only one running sandbox hold a name within an App, so of simultaneous
	// creates one makes the sandbox and the rest get ALREADY_EXISTS (the SDK turns it into
	// AlreadyExistsError; Modal's Python client reports the same status as
	// "Sandbox with this name already exists"). SandboxGetFromName finds the sandbox at once,
	// and SandboxGetTaskId reports no task until it is scheduled.
	sb := &fakeSandbox{id: randID("sb-"), taskID: randID("ta-"), appID: req.GetAppId(), name: name,
		imageID: def.GetImageId(), tags: tags, def: def, created: time.Now(), done: make(chan struct{}),
		execs: map[string]*fakeExec{}, lastActive: time.Now()}
	f.mu.Lock()
	if f.closed {
		f.mu.Unlock()
		return nil, status.Error(codes.Unavailable, "the server is shutting down")
	}
	if name != "" {
		for _, other := range f.sandboxes {
			if other.appID == req.GetAppId() && other.name == name && other.running() {
				f.mu.Unlock()
				return nil, status.Error(codes.AlreadyExists, "Sandbox with this name already exists")
			}
		}
	}
	f.sandboxes[sb.id] = sb
	f.creates = append(f.creates, req)
	f.scheduling.Add(1)
	f.mu.Unlock()
	defer f.scheduling.Done()
	cmd := def.GetEntrypointArgs()
	if len(cmd) == 0 {
		cmd = []string{"sleep", "2147483647"}
	}
	k, v, _ := strings.Cut(f.label, "=")
	hc := &container.HostConfig{NetworkMode: "none", Init: boolPtr(true)}
	if mb := res.GetMemoryMb(); mb > 0 {
		hc.Resources.Memory = int64(mb) << 20
	}
	cr, err := f.docker.ContainerCreate(ctx, client.ContainerCreateOptions{Config: &container.Config{Image: local, Cmd: cmd, WorkingDir: def.GetWorkdir(),
		Labels: map[string]string{k: v}}, HostConfig: hc})
	if err != nil {
		f.terminate(sb, pb.GenericResult_GENERIC_STATUS_FAILURE)
		return nil, status.Errorf(codes.Internal, "create container: %v", err)
	}
	if _, err := f.docker.ContainerStart(ctx, cr.ID, client.ContainerStartOptions{}); err != nil {
		f.docker.ContainerRemove(context.WithoutCancel(ctx), cr.ID, client.ContainerRemoveOptions{Force: true})
		f.terminate(sb, pb.GenericResult_GENERIC_STATUS_FAILURE)
		return nil, status.Errorf(codes.Internal, "start container: %v", err)
	}
	ttl := time.AfterFunc(time.Duration(def.GetTimeoutSecs())*time.Second, func() {
		f.terminate(sb, pb.GenericResult_GENERIC_STATUS_TIMEOUT)
	})
	stop := make(chan struct{})
	sb.mu.Lock()
	ended := sb.result != nil // terminated while it was being scheduled
	if !ended {
		sb.container, sb.scheduled = cr.ID, true
		sb.lastActive = time.Now()
		sb.stopTimer = func() { ttl.Stop(); close(stop) }
	}
	sb.mu.Unlock()
	if ended {
		ttl.Stop()
		f.docker.ContainerRemove(context.WithoutCancel(ctx), cr.ID, client.ContainerRemoveOptions{Force: true})
		return pb.SandboxCreateResponse_builder{SandboxId: sb.id}.Build(), nil
	}
	if def.HasIdleTimeoutSecs() {
		idle := time.Duration(def.GetIdleTimeoutSecs()) * time.Second
		go func() {
			tick := time.NewTicker(100 * time.Millisecond)
			defer tick.Stop()
			for {
				select {
				case <-stop:
					return
				case <-tick.C:
					if sb.idleFor() > idle {
						f.terminate(sb, pb.GenericResult_GENERIC_STATUS_IDLE_TIMEOUT)
						return
					}
				}
			}
		}()
	}
	return pb.SandboxCreateResponse_builder{SandboxId: sb.id}.Build(), nil
}

func boolPtr(b bool) *bool { return &b }

// idleFor is how long nothing ran in the sandbox and nothing was sent to it.
func (sb *fakeSandbox) idleFor() time.Duration {
	sb.mu.Lock()
	defer sb.mu.Unlock()
	for _, e := range sb.execs {
		if !e.hasExited() {
			return 0
		}
	}
	return time.Since(sb.lastActive)
}

func (sb *fakeSandbox) touch() {
	sb.mu.Lock()
	sb.lastActive = time.Now()
	sb.mu.Unlock()
}

// terminate ends a sandbox (its container is removed) with the given status.
func (f *fakeModal) terminate(sb *fakeSandbox, st pb.GenericResult_GenericStatus) bool {
	sb.mu.Lock()
	if sb.result != nil {
		sb.mu.Unlock()
		return false
	}
	sb.result = pb.GenericResult_builder{Status: st}.Build()
	f.ending.Add(1)
	defer f.ending.Done()
	execs := make([]*fakeExec, 0, len(sb.execs))
	for _, e := range sb.execs {
		execs = append(execs, e)
	}
	stop, ctr := sb.stopTimer, sb.container
	sb.mu.Unlock()
	if stop != nil {
		stop()
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if ctr != "" { // else SandboxCreate, still scheduling it, removes the container it makes
		f.docker.ContainerRemove(ctx, ctr, client.ContainerRemoveOptions{Force: true})
	}
	for _, e := range execs {
		e.kill()
	}
	close(sb.done)
	return true
}

func (f *fakeModal) sandbox(id string) (*fakeSandbox, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	sb, ok := f.sandboxes[id]
	if !ok {
		return nil, status.Errorf(codes.NotFound, "Sandbox %s not found", id)
	}
	return sb, nil
}

func (f *fakeModal) SandboxGetTaskId(ctx context.Context, req *pb.SandboxGetTaskIdRequest) (*pb.SandboxGetTaskIdResponse, error) {
	sb, err := f.sandbox(req.GetSandboxId())
	if err != nil {
		return nil, err
	}
	sb.mu.Lock()
	defer sb.mu.Unlock()
	// task_id is unset only while the sandbox is unscheduled or when it ended before it was
	// scheduled; a sandbox that ran and ended has both its task and the result (api.proto,
	// SandboxGetTaskIdResponse).
	resp := pb.SandboxGetTaskIdResponse_builder{TaskResult: sb.result}
	if sb.scheduled {
		resp.TaskId = &sb.taskID
	}
	return resp.Build(), nil
}

func (f *fakeModal) TaskGetCommandRouterAccess(ctx context.Context, req *pb.TaskGetCommandRouterAccessRequest) (*pb.TaskGetCommandRouterAccessResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, sb := range f.sandboxes {
		if sb.taskID == req.GetTaskId() {
			exp := f.now().Add(f.jwtTTL)
			tok := jwt(map[string]any{"exp": exp.Unix(), "task_id": sb.taskID})
			f.jwts[tok] = routerGrant{task: sb.taskID, exp: exp}
			return pb.TaskGetCommandRouterAccessResponse_builder{Jwt: tok, Url: "https://" + f.addr}.Build(), nil
		}
	}
	return nil, status.Errorf(codes.NotFound, "task %s not found", req.GetTaskId())
}

func (f *fakeModal) SandboxGetFromName(ctx context.Context, req *pb.SandboxGetFromNameRequest) (*pb.SandboxGetFromNameResponse, error) {
	if err := environment(req.GetEnvironmentName()); err != nil {
		return nil, err
	}
	f.mu.Lock()
	appID, ok := f.apps[req.GetAppName()]
	f.mu.Unlock()
	if !ok {
		return nil, status.Errorf(codes.NotFound, "App '%s' not found", req.GetAppName())
	}
	for _, sb := range f.running() {
		if sb.appID == appID && sb.name == req.GetSandboxName() {
			return pb.SandboxGetFromNameResponse_builder{SandboxId: sb.id}.Build(), nil
		}
	}
	return nil, status.Errorf(codes.NotFound, "Sandbox with name '%s' not found", req.GetSandboxName())
}

func (f *fakeModal) SandboxList(ctx context.Context, req *pb.SandboxListRequest) (*pb.SandboxListResponse, error) {
	if err := environment(req.GetEnvironmentName()); err != nil {
		return nil, err
	}
	want, err := validateTags(req.GetTags())
	if err != nil {
		return nil, err
	}
	if req.GetAppId() != "" && !f.appExists(req.GetAppId()) {
		return nil, status.Error(codes.NotFound, "App not found")
	}
	f.mu.Lock()
	var list []*fakeSandbox
	for _, sb := range f.sandboxes {
		list = append(list, sb)
	}
	f.mu.Unlock()
	sort.Slice(list, func(i, j int) bool { return list[i].created.After(list[j].created) })
	var out []*pb.SandboxInfo
	for _, sb := range list {
		created := float64(sb.created.UnixNano()) / 1e9
		if (req.GetAppId() != "" && sb.appID != req.GetAppId()) || (!req.GetIncludeFinished() && !sb.running()) ||
			(req.GetBeforeTimestamp() > 0 && created >= req.GetBeforeTimestamp()) {
			continue
		}
		match := true
		for k, v := range want {
			match = match && sb.tags[k] == v
		}
		if !match {
			continue
		}
		var tags []*pb.SandboxTag
		for k, v := range sb.tags {
			tags = append(tags, pb.SandboxTag_builder{TagName: k, TagValue: v}.Build())
		}
		out = append(out, pb.SandboxInfo_builder{Id: sb.id, CreatedAt: created, AppId: sb.appID, Tags: tags, Name: sb.name}.Build())
		if len(out) == 25 {
			break
		}
	}
	return pb.SandboxListResponse_builder{Sandboxes: out}.Build(), nil
}

func (f *fakeModal) SandboxTerminate(ctx context.Context, req *pb.SandboxTerminateRequest) (*pb.SandboxTerminateResponse, error) {
	sb, err := f.sandbox(req.GetSandboxId())
	if err != nil {
		return nil, err
	}
	sb.mu.Lock()
	prev := sb.result
	sb.mu.Unlock()
	f.terminate(sb, pb.GenericResult_GENERIC_STATUS_TERMINATED)
	return pb.SandboxTerminateResponse_builder{ExistingResult: prev}.Build(), nil
}

func (f *fakeModal) SandboxWait(ctx context.Context, req *pb.SandboxWaitRequest) (*pb.SandboxWaitResponse, error) {
	sb, err := f.sandbox(req.GetSandboxId())
	if err != nil {
		return nil, err
	}
	if req.GetTimeout() > 0 {
		t := time.NewTimer(time.Duration(float64(req.GetTimeout()) * float64(time.Second)))
		defer t.Stop()
		select {
		case <-sb.done:
		case <-t.C:
		case <-ctx.Done():
			return nil, status.FromContextError(ctx.Err()).Err()
		}
	}
	sb.mu.Lock()
	defer sb.mu.Unlock()
	return pb.SandboxWaitResponse_builder{Result: sb.result,
		Metadata: pb.SandboxHandleMetadata_builder{Result: sb.result, AppId: sb.appID}.Build()}.Build(), nil
}

func (f *fakeModal) SandboxTagsGet(ctx context.Context, req *pb.SandboxTagsGetRequest) (*pb.SandboxTagsGetResponse, error) {
	sb, err := f.sandbox(req.GetSandboxId())
	if err != nil {
		return nil, err
	}
	var tags []*pb.SandboxTag
	for k, v := range sb.tags {
		tags = append(tags, pb.SandboxTag_builder{TagName: k, TagValue: v}.Build())
	}
	return pb.SandboxTagsGetResponse_builder{Tags: tags}.Build(), nil
}

func (f *fakeModal) SandboxTagsSet(ctx context.Context, req *pb.SandboxTagsSetRequest) (*emptypb.Empty, error) {
	if err := environment(req.GetEnvironmentName()); err != nil {
		return nil, err
	}
	sb, err := f.sandbox(req.GetSandboxId())
	if err != nil {
		return nil, err
	}
	tags, err := validateTags(req.GetTags())
	if err != nil {
		return nil, err
	}
	sb.mu.Lock()
	sb.tags = tags
	sb.mu.Unlock()
	return &emptypb.Empty{}, nil
}
