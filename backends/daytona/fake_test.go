package daytona

import (
	"bytes"
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/routers"
	"github.com/getkin/kin-openapi/routers/legacy"
	"github.com/moby/moby/api/pkg/stdcopy"
	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/client"
)

// fakeDaytona is Daytona on loopback for the tests: the control-plane and toolbox routes
// this backend uses, every request checked against the OpenAPI documents in
// shared/specs/daytona (a request that does not match fails the test and gets a 400), the
// sandbox states and transitions the documents enumerate, each sandbox a real docker
// container, and auto-stop on a scaled clock (one Daytona minute lasts `minute`).
type fakeDaytona struct {
	t      testing.TB
	srv    *httptest.Server // the control plane: {srv}/api
	proxy  *httptest.Server // the toolbox proxy: {proxy}/toolbox/{sandboxId}
	key    string
	cli    *client.Client
	image  string
	minute time.Duration
	// transition is how long a state change (starting, stopping, archiving…) stays in
	// progress; a start or stop asked meanwhile gets 409.
	transition time.Duration

	api, tb routers.Router

	mu      sync.Mutex
	boxes   map[string]*fakeBox  // by id
	snaps   map[string]*fakeSnap // by id (fake_branch_test.go)
	images  []string             // images the fake committed, removed when it closes
	creates []map[string]any     // create bodies as sent
	ops     map[string]int       // operationId → count
	inject  map[string][]int     // operationId → statuses to answer next, instead of serving
	stopped chan struct{}
	wg      sync.WaitGroup

	// logCuts makes the next n followed session logs end after their first message, as a
	// proxy that cuts long streams would.
	logCuts int
	// bg ends the toolbox sessions' commands when the fake closes.
	bg       context.Context
	bgCancel context.CancelFunc
}

type fakeBox struct {
	id, name, state string
	labels          map[string]string
	body            map[string]any
	autoStop        int // minutes, 0 = never
	autoArchive     int
	autoDelete      int // minutes, negative = never
	ctr             string
	image           string // the image its container runs: a snapshot's or a fork's copy ("" = the fake's)
	created         time.Time
	active          time.Time // last toolbox activity
	stoppedAt       time.Time
	conns           int // open PTY sockets and requests in progress (activity while open)
	ptys            map[string]*fakePty
	sessions        map[string]*fakeSession // toolbox process sessions, by id
}

type fakePty struct {
	cols, rows int
	cwd        string
	close      func()
}

// specDir holds unmodified copies of the vendor's OpenAPI documents (shared/specs/daytona;
// Apache-2.0, see its LICENSE and SOURCE.txt).
const specDir = "testdata/openapi/"

var specs struct {
	sync.Once
	api, tb *openapi3.T
	err     error
}

func loadSpecs(t testing.TB) (*openapi3.T, *openapi3.T) {
	specs.Do(func() {
		load := func(name string) *openapi3.T {
			if specs.err != nil {
				return nil
			}
			l := openapi3.NewLoader()
			doc, err := l.LoadFromFile(specDir + name)
			if err != nil {
				specs.err = fmt.Errorf("%s: %w", name, err)
				return nil
			}
			doc.Servers = nil // match paths only; the fake strips its prefixes
			return doc
		}
		specs.api = load("api-openapi.yaml")
		specs.tb = load("toolbox-openapi.yaml")
	})
	if specs.err != nil {
		t.Fatalf("load the Daytona OpenAPI documents: %v", specs.err)
	}
	return specs.api, specs.tb
}

// newFake starts a fake Daytona whose sandboxes run image.
func newFake(t testing.TB, image string, minute time.Duration) *fakeDaytona {
	t.Helper()
	apiDoc, tbDoc := loadSpecs(t)
	api, err := legacy.NewRouter(apiDoc, openapi3.DisableExamplesValidation())
	if err != nil {
		t.Fatal(err)
	}
	tb, err := legacy.NewRouter(tbDoc, openapi3.DisableExamplesValidation())
	if err != nil {
		t.Fatal(err)
	}
	var k [12]byte
	rand.Read(k[:])
	f := &fakeDaytona{t: t, key: "dtn_" + hex.EncodeToString(k[:]), cli: needEngine(t), image: image, minute: minute,
		transition: 150 * time.Millisecond, api: api, tb: tb, boxes: map[string]*fakeBox{}, snaps: map[string]*fakeSnap{}, ops: map[string]int{},
		inject: map[string][]int{}, stopped: make(chan struct{})}
	f.bg, f.bgCancel = context.WithCancel(context.Background())
	f.srv = httptest.NewServer(http.HandlerFunc(f.serveAPI))
	f.proxy = httptest.NewServer(http.HandlerFunc(f.serveProxy))
	f.wg.Add(1)
	go f.clock()
	t.Cleanup(f.close)
	return f
}

func (f *fakeDaytona) apiURL() string { return f.srv.URL + "/api" }

func (f *fakeDaytona) close() {
	f.bgCancel()
	close(f.stopped)
	for _, s := range []*httptest.Server{f.srv, f.proxy} {
		s.CloseClientConnections()
		s.Close()
	}
	f.wg.Wait()
	f.mu.Lock()
	var ctrs []string
	for _, b := range f.boxes {
		for _, p := range b.ptys {
			if p.close != nil {
				p.close()
			}
		}
		if b.ctr != "" {
			ctrs = append(ctrs, b.ctr)
		}
	}
	f.boxes = map[string]*fakeBox{}
	f.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for _, c := range ctrs {
		f.cli.ContainerRemove(ctx, c, client.ContainerRemoveOptions{Force: true})
	}
	f.removeImages(ctx)
}

// injectStatus makes the next len(statuses) calls of operationId answer those statuses.
func (f *fakeDaytona) injectStatus(op string, statuses ...int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.inject[op] = append(f.inject[op], statuses...)
}

func (f *fakeDaytona) count(op string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.ops[op]
}

func (f *fakeDaytona) createBodies() []map[string]any {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]map[string]any(nil), f.creates...)
}

// state returns the state of the sandbox named name ("" when there is none).
func (f *fakeDaytona) state(name string) string {
	f.mu.Lock()
	defer f.mu.Unlock()
	if b := f.byName(name); b != nil {
		return b.state
	}
	return ""
}

func (f *fakeDaytona) byName(idOrName string) *fakeBox {
	if b := f.boxes[idOrName]; b != nil {
		return b
	}
	for _, b := range f.boxes {
		if b.name == idOrName {
			return b
		}
	}
	return nil
}

// ServeHTTP checks the request against the document of its API, then serves it.
func (f *fakeDaytona) view(b *fakeBox) map[string]any {
	return map[string]any{"id": b.id, "organizationId": "org-test", "name": b.name, "user": "sandbox", "env": map[string]string{},
		"labels": b.labels, "public": false, "networkBlockAll": b.body["networkBlockAll"] != false, "target": "us",
		"cpu": 1, "gpu": 0, "memory": 1, "disk": 3, "state": b.state, "toolboxProxyUrl": f.proxy.URL + "/toolbox",
		"autoStopInterval": b.autoStop, "autoArchiveInterval": b.autoArchive, "autoDeleteInterval": b.autoDelete,
		"createdAt": b.created.UTC().Format(time.RFC3339Nano), "lastActivityAt": b.active.UTC().Format(time.RFC3339Nano)}
}

func (f *fakeDaytona) control(w http.ResponseWriter, r *http.Request, op string, params map[string]string, body []byte) {
	f.mu.Lock()
	defer f.mu.Unlock()
	name := params["sandboxIdOrName"]
	b := f.byName(name)
	busy := func() bool {
		switch b.state {
		case "creating", "starting", "stopping", "archiving", "restoring", "destroying":
			conflict(w, r, "Sandbox state change in progress")
			return true
		}
		return false
	}
	switch op {
	case "createSandbox":
		var m map[string]any
		json.Unmarshal(body, &m)
		f.creates = append(f.creates, m)
		n, _ := m["name"].(string)
		if f.byName(n) != nil {
			conflict(w, r, fmt.Sprintf("Sandbox with name %s already exists", n))
			return
		}
		image := ""
		if sn, _ := m["snapshot"].(string); sn != "" {
			var ok bool
			if image, ok = f.fromSnapshot(w, r, sn); !ok {
				return
			}
		}
		var id [8]byte
		rand.Read(id[:])
		b := &fakeBox{id: hex.EncodeToString(id[:]), name: n, state: "creating", labels: map[string]string{}, body: m,
			autoStop: 15, autoDelete: -1, created: time.Now(), active: time.Now(), ptys: map[string]*fakePty{},
			sessions: map[string]*fakeSession{}, image: image}
		if v, ok := m["autoStopInterval"].(float64); ok {
			b.autoStop = int(v)
		}
		if v, ok := m["autoArchiveInterval"].(float64); ok {
			b.autoArchive = int(v)
		}
		if v, ok := m["autoDeleteInterval"].(float64); ok {
			b.autoDelete = int(v)
		}
		if l, ok := m["labels"].(map[string]any); ok {
			for k, v := range l {
				b.labels[k], _ = v.(string)
			}
		}
		f.boxes[b.id] = b
		f.change(b, "started", f.createContainer)
		writeJSON(w, http.StatusOK, f.view(b))
	case "getSandbox":
		if b == nil {
			notFound(w, r, "Sandbox")
			return
		}
		writeJSON(w, http.StatusOK, f.view(b))
	case "listSandboxes":
		var want map[string]string
		if l := r.URL.Query().Get("labels"); l != "" {
			json.Unmarshal([]byte(l), &want)
		}
		items := []any{}
		ids := make([]string, 0, len(f.boxes))
		for id := range f.boxes {
			ids = append(ids, id)
		}
		sort.Strings(ids)
		for _, id := range ids {
			b := f.boxes[id]
			match := true
			for k, v := range want {
				match = match && b.labels[k] == v
			}
			if match {
				items = append(items, f.view(b))
			}
		}
		writeJSON(w, http.StatusOK, map[string]any{"items": items, "nextCursor": nil})
	case "startSandbox":
		if b == nil {
			notFound(w, r, "Sandbox")
			return
		}
		if busy() {
			return
		}
		switch b.state {
		case "stopped":
			f.change(b, "started", f.startContainer)
			b.state = "starting"
		case "archived":
			f.change(b, "started", f.startContainer)
			b.state = "restoring"
		}
		writeJSON(w, http.StatusOK, f.view(b))
	case "stopSandbox":
		if b == nil {
			notFound(w, r, "Sandbox")
			return
		}
		if busy() {
			return
		}
		if b.state == "started" {
			f.stopLocked(b)
		}
		writeJSON(w, http.StatusOK, f.view(b))
	case "archiveSandbox":
		if b == nil {
			notFound(w, r, "Sandbox")
			return
		}
		if busy() {
			return
		}
		if b.state != "stopped" {
			controlError(w, r, http.StatusBadRequest, "Sandbox is not stopped")
			return
		}
		b.state = "archiving"
		f.change(b, "archived", nil)
		writeJSON(w, http.StatusOK, f.view(b))
	case "deleteSandbox":
		if b == nil {
			notFound(w, r, "Sandbox")
			return
		}
		if busy() {
			return
		}
		b.state = "destroying"
		f.change(b, "destroyed", f.removeContainer)
		writeJSON(w, http.StatusOK, f.view(b))
	default:
		if f.branch(w, r, op, b, params, body) {
			return
		}
		f.t.Errorf("fake Daytona: %s is not served", op)
		controlError(w, r, http.StatusNotImplemented, op+" not served by the fake")
	}
}

// stopLocked starts stopping b; f.mu is held. Its PTY sessions end as the stop is
// accepted; the container stops in the background.
func (f *fakeDaytona) stopLocked(b *fakeBox) {
	b.state = "stopping"
	for id, p := range b.ptys {
		if p.close != nil {
			p.close()
		}
		delete(b.ptys, id)
	}
	f.change(b, "stopped", f.stopContainer)
}

// change runs work for b in the background and then moves it to state `to` (a destroyed
// sandbox is forgotten). The transition takes at least f.transition.
func (f *fakeDaytona) change(b *fakeBox, to string, work func(context.Context, *fakeBox) error) {
	f.wg.Add(1)
	go func() {
		defer f.wg.Done()
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		t := time.Now()
		var err error
		if work != nil {
			err = work(ctx, b)
		}
		if d := f.transition - time.Since(t); d > 0 {
			time.Sleep(d)
		}
		f.mu.Lock()
		defer f.mu.Unlock()
		switch {
		case err != nil:
			b.state = "error"
			f.t.Logf("fake Daytona: %s → %s: %v", b.name, to, err)
		case to == "destroyed":
			delete(f.boxes, b.id)
		default:
			b.state = to
			if to == "stopped" {
				b.stoppedAt = time.Now()
			}
			if to == "started" {
				b.active = time.Now()
			}
		}
	}()
}

// clock applies auto-stop, auto-archive and auto-delete on the scaled clock.
func (f *fakeDaytona) clock() {
	defer f.wg.Done()
	tick := time.NewTicker(max(f.minute/10, 10*time.Millisecond))
	defer tick.Stop()
	for {
		select {
		case <-f.stopped:
			return
		case <-tick.C:
		}
		f.mu.Lock()
		now := time.Now()
		for _, b := range f.boxes {
			switch {
			case b.state == "started" && b.autoStop > 0 && b.conns == 0 && now.Sub(b.active) > time.Duration(b.autoStop)*f.minute:
				f.stopLocked(b)
			case b.state == "stopped" && b.autoDelete >= 0 && now.Sub(b.stoppedAt) > time.Duration(b.autoDelete)*f.minute:
				b.state = "destroying"
				f.change(b, "destroyed", f.removeContainer)
			case b.state == "stopped" && b.autoArchive > 0 && now.Sub(b.stoppedAt) > time.Duration(b.autoArchive)*f.minute:
				b.state = "archiving"
				f.change(b, "archived", nil)
			}
		}
		f.mu.Unlock()
	}
}

// containers -------------------------------------------------------------------------------

const fakeUser, fakeHome = "1000:1000", "/home/sandbox"

func (f *fakeDaytona) createContainer(ctx context.Context, b *fakeBox) error {
	c, err := f.cli.ContainerCreate(ctx, client.ContainerCreateOptions{
		Config: &container.Config{Image: cmp.Or(b.image, f.image), Cmd: []string{"sleep", "2147483647"}, User: fakeUser,
			Env: []string{"HOME=" + fakeHome, "PATH=/usr/bin:/bin"}, WorkingDir: fakeHome,
			Labels: map[string]string{testLabel: testRun, "hermes-sandbox.test.fake": b.name}},
		HostConfig: &container.HostConfig{Init: ptr(true), NetworkMode: "none", LogConfig: container.LogConfig{Type: "none"},
			Resources: container.Resources{Memory: 256 << 20, PidsLimit: ptr(int64(256)), NanoCPUs: 1e9}},
		Name: "hermes-fake-daytona-" + b.id})
	if err != nil {
		return err
	}
	f.mu.Lock()
	b.ctr = c.ID
	f.mu.Unlock()
	if _, err := f.cli.ContainerStart(ctx, c.ID, client.ContainerStartOptions{}); err != nil {
		return err
	}
	// The image's home and /tmp belong to root; Daytona's user owns its home, and /tmp is
	// the usual sticky, world-writable directory.
	_, code, err := f.run(ctx, b, "0", "", nil, []string{"sh", "-c", "chown " + fakeUser + " " + fakeHome + " && chmod 1777 /tmp"})
	if err == nil && code != 0 {
		err = fmt.Errorf("prepare home and /tmp: exit %d", code)
	}
	return err
}

func ptr[T any](v T) *T { return &v }

func (f *fakeDaytona) startContainer(ctx context.Context, b *fakeBox) error {
	_, err := f.cli.ContainerStart(ctx, b.ctr, client.ContainerStartOptions{})
	return err
}

func (f *fakeDaytona) stopContainer(ctx context.Context, b *fakeBox) error {
	f.mu.Lock()
	for id, p := range b.ptys {
		if p.close != nil {
			p.close()
		}
		delete(b.ptys, id)
	}
	f.mu.Unlock()
	timeout := 1
	_, err := f.cli.ContainerStop(ctx, b.ctr, client.ContainerStopOptions{Timeout: &timeout})
	return err
}

func (f *fakeDaytona) removeContainer(ctx context.Context, b *fakeBox) error {
	if b.ctr == "" {
		return nil
	}
	_, err := f.cli.ContainerRemove(ctx, b.ctr, client.ContainerRemoveOptions{Force: true})
	return err
}

// run runs argv in b's container and returns its joined output and exit code.
func (f *fakeDaytona) run(ctx context.Context, b *fakeBox, user, dir string, env []string, argv []string) ([]byte, int, error) {
	var out bytes.Buffer
	code, err := f.runStreams(ctx, b, user, dir, env, argv, false, &out, &out)
	if err != nil {
		return nil, 0, err
	}
	return out.Bytes(), code, nil
}

// runStreams runs argv in b's container, copying its stdout and stderr to the writers as
// they come, and returns its exit code. With holdStdin its standard input stays open (and
// empty) while it runs, as a toolbox session's input pipe does.
func (f *fakeDaytona) runStreams(ctx context.Context, b *fakeBox, user, dir string, env []string, argv []string, holdStdin bool, stdout, stderr io.Writer) (int, error) {
	ex, err := f.cli.ExecCreate(ctx, b.ctr, client.ExecCreateOptions{Cmd: argv, User: user, WorkingDir: dir, Env: env,
		AttachStdin: holdStdin, AttachStdout: true, AttachStderr: true})
	if err != nil {
		return 0, err
	}
	hr, err := f.cli.ExecAttach(ctx, ex.ID, client.ExecAttachOptions{})
	if err != nil {
		return 0, err
	}
	defer hr.Close()
	done := make(chan error, 1)
	go func() { _, err := stdcopy.StdCopy(stdout, stderr, hr.Reader); done <- err }()
	select {
	case err = <-done:
	case <-ctx.Done():
		return 0, ctx.Err()
	}
	if err != nil {
		return 0, err
	}
	ei, err := f.cli.ExecInspect(ctx, ex.ID, client.ExecInspectOptions{})
	if err != nil {
		return 0, err
	}
	return ei.ExitCode, nil
}
