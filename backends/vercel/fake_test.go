package vercel

// A fake Vercel Sandbox API for tests: loopback HTTP with the routes api-client.ts calls,
// response bodies shaped as validators.ts defines them (built here as plain maps, not with
// the client's types), strict request decoding (an unknown field is a 400, as zod's strict
// parsing on the server side would be), the bearer token and teamId required on every
// request, NDJSON command streams, and the PTY WebSocket. Each sandbox is a real docker
// container; a VM session is the container running; a snapshot is a committed image.

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/moby/moby/api/pkg/stdcopy"
	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/client"
)

type fake struct {
	t       testing.TB
	srv     *httptest.Server
	cli     *client.Client
	image   string
	token   string
	team    string
	project string

	mu        sync.Mutex
	sandboxes map[string]*fSandbox
	sessions  map[string]*fSession
	snapshots map[string]*fSnapshot
	cmds      map[string]*fCmd
	term      fakePTY  // the interactive terminal's tokens and knobs (fake_io_test.go)
	requests  []string // "METHOD path" of every authorised request

	// Knobs for tests.
	cutWaitAfter  int // cut a command's wait stream after this many log lines (0 = never)
	cutLogsTimes  int // cut this many logs streams after their first line
	cmdStarts     int
	extends       int
	failSnapshots bool // creating a sandbox from a snapshot fails with a 500
	// When set, each create reports on createArrived, then waits for createGate to close
	// before it looks at the name; a created sandbox waits for bootGate to close before its
	// container is made (it is found pending meanwhile); each create refused as a duplicate
	// reports its name on conflicts.
	createArrived chan struct{}
	createGate    chan struct{}
	bootGate      chan struct{}
	conflicts     chan string
}

type fSandbox struct {
	name, runtime, snapshot string
	persistent              bool
	tags                    map[string]string
	timeout                 int64
	policy                  map[string]any
	created, updated        int64
	status                  string
	current                 string // session id
	containerID             string
	ports                   []int
}

type fSession struct {
	id, sandbox, status string
	requested, started  int64
	timeout             int64
	stopped             int64
	timer               *time.Timer
	// booting: the container is still being created or started. The session exists (the
	// service answers with a session whatever the sandbox's state: validators.ts
	// SandboxAndSessionResponse requires one) and stays "pending" until it has booted.
	booting bool
}

type fSnapshot struct {
	id, session, status, image string
	created                    int64
}

type fCmd struct {
	id, session, name string
	args              []string
	cwd               string
	started           int64
	execID            string

	mu       sync.Mutex
	logs     []map[string]any
	exitCode *int
	changed  chan struct{} // closed and replaced on every change
}

func newFake(t testing.TB, cli *client.Client, img string) *fake {
	f := &fake{t: t, cli: cli, image: img, token: "tok-" + randHex(8), team: "team_" + randHex(4), project: "prj_" + randHex(4),
		sandboxes: map[string]*fSandbox{}, sessions: map[string]*fSession{}, snapshots: map[string]*fSnapshot{},
		cmds: map[string]*fCmd{}}
	mux := http.NewServeMux()
	h := func(pattern string, fn func(w http.ResponseWriter, r *http.Request)) {
		mux.HandleFunc(pattern, f.auth(fn))
	}
	h("POST /v2/sandboxes", f.createSandbox)
	h("POST /v3/sandboxes", f.createSandbox)
	h("GET /v2/sandboxes", f.listSandboxes)
	h("GET /v2/sandboxes/{name}", f.getSandbox)
	h("PATCH /v2/sandboxes/{name}", f.updateSandbox)
	h("DELETE /v2/sandboxes/{name}", f.deleteSandbox)
	h("GET /v2/sandboxes/sessions/{id}", f.getSession)
	h("POST /v2/sandboxes/sessions/{id}/stop", f.stopSession)
	h("POST /v2/sandboxes/sessions/{id}/extend-timeout", f.extendTimeout)
	h("POST /v2/sandboxes/sessions/{id}/network-policy", f.networkPolicy)
	h("POST /v2/sandboxes/sessions/{id}/snapshot", f.snapshot)
	h("GET /v2/sandboxes/snapshots/{id}", f.snapshotByID)
	h("DELETE /v2/sandboxes/snapshots/{id}", f.snapshotByID)
	h("POST /v2/sandboxes/sessions/{id}/cmd", f.runCommand)
	h("GET /v2/sandboxes/sessions/{id}/cmd/{cmd}", f.getCommand)
	h("GET /v2/sandboxes/sessions/{id}/cmd/{cmd}/logs", f.logs)
	h("POST /v2/sandboxes/sessions/{id}/cmd/{cmd}/kill", f.kill)
	h("POST /v2/sandboxes/sessions/{id}/interactive", f.interactive)
	h("POST /v2/sandboxes/sessions/{id}/fs/mkdir", f.mkdir)
	h("POST /v2/sandboxes/sessions/{id}/fs/read", f.readFile)
	h("POST /v2/sandboxes/sessions/{id}/fs/write", f.writeFiles)
	outer := http.NewServeMux()
	outer.Handle("/api/", http.StripPrefix("/api", mux))
	outer.HandleFunc("GET /pty/{id}", f.pty)
	outer.HandleFunc("GET /health", f.health)
	f.srv = httptest.NewServer(outer)
	t.Cleanup(f.close)
	return f
}

func (f *fake) url() string { return f.srv.URL + "/api" }

func (f *fake) close() {
	f.srv.CloseClientConnections()
	f.srv.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, s := range f.sessions {
		if s.timer != nil {
			s.timer.Stop()
		}
	}
	for _, sb := range f.sandboxes {
		f.cli.ContainerRemove(ctx, sb.containerID, client.ContainerRemoveOptions{Force: true})
	}
	for _, sn := range f.snapshots {
		if sn.image != "" {
			f.cli.ImageRemove(ctx, sn.image, client.ImageRemoveOptions{Force: true, PruneChildren: true})
		}
	}
}

func randHex(n int) string {
	b := make([]byte, n)
	rand.Read(b)
	return hex.EncodeToString(b)
}

func nowMs() int64 { return time.Now().UnixMilli() }

func apiError(w http.ResponseWriter, status int, code, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(map[string]any{"error": map[string]any{"code": code, "message": msg}})
}

func reply(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(v)
}

// auth requires the bearer token and teamId on every request (the fake API is mounted
// under /api, as the SDK's base URL is https://vercel.com/api).
func (f *fake) auth(fn func(http.ResponseWriter, *http.Request)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer "+f.token {
			apiError(w, http.StatusForbidden, "forbidden", "Not authorized")
			return
		}
		switch team := r.URL.Query().Get("teamId"); team {
		case f.team:
		case "":
			apiError(w, http.StatusBadRequest, "bad_request", "teamId is required")
			return
		default:
			apiError(w, http.StatusForbidden, "forbidden", "You don't have access to team "+team)
			return
		}
		f.mu.Lock()
		f.requests = append(f.requests, r.Method+" "+r.URL.Path)
		f.mu.Unlock()
		fn(w, r)
	}
}

// decode reads a JSON body strictly: unknown fields and trailing data are errors.
func decode(w http.ResponseWriter, r *http.Request, v any) bool {
	if ct := r.Header.Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
		apiError(w, http.StatusBadRequest, "bad_request", "content-type must be application/json, got "+ct)
		return false
	}
	dec := json.NewDecoder(r.Body)
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		apiError(w, http.StatusBadRequest, "bad_request", "invalid body: "+err.Error())
		return false
	}
	if dec.More() {
		apiError(w, http.StatusBadRequest, "bad_request", "trailing data after the body")
		return false
	}
	return true
}

// JSON shapes of validators.ts.

func (f *fake) sessionJSON(s *fSession) map[string]any {
	sb := f.sandboxes[s.sandbox]
	m := map[string]any{"id": s.id, "memory": 2048, "vcpus": 2, "region": "iad1", "timeout": s.timeout, "status": s.status,
		"requestedAt": s.requested, "createdAt": s.requested, "cwd": "/vercel/sandbox", "updatedAt": nowMs()}
	if s.started > 0 {
		m["startedAt"] = s.started
	}
	if s.stopped > 0 {
		m["stoppedAt"] = s.stopped
	}
	if sb != nil {
		if sb.runtime != "" {
			m["runtime"] = sb.runtime
		}
		m["networkPolicy"] = sb.policy
	}
	return m
}

func (f *fake) sandboxJSON(sb *fSandbox) map[string]any {
	m := map[string]any{"name": sb.name, "persistent": sb.persistent, "createdAt": sb.created, "updatedAt": sb.updated,
		"currentSessionId": sb.current, "status": sb.status, "statusUpdatedAt": sb.updated, "cwd": "/vercel/sandbox",
		"tags": sb.tags, "timeout": sb.timeout, "networkPolicy": sb.policy, "region": "iad1", "vcpus": 2, "memory": 2048}
	if sb.runtime != "" {
		m["runtime"] = sb.runtime
	}
	if sb.snapshot != "" {
		m["currentSnapshotId"] = sb.snapshot
	}
	return m
}

func (f *fake) routes(sb *fSandbox) []any {
	out := []any{}
	for _, p := range sb.ports {
		out = append(out, map[string]any{"url": fmt.Sprintf("https://%s-%d.vercel.run", sb.name, p), "subdomain": fmt.Sprintf("%s-%d", sb.name, p), "port": p})
	}
	return out
}

func (f *fake) sandboxAndSession(sb *fSandbox, resumed bool) map[string]any {
	m := map[string]any{"sandbox": f.sandboxJSON(sb), "session": f.sessionJSON(f.sessions[sb.current]), "routes": f.routes(sb)}
	if resumed {
		m["resumed"] = true
	}
	return m
}

func policyResponse(p map[string]any) (map[string]any, error) {
	if p == nil {
		return map[string]any{"mode": "allow-all"}, nil
	}
	if mode, ok := p["mode"]; ok {
		if mode != "allow-all" && mode != "deny-all" {
			return nil, fmt.Errorf("networkPolicy.mode %v: want allow-all or deny-all", mode)
		}
		if len(p) != 1 {
			return nil, fmt.Errorf("networkPolicy: mode takes no other field")
		}
		return map[string]any{"mode": mode}, nil
	}
	var domains []string
	for k, v := range p {
		switch k {
		case "allow":
			list, ok := v.([]any)
			if !ok {
				return nil, fmt.Errorf("networkPolicy.allow: want a list of domains")
			}
			for _, d := range list {
				s, ok := d.(string)
				if !ok {
					return nil, fmt.Errorf("networkPolicy.allow: want strings")
				}
				domains = append(domains, s)
			}
		case "subnets":
		default:
			return nil, fmt.Errorf("networkPolicy: unknown field %q", k)
		}
	}
	return map[string]any{"mode": "custom", "allowedDomains": domains}, nil
}

// Sandboxes -----------------------------------------------------------------------------

type createBody struct {
	ProjectID string          `json:"projectId"`
	Ports     []int           `json:"ports"`
	Source    *map[string]any `json:"source"`
	Timeout   *int64          `json:"timeout"`
	Resources *struct {
		VCPUs int `json:"vcpus"`
	} `json:"resources"`
	Runtime            *string           `json:"runtime"`
	Image              *string           `json:"image"`
	Name               string            `json:"name"`
	Persistent         *bool             `json:"persistent"`
	NetworkPolicy      map[string]any    `json:"networkPolicy"`
	Env                map[string]string `json:"env"`
	Tags               map[string]string `json:"tags"`
	SnapshotExpiration *int64            `json:"snapshotExpiration"`
	KeepLastSnapshots  map[string]any    `json:"keepLastSnapshots"`
	Region             *string           `json:"region"`
	FailoverRegions    []string          `json:"failoverRegions"`
}

func (f *fake) createSandbox(w http.ResponseWriter, r *http.Request) {
	var b createBody
	if !decode(w, r, &b) {
		return
	}
	v3 := strings.HasPrefix(r.URL.Path, "/v3/")
	switch {
	case b.ProjectID != f.project:
		apiError(w, http.StatusNotFound, "not_found", "project not found")
		return
	case v3 && b.Runtime != nil:
		apiError(w, http.StatusBadRequest, "bad_request", "runtime is not accepted by /v3/sandboxes")
		return
	case !v3 && b.Runtime == nil:
		apiError(w, http.StatusBadRequest, "bad_request", "runtime is required by /v2/sandboxes")
		return
	case b.Name == "":
		b.Name = "sbx_" + randHex(6)
	}
	img := f.image
	snapID := ""
	if b.Source != nil {
		src := *b.Source
		if src["type"] != "snapshot" {
			apiError(w, http.StatusBadRequest, "bad_request", "the fake supports only snapshot sources")
			return
		}
		if b.Runtime != nil {
			// The service restores the snapshot's own runtime; naming one is refused
			// (the Hermes #74753 failure mode).
			apiError(w, http.StatusBadRequest, "bad_request", "runtime cannot be combined with a snapshot source")
			return
		}
		snapID, _ = src["snapshotId"].(string)
		f.mu.Lock()
		sn, ok := f.snapshots[snapID]
		fail := f.failSnapshots
		f.mu.Unlock()
		if !ok || sn.status != "created" {
			apiError(w, http.StatusNotFound, "not_found", "snapshot not found")
			return
		}
		if fail {
			apiError(w, http.StatusInternalServerError, "internal_error", "restore failed")
			return
		}
		img = sn.image
	}
	policy, err := policyResponse(b.NetworkPolicy)
	if err != nil {
		apiError(w, http.StatusBadRequest, "bad_request", err.Error())
		return
	}
	f.mu.Lock()
	arrived, gate, bootGate, conflicts := f.createArrived, f.createGate, f.bootGate, f.conflicts
	f.mu.Unlock()
	if gate != nil {
		arrived <- struct{}{}
		<-gate
	}
	f.mu.Lock()
	if _, dup := f.sandboxes[b.Name]; dup {
		f.mu.Unlock()
		apiError(w, http.StatusConflict, "conflict", "a sandbox named "+b.Name+" exists")
		if conflicts != nil {
			conflicts <- b.Name
		}
		return
	}
	sb := &fSandbox{name: b.Name, persistent: b.Persistent != nil && *b.Persistent, tags: b.Tags, timeout: 300_000,
		policy: policy, created: nowMs(), updated: nowMs(), status: "pending", snapshot: snapID, ports: b.Ports}
	if b.Runtime != nil {
		sb.runtime = *b.Runtime
	}
	if b.Timeout != nil {
		sb.timeout = *b.Timeout
	}
	f.sandboxes[b.Name] = sb
	s := f.newSession(sb)
	f.mu.Unlock()
	if bootGate != nil {
		<-bootGate
	}
	// The service goes on creating a sandbox it has accepted when the client goes away.
	ctx := context.WithoutCancel(r.Context())
	env := []string{}
	for k, v := range b.Env {
		env = append(env, k+"="+v)
	}
	cr, err := f.cli.ContainerCreate(ctx, client.ContainerCreateOptions{Config: &container.Config{Image: img, Cmd: []string{"sleep", "2147483647"}, Env: env,
		WorkingDir: "/vercel/sandbox", Labels: map[string]string{testLabel: testRun}},
		HostConfig: &container.HostConfig{NetworkMode: "none", Init: boolPtr(true), Resources: container.Resources{Memory: 256 << 20}}})
	if err != nil {
		f.failSession(sb, s)
		apiError(w, http.StatusInternalServerError, "internal_error", err.Error())
		return
	}
	f.mu.Lock()
	deleted := f.sandboxes[sb.name] != sb
	sb.containerID = cr.ID
	f.mu.Unlock()
	if deleted { // deleted while it was being created
		f.cli.ContainerRemove(ctx, cr.ID, client.ContainerRemoveOptions{Force: true})
		apiError(w, http.StatusGone, "sandbox_deleted", "the sandbox was deleted while it was created")
		return
	}
	if err := f.boot(ctx, sb, s); err != nil {
		apiError(w, http.StatusInternalServerError, "internal_error", err.Error())
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	reply(w, f.sandboxAndSession(sb, false))
}

func boolPtr(b bool) *bool { return &b }

// newSession makes a new VM session of the sandbox, booting, and makes it the current
// one; the sandbox is "pending" until boot has started its container. f.mu is held.
func (f *fake) newSession(sb *fSandbox) *fSession {
	s := &fSession{id: "sbx_sess_" + randHex(6), sandbox: sb.name, status: "pending", requested: nowMs(), timeout: sb.timeout, booting: true}
	f.sessions[s.id] = s
	sb.current, sb.status, sb.updated = s.id, "pending", nowMs()
	return s
}

// boot starts the sandbox's container for the booting session s. The session reports
// "pending" to its first reader after that, then "running", as the service's do.
func (f *fake) boot(ctx context.Context, sb *fSandbox, s *fSession) error {
	if _, err := f.cli.ContainerStart(ctx, sb.containerID, client.ContainerStartOptions{}); err != nil {
		f.failSession(sb, s)
		return err
	}
	f.mu.Lock()
	s.booting, s.started = false, nowMs()
	if s.status == "pending" {
		if sb.current == s.id {
			sb.status, sb.updated = "running", nowMs()
		}
		f.armTimer(s)
		f.mu.Unlock()
		return nil
	}
	f.mu.Unlock()
	// Stopped while it booted: the container stops too.
	zero := 0
	f.cli.ContainerStop(ctx, sb.containerID, client.ContainerStopOptions{Timeout: &zero})
	return nil
}

// failSession marks a session that could not boot, and its sandbox, failed.
func (f *fake) failSession(sb *fSandbox, s *fSession) {
	f.mu.Lock()
	defer f.mu.Unlock()
	s.booting, s.status, s.stopped = false, "failed", nowMs()
	if sb.current == s.id {
		sb.status, sb.updated = "failed", nowMs()
	}
}

// armTimer stops the session when its timeout passes.
func (f *fake) armTimer(s *fSession) {
	if s.timer != nil {
		s.timer.Stop()
	}
	left := time.Until(time.UnixMilli(s.started + s.timeout))
	id := s.id
	s.timer = time.AfterFunc(max(left, 0), func() { f.stop(id) })
}

// stop ends a VM session: the container stops, its filesystem stays.
func (f *fake) stop(id string) {
	f.mu.Lock()
	s, ok := f.sessions[id]
	if !ok || s.status == "stopped" {
		f.mu.Unlock()
		return
	}
	sb := f.sandboxes[s.sandbox]
	cid := ""
	if sb != nil {
		cid = sb.containerID
	}
	s.status, s.stopped = "stopping", nowMs()
	if s.timer != nil {
		s.timer.Stop()
	}
	f.mu.Unlock()
	if cid != "" {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		zero := 0
		f.cli.ContainerStop(ctx, cid, client.ContainerStopOptions{Timeout: &zero})
		cancel()
	}
	f.mu.Lock()
	s.status = "stopped"
	if sb != nil && sb.current == id {
		sb.status, sb.updated = "stopped", nowMs()
	}
	f.mu.Unlock()
}

func (f *fake) sandboxFor(w http.ResponseWriter, r *http.Request, projectKey string) *fSandbox {
	if p := r.URL.Query().Get(projectKey); p != f.project {
		apiError(w, http.StatusNotFound, "not_found", "project not found")
		return nil
	}
	f.mu.Lock()
	sb, ok := f.sandboxes[r.PathValue("name")]
	f.mu.Unlock()
	if !ok {
		apiError(w, http.StatusNotFound, "not_found", "sandbox not found")
		return nil
	}
	return sb
}

func (f *fake) getSandbox(w http.ResponseWriter, r *http.Request) {
	sb := f.sandboxFor(w, r, "projectId")
	if sb == nil {
		return
	}
	resumed := false
	f.mu.Lock()
	var s *fSession
	if sb.status == "stopped" && r.URL.Query().Get("resume") == "true" {
		// One resume per stop: a concurrent reader finds this session pending.
		s = f.newSession(sb)
	}
	f.mu.Unlock()
	if s != nil {
		if err := f.boot(context.WithoutCancel(r.Context()), sb, s); err != nil {
			apiError(w, http.StatusInternalServerError, "internal_error", err.Error())
			return
		}
		resumed = true
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	reply(w, f.sandboxAndSession(sb, resumed))
}

func (f *fake) listSandboxes(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	if q.Get("project") != f.project {
		apiError(w, http.StatusNotFound, "not_found", "project not found")
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	out := []any{}
	for _, sb := range f.sandboxes {
		if !strings.HasPrefix(sb.name, q.Get("namePrefix")) {
			continue
		}
		match := true
		for _, kv := range q["tags"] {
			k, v, _ := strings.Cut(kv, ":")
			match = match && sb.tags[k] == v
		}
		if match {
			out = append(out, f.sandboxJSON(sb))
		}
	}
	reply(w, map[string]any{"sandboxes": out, "pagination": map[string]any{"count": len(out), "next": nil}})
}

func (f *fake) updateSandbox(w http.ResponseWriter, r *http.Request) {
	var b struct {
		Persistent         *bool             `json:"persistent"`
		Resources          map[string]any    `json:"resources"`
		Timeout            *int64            `json:"timeout"`
		NetworkPolicy      map[string]any    `json:"networkPolicy"`
		Tags               map[string]string `json:"tags"`
		Ports              []int             `json:"ports"`
		SnapshotExpiration *int64            `json:"snapshotExpiration"`
		KeepLastSnapshots  map[string]any    `json:"keepLastSnapshots"`
		CurrentSnapshotID  *string           `json:"currentSnapshotId"`
		Region             *string           `json:"region"`
		FailoverRegions    []string          `json:"failoverRegions"`
	}
	sb := f.sandboxFor(w, r, "projectId")
	if sb == nil || !decode(w, r, &b) {
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if b.Timeout != nil {
		sb.timeout = *b.Timeout
	}
	if b.Tags != nil {
		sb.tags = b.Tags
	}
	reply(w, map[string]any{"sandbox": f.sandboxJSON(sb), "routes": f.routes(sb)})
}

func (f *fake) deleteSandbox(w http.ResponseWriter, r *http.Request) {
	sb := f.sandboxFor(w, r, "projectId")
	if sb == nil {
		return
	}
	f.mu.Lock()
	if s, ok := f.sessions[sb.current]; ok && s.timer != nil {
		s.timer.Stop()
	}
	for id, s := range f.sessions {
		if s.sandbox == sb.name {
			s.status = "stopped"
			delete(f.sessions, id)
		}
	}
	delete(f.sandboxes, sb.name)
	body := map[string]any{"sandbox": f.sandboxJSON(sb), "routes": f.routes(sb)}
	cid := sb.containerID
	f.mu.Unlock()
	if cid != "" { // else its creation, still under way, finds it deleted and removes its container
		f.cli.ContainerRemove(r.Context(), cid, client.ContainerRemoveOptions{Force: true})
	}
	reply(w, body)
}

// Sessions ------------------------------------------------------------------------------

// session finds the path's session; running says it must be running.
func (f *fake) session(w http.ResponseWriter, r *http.Request, running bool) (*fSession, *fSandbox) {
	f.mu.Lock()
	defer f.mu.Unlock()
	s, ok := f.sessions[r.PathValue("id")]
	if !ok {
		apiError(w, http.StatusNotFound, "not_found", "session not found")
		return nil, nil
	}
	if s.status == "pending" && !s.booting {
		s.status = "running"
	}
	if running && s.status != "running" {
		apiError(w, http.StatusGone, "sandbox_stopped", "the session is "+s.status)
		return nil, nil
	}
	return s, f.sandboxes[s.sandbox]
}

func (f *fake) getSession(w http.ResponseWriter, r *http.Request) {
	s, sb := f.session(w, r, false)
	if s == nil {
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	m := map[string]any{"session": f.sessionJSON(s), "routes": []any{}}
	if sb != nil {
		m["routes"] = f.routes(sb)
	}
	reply(w, m)
}

func (f *fake) stopSession(w http.ResponseWriter, r *http.Request) {
	s, _ := f.session(w, r, false)
	if s == nil {
		return
	}
	f.stop(s.id)
	f.mu.Lock()
	defer f.mu.Unlock()
	reply(w, map[string]any{"session": f.sessionJSON(s)})
}

func (f *fake) extendTimeout(w http.ResponseWriter, r *http.Request) {
	var b struct {
		Duration int64 `json:"duration"`
	}
	s, _ := f.session(w, r, true)
	if s == nil || !decode(w, r, &b) {
		return
	}
	if b.Duration <= 0 {
		apiError(w, http.StatusBadRequest, "bad_request", "duration must be positive")
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	s.timeout += b.Duration
	f.extends++
	f.armTimer(s)
	reply(w, map[string]any{"session": f.sessionJSON(s)})
}

func (f *fake) networkPolicy(w http.ResponseWriter, r *http.Request) {
	var b map[string]any
	s, sb := f.session(w, r, true)
	if s == nil || !decode(w, r, &b) {
		return
	}
	p, err := policyResponse(b)
	if err != nil {
		apiError(w, http.StatusBadRequest, "bad_request", err.Error())
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	sb.policy = p
	reply(w, map[string]any{"session": f.sessionJSON(s)})
}

func (f *fake) snapshot(w http.ResponseWriter, r *http.Request) {
	s, sb := f.session(w, r, true)
	if s == nil {
		return
	}
	if r.ContentLength > 0 {
		var b struct {
			Expiration *int64 `json:"expiration"`
		}
		if !decode(w, r, &b) {
			return
		}
	}
	id := "snap_" + randHex(6)
	ref := "hermes-vercel-fake-snap:" + id
	if _, err := f.cli.ContainerCommit(r.Context(), sb.containerID, client.ContainerCommitOptions{Reference: ref, NoPause: true}); err != nil {
		apiError(w, http.StatusInternalServerError, "internal_error", err.Error())
		return
	}
	f.mu.Lock()
	sn := &fSnapshot{id: id, session: s.id, status: "created", image: ref, created: nowMs()}
	f.snapshots[id] = sn
	sb.snapshot = id
	f.mu.Unlock()
	f.stop(s.id)
	f.mu.Lock()
	defer f.mu.Unlock()
	reply(w, map[string]any{"snapshot": snapshotJSON(sn), "session": f.sessionJSON(s)})
}

func snapshotJSON(sn *fSnapshot) map[string]any {
	return map[string]any{"id": sn.id, "sourceSessionId": sn.session, "region": "iad1", "status": sn.status,
		"sizeBytes": 1 << 20, "createdAt": sn.created, "updatedAt": sn.created}
}

// snapshotByID serves GET and DELETE of a snapshot (a deleted one keeps its record).
func (f *fake) snapshotByID(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	defer f.mu.Unlock()
	sn, ok := f.snapshots[r.PathValue("id")]
	if !ok {
		apiError(w, http.StatusNotFound, "not_found", "snapshot not found")
		return
	}
	if r.Method == http.MethodDelete {
		sn.status = "deleted"
	}
	reply(w, map[string]any{"snapshot": snapshotJSON(sn)})
}

// Commands ------------------------------------------------------------------------------

func (c *fCmd) json() map[string]any {
	c.mu.Lock()
	defer c.mu.Unlock()
	m := map[string]any{"id": c.id, "name": c.name, "args": c.args, "cwd": c.cwd, "sessionId": c.session, "exitCode": nil, "startedAt": c.started}
	if c.exitCode != nil {
		m["exitCode"] = *c.exitCode
		m["durationMs"] = nowMs() - c.started
	}
	return m
}

func (c *fCmd) add(line map[string]any) {
	c.mu.Lock()
	c.logs = append(c.logs, line)
	close(c.changed)
	c.changed = make(chan struct{})
	c.mu.Unlock()
}

// snapshot returns the log lines from i, whether the command has finished, and a channel
// closed on the next change.
func (c *fCmd) since(i int) ([]map[string]any, bool, <-chan struct{}) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]map[string]any(nil), c.logs[i:]...), c.exitCode != nil, c.changed
}

type streamWriter struct {
	c      *fCmd
	stream string
}

func (s streamWriter) Write(p []byte) (int, error) {
	s.c.add(map[string]any{"stream": s.stream, "data": string(p)})
	return len(p), nil
}

func (f *fake) runCommand(w http.ResponseWriter, r *http.Request) {
	var b struct {
		Command string            `json:"command"`
		Args    []string          `json:"args"`
		Cwd     *string           `json:"cwd"`
		Env     map[string]string `json:"env"`
		Sudo    bool              `json:"sudo"`
		Wait    *bool             `json:"wait"`
		Logs    *bool             `json:"logs"`
		Timeout *int64            `json:"timeout"`
	}
	s, sb := f.session(w, r, true)
	if s == nil || !decode(w, r, &b) {
		return
	}
	if b.Command == "" || b.Args == nil || b.Env == nil {
		apiError(w, http.StatusBadRequest, "bad_request", "command, args and env are required")
		return
	}
	cwd := "/vercel/sandbox"
	if b.Cwd != nil {
		cwd = *b.Cwd
	}
	env := []string{}
	for k, v := range b.Env {
		env = append(env, k+"="+v)
	}
	ctx := context.WithoutCancel(r.Context())
	ex, err := f.cli.ExecCreate(ctx, sb.containerID, client.ExecCreateOptions{Cmd: append([]string{b.Command}, b.Args...),
		Env: env, WorkingDir: cwd, AttachStdout: true, AttachStderr: true})
	if err != nil {
		apiError(w, http.StatusBadRequest, "bad_request", err.Error())
		return
	}
	hr, err := f.cli.ExecAttach(ctx, ex.ID, client.ExecAttachOptions{})
	if err != nil {
		apiError(w, http.StatusInternalServerError, "internal_error", err.Error())
		return
	}
	c := &fCmd{id: "cmd_" + randHex(6), session: s.id, name: b.Command, args: b.Args, cwd: cwd, started: nowMs(), execID: ex.ID, changed: make(chan struct{})}
	f.mu.Lock()
	f.cmds[c.id] = c
	f.cmdStarts++
	f.mu.Unlock()
	go func() {
		defer hr.Close()
		stdcopy.StdCopy(streamWriter{c, "stdout"}, streamWriter{c, "stderr"}, hr.Reader)
		code := -1
		if info, err := f.cli.ExecInspect(ctx, ex.ID, client.ExecInspectOptions{}); err == nil {
			code = info.ExitCode
		}
		c.mu.Lock()
		c.exitCode = &code
		close(c.changed)
		c.changed = make(chan struct{})
		c.mu.Unlock()
	}()
	if b.Wait == nil || !*b.Wait {
		reply(w, map[string]any{"command": c.json()})
		return
	}
	w.Header().Set("Content-Type", "application/x-ndjson")
	enc := json.NewEncoder(w)
	enc.Encode(map[string]any{"command": c.json()})
	w.(http.Flusher).Flush()
	f.mu.Lock()
	cut := f.cutWaitAfter
	f.mu.Unlock()
	f.streamLogs(w, r, c, cut, true)
}

// streamLogs writes a command's log lines as NDJSON until it finishes (then the finished
// command when withCommand), or cuts the connection after cut lines.
func (f *fake) streamLogs(w http.ResponseWriter, r *http.Request, c *fCmd, cut int, withCommand bool) {
	enc := json.NewEncoder(w)
	sent := 0
	for {
		lines, done, changed := c.since(sent)
		for _, l := range lines {
			if cut > 0 && sent >= cut {
				panic(http.ErrAbortHandler) // the connection breaks mid-stream
			}
			enc.Encode(l)
			sent++
		}
		w.(http.Flusher).Flush()
		if done {
			if withCommand {
				enc.Encode(map[string]any{"command": c.json()})
			}
			return
		}
		select {
		case <-changed:
		case <-r.Context().Done():
			return
		}
	}
}

func (f *fake) command(w http.ResponseWriter, r *http.Request) *fCmd {
	s, _ := f.session(w, r, false)
	if s == nil {
		return nil
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	c, ok := f.cmds[r.PathValue("cmd")]
	if !ok || c.session != s.id {
		apiError(w, http.StatusNotFound, "not_found", "command not found")
		return nil
	}
	return c
}

func (f *fake) getCommand(w http.ResponseWriter, r *http.Request) {
	c := f.command(w, r)
	if c == nil {
		return
	}
	if r.URL.Query().Get("wait") == "true" {
		for {
			_, done, changed := c.since(0)
			if done {
				break
			}
			select {
			case <-changed:
			case <-r.Context().Done():
				return
			}
		}
	}
	reply(w, map[string]any{"command": c.json()})
}

func (f *fake) logs(w http.ResponseWriter, r *http.Request) {
	c := f.command(w, r)
	if c == nil {
		return
	}
	f.mu.Lock()
	cut := 0
	if f.cutLogsTimes > 0 {
		f.cutLogsTimes--
		cut = 1
	}
	f.mu.Unlock()
	w.Header().Set("Content-Type", "application/x-ndjson")
	f.streamLogs(w, r, c, cut, false)
}

func (f *fake) kill(w http.ResponseWriter, r *http.Request) {
	var b struct {
		Signal int `json:"signal"`
	}
	c := f.command(w, r)
	if c == nil || !decode(w, r, &b) {
		return
	}
	info, err := f.cli.ExecInspect(r.Context(), c.execID, client.ExecInspectOptions{})
	if err != nil || !info.Running {
		apiError(w, http.StatusBadRequest, "bad_request", "the command is not running")
		return
	}
	if err := syscall.Kill(info.PID, syscall.Signal(b.Signal)); err != nil {
		apiError(w, http.StatusInternalServerError, "internal_error", err.Error())
		return
	}
	reply(w, map[string]any{"command": c.json()})
}

// Files ---------------------------------------------------------------------------------

// helpers for tests ---------------------------------------------------------------------

// count counts the authorised requests ("METHOD path") that match.
func (f *fake) count(match func(req string) bool) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	n := 0
	for _, r := range f.requests {
		if match(r) {
			n++
		}
	}
	return n
}

func (f *fake) sandboxByTag(session string) *fSandbox {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, sb := range f.sandboxes {
		if sb.tags[tagSession] == session {
			return sb
		}
	}
	return nil
}

// current is the VM session id of the session's sandbox.
func (f *fake) current(session string) string {
	sb := f.sandboxByTag(session)
	f.mu.Lock()
	defer f.mu.Unlock()
	return sb.current
}
