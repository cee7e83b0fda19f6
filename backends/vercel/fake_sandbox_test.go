//go:build unix

package vercel

// The fake's sandbox, VM session and snapshot routes (fake_test.go has the server).

import (
	"cmp"
	"context"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/client"
)

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
		// api-client.ts createSandbox: /v3 exactly when runtime is undefined.
		apiError(w, http.StatusBadRequest, "bad_request", "runtime is not accepted by /v3/sandboxes")
		return
	case !v3 && b.Runtime == nil:
		apiError(w, http.StatusBadRequest, "bad_request", "runtime is required by /v2/sandboxes")
		return
	case b.Runtime != nil && b.Image != nil:
		// sandbox.ts create() refuses the two together before sending.
		apiError(w, http.StatusBadRequest, "bad_request", "runtime and image cannot be used together")
		return
	case b.Resources != nil && b.Resources.VCPUs <= 0:
		apiError(w, http.StatusBadRequest, "bad_request", "resources.vcpus must be positive")
		return
	case b.Name == "":
		b.Name = "sbx_" + randHex(6)
	}
	if !checkRegions(w, b.Region, b.FailoverRegions) {
		return
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
		var ok bool
		if snapID, ok = src["snapshotId"].(string); !ok || len(src) != 2 {
			apiError(w, http.StatusBadRequest, "bad_request", "a snapshot source is {type, snapshotId}")
			return
		}
		f.mu.Lock()
		sn, ok := f.snapshots[snapID]
		fail := f.failSnapshots
		f.mu.Unlock()
		if !ok || sn.status != "created" {
			// 410 snapshot_not_found, which sandbox.ts isSnapshotNotFoundError looks for
			// (the official mock answers so for a missing or deleted snapshot).
			apiError(w, http.StatusGone, "snapshot_not_found", "snapshot not found: "+snapID)
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
		policy: policy, created: nowMs(), updated: nowMs(), status: "pending", snapshot: snapID, ports: b.Ports, vcpus: 2}
	if b.Resources != nil {
		sb.vcpus = b.Resources.VCPUs
	}
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
	if f.sandboxes[sb.name] != sb || f.sessions[sb.current] == nil { // deleted while it booted
		apiError(w, http.StatusGone, "sandbox_deleted", "the sandbox was deleted while it was created")
		return
	}
	f.send(w, r, vSandboxAndSession, f.sandboxAndSession(sb, false))
}

func boolPtr(b bool) *bool { return &b }

// checkRegions refuses failover regions that include the sandbox's own region, as the
// official mock does (mock-server.ts validateFailoverRegions).
func checkRegions(w http.ResponseWriter, region *string, failover []string) bool {
	if region != nil && slices.Contains(failover, *region) {
		apiError(w, http.StatusBadRequest, "bad_request", "failoverRegions must not include the sandbox region: "+*region)
		return false
	}
	return true
}

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
	s.status, s.stopRequested = "stopping", nowMs()
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
	s.status, s.stopped = "stopped", nowMs()
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
	resume, ok := queryFlag(w, r, "resume")
	if !ok {
		return
	}
	sb := f.sandboxFor(w, r, "projectId")
	if sb == nil {
		return
	}
	resumed := false
	f.mu.Lock()
	var s *fSession
	if sb.status == "stopped" && resume {
		// A stopped sandbox resumes from its current snapshot; when that is gone the
		// service answers 410 snapshot_not_found (sandbox.ts getOrCreate then deletes the
		// sandbox and creates it anew).
		if sn, ok := f.snapshots[sb.snapshot]; ok && sn.status != "created" {
			f.mu.Unlock()
			apiError(w, http.StatusGone, "snapshot_not_found", "the sandbox's snapshot "+sb.snapshot+" is gone")
			return
		}
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
	f.send(w, r, vSandboxAndSession, f.sandboxAndSession(sb, resumed))
}

// listSandboxes serves one page, newest first unless sortBy/sortOrder say otherwise (the
// official mock's default), with a cursor to the next page while there is one.
func (f *fake) listSandboxes(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	if q.Get("project") != f.project {
		apiError(w, http.StatusNotFound, "not_found", "project not found")
		return
	}
	limit, offset := 0, 0
	if v, set := q["limit"]; set {
		n, err := strconv.Atoi(v[0])
		if err != nil || n <= 0 || len(v) > 1 {
			apiError(w, http.StatusBadRequest, "bad_request", "limit must be one positive integer")
			return
		}
		limit = n
	}
	if v, set := q["cursor"]; set {
		n, err := strconv.Atoi(strings.TrimPrefix(v[0], "c"))
		if err != nil || !strings.HasPrefix(v[0], "c") || n <= 0 || len(v) > 1 {
			apiError(w, http.StatusBadRequest, "bad_request", "cursor "+v[0]+" was not given by this API")
			return
		}
		offset = n
	}
	sortBy, sortOrder := q.Get("sortBy"), q.Get("sortOrder")
	if _, set := q["sortBy"]; set && !slices.Contains([]string{"createdAt", "name", "statusUpdatedAt"}, sortBy) {
		apiError(w, http.StatusBadRequest, "bad_request", "sortBy must be createdAt, name or statusUpdatedAt")
		return
	}
	if _, set := q["sortOrder"]; set && sortOrder != "asc" && sortOrder != "desc" {
		apiError(w, http.StatusBadRequest, "bad_request", "sortOrder must be asc or desc")
		return
	}
	for _, kv := range q["tags"] {
		if !strings.Contains(kv, ":") {
			apiError(w, http.StatusBadRequest, "bad_request", "a tags filter is key:value, got "+kv)
			return
		}
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	var match []*fSandbox
	for _, sb := range f.sandboxes {
		if !strings.HasPrefix(sb.name, q.Get("namePrefix")) {
			continue
		}
		ok := true
		for _, kv := range q["tags"] {
			k, v, _ := strings.Cut(kv, ":")
			ok = ok && sb.tags[k] == v
		}
		if ok {
			match = append(match, sb)
		}
	}
	slices.SortFunc(match, func(a, b *fSandbox) int {
		c := 0
		switch sortBy {
		case "name":
			c = strings.Compare(a.name, b.name)
		case "statusUpdatedAt":
			c = cmp.Compare(a.updated, b.updated)
		default:
			c = cmp.Compare(a.created, b.created)
		}
		if c == 0 {
			c = strings.Compare(a.name, b.name)
		}
		if sortOrder != "asc" {
			c = -c
		}
		return c
	})
	size := limit
	if f.pageSize > 0 && (size == 0 || f.pageSize < size) {
		size = f.pageSize
	}
	page := match[min(offset, len(match)):]
	var next any
	if size > 0 && len(page) > size {
		page = page[:size]
		next = fmt.Sprintf("c%d", offset+size)
	}
	out := []any{}
	for _, sb := range page {
		out = append(out, f.sandboxJSON(sb))
	}
	f.send(w, r, vSandboxesPagination, map[string]any{"sandboxes": out, "pagination": map[string]any{"count": len(out), "next": next}})
}

func (f *fake) updateSandbox(w http.ResponseWriter, r *http.Request) {
	var b struct {
		Persistent *bool `json:"persistent"`
		Resources  *struct {
			VCPUs  *int `json:"vcpus"`
			Memory *int `json:"memory"`
		} `json:"resources"`
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
	if sb == nil || !decode(w, r, &b) || !checkRegions(w, b.Region, b.FailoverRegions) {
		return
	}
	var policy map[string]any
	if b.NetworkPolicy != nil {
		var err error
		if policy, err = policyResponse(b.NetworkPolicy); err != nil {
			apiError(w, http.StatusBadRequest, "bad_request", err.Error())
			return
		}
	}
	if b.Resources != nil && b.Resources.VCPUs != nil && *b.Resources.VCPUs <= 0 {
		apiError(w, http.StatusBadRequest, "bad_request", "resources.vcpus must be positive")
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if b.Persistent != nil {
		sb.persistent = *b.Persistent
	}
	if b.Resources != nil && b.Resources.VCPUs != nil {
		sb.vcpus = *b.Resources.VCPUs
	}
	if b.Timeout != nil {
		sb.timeout = *b.Timeout
	}
	if policy != nil {
		sb.policy = policy
	}
	if b.Tags != nil {
		sb.tags = b.Tags
	}
	if b.Ports != nil {
		sb.ports = b.Ports
	}
	if b.CurrentSnapshotID != nil {
		sb.snapshot = *b.CurrentSnapshotID
	}
	sb.updated = nowMs()
	f.send(w, r, vUpdateSandbox, map[string]any{"sandbox": f.sandboxJSON(sb), "routes": f.routes(sb)})
}

// deleteSandbox deletes a sandbox with its sessions; the answer shows it stopped, as the
// official mock's does.
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
			if s.status != "stopped" && s.status != "failed" {
				s.status, s.stopped = "stopped", nowMs()
			}
			delete(f.sessions, id)
		}
	}
	if sb.status != "failed" {
		sb.status, sb.updated = "stopped", nowMs()
	}
	delete(f.sandboxes, sb.name)
	body := map[string]any{"sandbox": f.sandboxJSON(sb), "routes": f.routes(sb)}
	cid := sb.containerID
	f.mu.Unlock()
	if cid != "" { // else its creation, still under way, finds it deleted and removes its container
		f.cli.ContainerRemove(r.Context(), cid, client.ContainerRemoveOptions{Force: true})
	}
	f.send(w, r, vUpdateSandbox, body)
}

// Sessions ------------------------------------------------------------------------------

// session finds the path's session; running says it must be running. A session that is
// not is refused with the codes sandbox.ts acts on: 422 sandbox_stopping or
// sandbox_snapshotting while it winds down (the SDK polls, then resumes), 410
// sandbox_stopped once it has (the SDK resumes).
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
		switch s.status {
		case "stopping":
			apiError(w, http.StatusUnprocessableEntity, "sandbox_stopping", "the session is stopping")
		case "snapshotting":
			apiError(w, http.StatusUnprocessableEntity, "sandbox_snapshotting", "the session is being snapshotted")
		default:
			apiError(w, http.StatusGone, "sandbox_stopped", "the session is "+s.status)
		}
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
	f.send(w, r, vSessionAndRoutesResponse, m)
}

func (f *fake) stopSession(w http.ResponseWriter, r *http.Request) {
	s, _ := f.session(w, r, false)
	if s == nil || !noBody(w, r) {
		return
	}
	f.stop(s.id)
	f.mu.Lock()
	defer f.mu.Unlock()
	m := map[string]any{"session": f.sessionJSON(s)}
	if sb := f.sandboxes[s.sandbox]; sb != nil {
		m["sandbox"] = f.sandboxJSON(sb)
	}
	f.send(w, r, vStopSessionResponse, m)
}

func (f *fake) extendTimeout(w http.ResponseWriter, r *http.Request) {
	var b struct {
		Duration *int64 `json:"duration"`
	}
	s, _ := f.session(w, r, true)
	if s == nil || !decode(w, r, &b) {
		return
	}
	if b.Duration == nil || *b.Duration <= 0 {
		apiError(w, http.StatusBadRequest, "bad_request", "duration must be a positive number of milliseconds")
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	s.timeout += *b.Duration
	f.extends++
	f.armTimer(s)
	f.send(w, r, vSessionResponse, map[string]any{"session": f.sessionJSON(s)})
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
	f.send(w, r, vSessionResponse, map[string]any{"session": f.sessionJSON(s)})
}

// snapshot commits the session's container as a snapshot; the session is "snapshotting"
// meanwhile, and stops after.
func (f *fake) snapshot(w http.ResponseWriter, r *http.Request) {
	s, sb := f.session(w, r, true)
	if s == nil {
		return
	}
	var expiration int64
	if bodyPresent(r) {
		var b struct {
			Expiration *int64 `json:"expiration"`
		}
		if !decode(w, r, &b) {
			return
		}
		if b.Expiration == nil || *b.Expiration < 0 {
			apiError(w, http.StatusBadRequest, "bad_request", "expiration must be a number of milliseconds, 0 for none")
			return
		}
		expiration = *b.Expiration
	}
	f.mu.Lock()
	if s.status != "running" { // another request took it first
		f.mu.Unlock()
		f.session(w, r, true)
		return
	}
	s.status = "snapshotting"
	f.mu.Unlock()
	id := "snap_" + randHex(6)
	ref := "hermes-vercel-fake-snap:" + id
	if _, err := f.cli.ContainerCommit(r.Context(), sb.containerID, client.ContainerCommitOptions{Reference: ref, NoPause: true}); err != nil {
		f.mu.Lock()
		s.status = "running"
		f.mu.Unlock()
		apiError(w, http.StatusInternalServerError, "internal_error", err.Error())
		return
	}
	f.mu.Lock()
	now := nowMs()
	sn := &fSnapshot{id: id, session: s.id, status: "created", image: ref, created: now, updated: now}
	if expiration > 0 {
		sn.expires = now + expiration
	}
	f.snapshots[id] = sn
	sb.snapshot = id
	f.mu.Unlock()
	f.stop(s.id)
	f.mu.Lock()
	defer f.mu.Unlock()
	f.send(w, r, vCreateSnapshotResponse, map[string]any{"snapshot": snapshotJSON(sn), "session": f.sessionJSON(s)})
}

func snapshotJSON(sn *fSnapshot) map[string]any {
	m := map[string]any{"id": sn.id, "sourceSessionId": sn.session, "region": "iad1", "status": sn.status,
		"sizeBytes": 1 << 20, "createdAt": sn.created, "updatedAt": sn.updated}
	if sn.expires > 0 {
		m["expiresAt"] = sn.expires
	}
	return m
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
	if r.Method == http.MethodDelete && sn.status != "deleted" {
		sn.status, sn.updated = "deleted", nowMs()
	}
	f.send(w, r, vSnapshotResponse, map[string]any{"snapshot": snapshotJSON(sn)})
}
