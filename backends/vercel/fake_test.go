//go:build unix

package vercel

// A fake Vercel Sandbox API for tests: loopback HTTP with the routes api-client.ts calls,
// response bodies shaped as validators.ts defines them (built here as plain maps, not with
// the client's types, and each checked against its validators.ts schema before it is sent:
// fake_schema_test.go), strict request decoding (an unknown field or query parameter is a
// 400: what the official client never sends is refused, so our client cannot drift from
// it unseen), the bearer token and teamId required on every request, NDJSON command
// streams, and the PTY WebSocket. Statuses and error codes follow the official in-memory
// fake (@vercel/sandbox-mock's mock-server.ts) and the codes sandbox.ts acts on: 410
// sandbox_stopped, 422 sandbox_stopping and sandbox_snapshotting, 410 snapshot_not_found.
// Each sandbox is a real docker container; a VM session is the container running; a
// snapshot is a committed image. The routes are in fake_sandbox_test.go (sandboxes,
// sessions, snapshots), fake_cmd_test.go (commands) and fake_io_test.go (files, PTY).

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

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
	// pageSize caps a list page below the request's limit (0 = the limit), as the service
	// may return fewer than asked for, so a client that ignores pagination.next misses some.
	pageSize int
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
	vcpus                   int
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
	stopRequested       int64
	timer               *time.Timer
	// booting: the container is still being created or started. The session exists (the
	// service answers with a session whatever the sandbox's state: validators.ts
	// SandboxAndSessionResponse requires one) and stays "pending" until it has booted.
	booting bool
}

type fSnapshot struct {
	id, session, status, image string
	created, updated, expires  int64
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
	// h serves a route with the query parameters api-client.ts sends on it (teamId is
	// always allowed, and required).
	h := func(pattern string, fn func(w http.ResponseWriter, r *http.Request), query ...string) {
		mux.HandleFunc(pattern, f.auth(fn, query))
	}
	h("POST /v2/sandboxes", f.createSandbox)
	h("POST /v3/sandboxes", f.createSandbox)
	h("GET /v2/sandboxes", f.listSandboxes, "project", "limit", "sortBy", "sortOrder", "namePrefix", "cursor", "tags")
	h("GET /v2/sandboxes/{name}", f.getSandbox, "projectId", "resume")
	h("PATCH /v2/sandboxes/{name}", f.updateSandbox, "projectId")
	h("DELETE /v2/sandboxes/{name}", f.deleteSandbox, "projectId")
	h("GET /v2/sandboxes/sessions/{id}", f.getSession)
	h("POST /v2/sandboxes/sessions/{id}/stop", f.stopSession)
	h("POST /v2/sandboxes/sessions/{id}/extend-timeout", f.extendTimeout)
	h("POST /v2/sandboxes/sessions/{id}/network-policy", f.networkPolicy)
	h("POST /v2/sandboxes/sessions/{id}/snapshot", f.snapshot)
	h("GET /v2/sandboxes/snapshots/{id}", f.snapshotByID)
	h("DELETE /v2/sandboxes/snapshots/{id}", f.snapshotByID)
	h("POST /v2/sandboxes/sessions/{id}/cmd", f.runCommand)
	h("GET /v2/sandboxes/sessions/{id}/cmd/{cmd}", f.getCommand, "wait")
	h("GET /v2/sandboxes/sessions/{id}/cmd/{cmd}/logs", f.logs)
	h("POST /v2/sandboxes/sessions/{id}/cmd/{cmd}/kill", f.kill)
	h("POST /v2/sandboxes/sessions/{id}/interactive", f.interactive)
	h("POST /v2/sandboxes/sessions/{id}/fs/mkdir", f.mkdir)
	h("POST /v2/sandboxes/sessions/{id}/fs/read", f.readFile)
	h("POST /v2/sandboxes/sessions/{id}/fs/write", f.writeFiles)
	// Anything else is a JSON 404, as the official mock answers (mock-server.ts), not
	// net/http's text/plain 404 or 405.
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		apiError(w, http.StatusNotFound, "not_found", "no route for "+r.Method+" "+r.URL.Path)
	})
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

// auth requires the bearer token and teamId on every request (api-client.ts request()
// adds teamId to every query, base-client.ts the Authorization header; the fake API is
// mounted under /api, as the SDK's base URL is https://vercel.com/api), and refuses a
// query parameter the route does not take.
func (f *fake) auth(fn func(http.ResponseWriter, *http.Request), query []string) http.HandlerFunc {
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
		for k := range r.URL.Query() {
			if k != "teamId" && !slices.Contains(query, k) {
				apiError(w, http.StatusBadRequest, "bad_request", "unknown query parameter "+k)
				return
			}
		}
		f.mu.Lock()
		f.requests = append(f.requests, r.Method+" "+r.URL.Path)
		f.mu.Unlock()
		fn(w, r)
	}
}

// send writes a JSON response after checking it against s, the validators.ts schema the
// official client parses it with: a response the SDK would refuse fails the test.
func (f *fake) send(w http.ResponseWriter, r *http.Request, s schema, v any) {
	if err := conforms(s, v); err != nil {
		f.t.Errorf("fake: the response to %s %s breaks validators.ts: %v", r.Method, r.URL.Path, err)
	}
	reply(w, v)
}

// noBody refuses a body where the official client sends none (stop, and snapshot without
// an expiration).
func noBody(w http.ResponseWriter, r *http.Request) bool {
	b, err := io.ReadAll(io.LimitReader(r.Body, 1<<20))
	if err != nil || len(b) > 0 {
		apiError(w, http.StatusBadRequest, "bad_request", "this route takes no body")
		return false
	}
	return true
}

// bodyPresent reports whether the request carries a body, leaving it to be read.
func bodyPresent(r *http.Request) bool {
	return r.ContentLength > 0 || (r.ContentLength < 0 && r.Body != nil && r.Body != http.NoBody)
}

// queryFlag reads a boolean the official client sends as String(bool): "true" or "false".
func queryFlag(w http.ResponseWriter, r *http.Request, key string) (value, ok bool) {
	q := r.URL.Query()
	if _, set := q[key]; !set {
		return false, true
	}
	switch v := q.Get(key); v {
	case "true", "false":
		return v == "true", true
	default:
		apiError(w, http.StatusBadRequest, "bad_request", key+" must be true or false, got "+url.QueryEscape(v))
		return false, false
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

// JSON shapes of validators.ts. An optional field the fake has no value for is left out:
// zod's .optional() refuses a null.

// resources is what a sandbox of vcpus gets: 2 GB of memory per vCPU (the official mock
// reports its vcpus, default 2, and 2048 MB).
func resources(m map[string]any, vcpus int) {
	m["vcpus"], m["memory"] = vcpus, 2048*vcpus
}

func (f *fake) sessionJSON(s *fSession) map[string]any {
	sb := f.sandboxes[s.sandbox]
	m := map[string]any{"id": s.id, "region": "iad1", "timeout": s.timeout, "status": s.status,
		"requestedAt": s.requested, "createdAt": s.requested, "cwd": "/vercel/sandbox", "updatedAt": nowMs()}
	resources(m, 2)
	if s.started > 0 {
		m["startedAt"] = s.started
	}
	if s.stopRequested > 0 {
		m["requestedStopAt"] = s.stopRequested
	}
	if s.stopped > 0 {
		m["stoppedAt"] = s.stopped
	}
	if sb != nil {
		resources(m, sb.vcpus)
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
		"timeout": sb.timeout, "networkPolicy": sb.policy, "region": "iad1"}
	resources(m, sb.vcpus)
	if sb.tags != nil {
		m["tags"] = sb.tags
	}
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
		out = append(out, map[string]any{"url": fmt.Sprintf("https://%s-%d.vercel.run", sb.name, p),
			"subdomain": fmt.Sprintf("%s-%d", sb.name, p), "port": p})
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

// policyResponse checks a network policy as NetworkPolicyRequestValidator (validators.ts)
// and toAPINetworkPolicy (utils/network-policy.ts) shape it: {mode: allow-all|deny-all}
// alone, or {allow?, subnets?} with allow a domain list or a record of domain → rules.
// It returns the policy as NetworkPolicyResponseValidator's legacy form reports it.
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
	out := map[string]any{"mode": "custom"}
	for k, v := range p {
		switch k {
		case "allow":
			domains, err := policyDomains(v)
			if err != nil {
				return nil, err
			}
			out["allowedDomains"] = domains
		case "subnets":
			sub, ok := v.(map[string]any)
			if !ok {
				return nil, fmt.Errorf("networkPolicy.subnets: want an object")
			}
			for sk, sv := range sub {
				cidrs, err := stringList(sv)
				if err != nil {
					return nil, fmt.Errorf("networkPolicy.subnets.%s: %w", sk, err)
				}
				switch sk {
				case "allow":
					out["allowedCIDRs"] = cidrs
				case "deny":
					out["deniedCIDRs"] = cidrs
				default:
					return nil, fmt.Errorf("networkPolicy.subnets: unknown field %q", sk)
				}
			}
		default:
			return nil, fmt.Errorf("networkPolicy: unknown field %q", k)
		}
	}
	return out, nil
}

// policyDomains reads networkPolicy.allow: a list of domains, or a record of domain → list
// of rules, each with transform or forwardURL but not both (NetworkPolicyRuleValidator).
func policyDomains(v any) ([]string, error) {
	if list, ok := v.([]any); ok {
		return stringList(list)
	}
	rec, ok := v.(map[string]any)
	if !ok {
		return nil, fmt.Errorf("networkPolicy.allow: want a list of domains or a record of rules")
	}
	domains := []string{}
	for d, rules := range rec {
		list, ok := rules.([]any)
		if !ok {
			return nil, fmt.Errorf("networkPolicy.allow[%q]: want a list of rules", d)
		}
		for _, rule := range list {
			r, ok := rule.(map[string]any)
			_, transform := r["transform"]
			_, forward := r["forwardURL"]
			if !ok || transform == forward {
				return nil, fmt.Errorf("networkPolicy.allow[%q]: a rule takes transform or forwardURL, one of them", d)
			}
		}
		domains = append(domains, d)
	}
	slices.Sort(domains)
	return domains, nil
}

// stringList reads a JSON list of strings; an empty list stays a list, never null.
func stringList(v any) ([]string, error) {
	list, ok := v.([]any)
	if !ok {
		return nil, fmt.Errorf("want a list of strings")
	}
	out := []string{}
	for _, e := range list {
		s, ok := e.(string)
		if !ok {
			return nil, fmt.Errorf("want a list of strings")
		}
		out = append(out, s)
	}
	return out, nil
}

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
