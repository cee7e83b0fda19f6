//go:build unix

package vercel

// The fake keeps to the vendor's contract: it refuses what the official client
// (@vercel/sandbox 3.1.0, api-client.ts) never sends, answers with the statuses and error
// codes the SDK acts on (sandbox.ts, the official mock), and in the shapes validators.ts
// parses. Each check here fails when the fake's own check is taken out.

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"
)

// rawResp is an answer of the fake as a client sees it.
type rawResp struct {
	status int
	ctype  string
	body   []byte
}

// json decodes the body as one JSON value.
func (r rawResp) json(t testing.TB) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(r.body, &m); err != nil {
		t.Fatalf("answer %d %q is not a JSON object: %v", r.status, r.body, err)
	}
	return m
}

// lines decodes an NDJSON body.
func (r rawResp) lines(t testing.TB) []map[string]any {
	t.Helper()
	var out []map[string]any
	sc := bufio.NewScanner(bytes.NewReader(r.body))
	for sc.Scan() {
		var m map[string]any
		if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
			t.Fatalf("NDJSON line %q: %v", sc.Bytes(), err)
		}
		out = append(out, m)
	}
	return out
}

// raw sends one request the way the official client does (the bearer token, teamId, a JSON
// body), with the query q (teamId added), and reads the whole answer.
func (f *fake) raw(t testing.TB, method, path string, q url.Values, body any) rawResp {
	t.Helper()
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			t.Fatal(err)
		}
		rd = bytes.NewReader(b)
	}
	if q == nil {
		q = url.Values{}
	}
	q.Set("teamId", f.team)
	req, err := http.NewRequestWithContext(ctxT(t, time.Minute), method, f.url()+path+"?"+q.Encode(), rd)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+f.token)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("%s %s: reading the answer: %v", method, path, err)
	}
	return rawResp{status: resp.StatusCode, ctype: resp.Header.Get("Content-Type"), body: b}
}

// rawSandbox creates a sandbox as the official client would, and returns its name and
// VM session id.
func (f *fake) rawSandbox(t testing.TB, body map[string]any) (name, session string) {
	t.Helper()
	body["projectId"] = f.project
	if _, ok := body["ports"]; !ok {
		body["ports"] = []int{}
	}
	got := f.raw(t, http.MethodPost, "/v3/sandboxes", nil, body)
	if got.status != http.StatusOK {
		t.Fatalf("create sandbox = %d %s", got.status, got.body)
	}
	m := got.json(t)
	return m["sandbox"].(map[string]any)["name"].(string), m["session"].(map[string]any)["id"].(string)
}

// wantError checks an error answer: its status, and the {error: {code, message}} body the
// official mock sends and base-client.ts reads.
func wantError(t testing.TB, what string, got rawResp, status int, code string) {
	t.Helper()
	if got.status != status {
		t.Errorf("%s = %d %s; want %d %s", what, got.status, got.body, status, code)
		return
	}
	var body any
	if err := json.Unmarshal(got.body, &body); err != nil || vErrorBody(body) != nil || !strings.HasPrefix(got.ctype, "application/json") {
		t.Errorf("%s answered %d with %q (%s); want a JSON {error: {code, message}} body", what, got.status, got.body, got.ctype)
		return
	}
	if c := body.(map[string]any)["error"].(map[string]any)["code"]; code != "" && c != code {
		t.Errorf("%s = %d code %v; want code %s", what, got.status, c, code)
	}
}

// TestFakeRefusesWhatTheSDKNeverSends: each request differs from what api-client.ts sends
// in one way, and is refused.
func TestFakeRefusesWhatTheSDKNeverSends(t *testing.T) {
	f := newSetup(t).f
	name, sess := f.rawSandbox(t, map[string]any{"name": "contract"})
	started := f.raw(t, http.MethodPost, "/v2/sandboxes/sessions/"+sess+"/cmd", nil,
		map[string]any{"command": "sleep", "args": []string{"30"}, "env": map[string]string{}, "sudo": false})
	if started.status != http.StatusOK {
		t.Fatalf("start a command = %d %s", started.status, started.body)
	}
	cmd := started.json(t)["command"].(map[string]any)["id"].(string)
	sbPath, sessPath, cmdPath := "/v2/sandboxes/"+name, "/v2/sandboxes/sessions/"+sess, "/v2/sandboxes/sessions/"+sess+"/cmd/"+cmd
	proj := func(kv ...string) url.Values {
		q := url.Values{"projectId": {f.project}}
		for i := 0; i < len(kv); i += 2 {
			q.Add(kv[i], kv[i+1])
		}
		return q
	}
	list := func(kv ...string) url.Values {
		q := url.Values{"project": {f.project}}
		for i := 0; i < len(kv); i += 2 {
			q.Add(kv[i], kv[i+1])
		}
		return q
	}
	run := func(mut func(m map[string]any)) map[string]any {
		m := map[string]any{"command": "true", "args": []string{}, "env": map[string]string{}, "sudo": false}
		mut(m)
		return m
	}
	create := func(path string, mut func(m map[string]any)) map[string]any {
		m := map[string]any{"projectId": f.project, "ports": []int{}, "name": "contract-" + randHex(3)}
		if path == "/v2/sandboxes" {
			m["runtime"] = "node22"
		}
		mut(m)
		return m
	}
	for _, tt := range []struct {
		what         string
		method, path string
		q            url.Values
		body         any
		status       int
		code         string
	}{
		// Query parameters: only those api-client.ts sends on the route, as it spells them.
		{"get sandbox with project= as well", "GET", sbPath, proj("project", f.project), nil, 400, "bad_request"},
		{"get sandbox with resume=1 (String(bool) is true or false)", "GET", sbPath, proj("resume", "1"), nil, 400, "bad_request"},
		{"get session with projectId", "GET", sessPath, proj(), nil, 400, "bad_request"},
		{"list with projectId, not project", "GET", "/v2/sandboxes", proj(), nil, 400, "bad_request"},
		{"list with limit=0", "GET", "/v2/sandboxes", list("limit", "0"), nil, 400, "bad_request"},
		{"list with limit=all", "GET", "/v2/sandboxes", list("limit", "all"), nil, 400, "bad_request"},
		{"list with sortBy=size", "GET", "/v2/sandboxes", list("sortBy", "size"), nil, 400, "bad_request"},
		{"list with sortOrder=up", "GET", "/v2/sandboxes", list("sortOrder", "up"), nil, 400, "bad_request"},
		{"list with a cursor it never gave", "GET", "/v2/sandboxes", list("cursor", "abc"), nil, 400, "bad_request"},
		{"list with a tag filter without a colon", "GET", "/v2/sandboxes", list("tags", "k"), nil, 400, "bad_request"},
		{"get command with wait=1", "GET", cmdPath, url.Values{"wait": {"1"}}, nil, 400, "bad_request"},
		// createSandbox bodies.
		{"create with runtime and image", "POST", "/v2/sandboxes", nil,
			create("/v2/sandboxes", func(m map[string]any) { m["image"] = "x" }), 400, "bad_request"},
		{"create on /v3 with a runtime", "POST", "/v3/sandboxes", nil,
			create("/v3/sandboxes", func(m map[string]any) { m["runtime"] = "node22" }), 400, "bad_request"},
		{"create with a failover region that is its region", "POST", "/v3/sandboxes", nil,
			create("/v3/sandboxes", func(m map[string]any) { m["region"], m["failoverRegions"] = "iad1", []string{"iad1"} }),
			400, "bad_request"},
		{"create with 0 vcpus", "POST", "/v3/sandboxes", nil,
			create("/v3/sandboxes", func(m map[string]any) { m["resources"] = map[string]any{"vcpus": 0} }), 400, "bad_request"},
		{"create from a snapshot source without snapshotId", "POST", "/v3/sandboxes", nil,
			create("/v3/sandboxes", func(m map[string]any) { m["source"] = map[string]any{"type": "snapshot"} }), 400, "bad_request"},
		{"create from a snapshot that does not exist", "POST", "/v3/sandboxes", nil,
			create("/v3/sandboxes", func(m map[string]any) {
				m["source"] = map[string]any{"type": "snapshot", "snapshotId": "snap_missing"}
			}), 410, "snapshot_not_found"},
		{"create with subnets that are not an object", "POST", "/v3/sandboxes", nil,
			create("/v3/sandboxes", func(m map[string]any) { m["networkPolicy"] = map[string]any{"subnets": "10.0.0.0/8"} }),
			400, "bad_request"},
		{"create with subnets.allow not a list", "POST", "/v3/sandboxes", nil,
			create("/v3/sandboxes", func(m map[string]any) {
				m["networkPolicy"] = map[string]any{"subnets": map[string]any{"allow": "10.0.0.0/8"}}
			}), 400, "bad_request"},
		{"create with an allow rule holding transform and forwardURL", "POST", "/v3/sandboxes", nil,
			create("/v3/sandboxes", func(m map[string]any) {
				m["networkPolicy"] = map[string]any{"allow": map[string]any{"a.example": []any{
					map[string]any{"transform": []any{}, "forwardURL": "https://b.example"}}}}
			}), 400, "bad_request"},
		{"update with a mode and a list", "PATCH", sbPath, proj(),
			map[string]any{"networkPolicy": map[string]any{"mode": "deny-all", "allow": []string{"a.example"}}}, 400, "bad_request"},
		// runCommand bodies: command, args, env and sudo always; wait only true; logs only
		// true, with wait.
		{"command without sudo", "POST", sessPath + "/cmd", nil, run(func(m map[string]any) { delete(m, "sudo") }), 400, "bad_request"},
		{"command without env", "POST", sessPath + "/cmd", nil, run(func(m map[string]any) { delete(m, "env") }), 400, "bad_request"},
		{"command with wait: false", "POST", sessPath + "/cmd", nil, run(func(m map[string]any) { m["wait"] = false }), 400, "bad_request"},
		{"command with logs, no wait", "POST", sessPath + "/cmd", nil, run(func(m map[string]any) { m["logs"] = true }), 400, "bad_request"},
		{"command with logs: false", "POST", sessPath + "/cmd", nil,
			run(func(m map[string]any) { m["wait"], m["logs"] = true, false }), 400, "bad_request"},
		{"command with timeout 0", "POST", sessPath + "/cmd", nil, run(func(m map[string]any) { m["timeout"] = 0 }), 400, "bad_request"},
		// The other session routes.
		{"kill without a signal", "POST", cmdPath + "/kill", nil, map[string]any{}, 400, "bad_request"},
		{"kill with signal 0", "POST", cmdPath + "/kill", nil, map[string]any{"signal": 0}, 400, "bad_request"},
		{"stop with a body", "POST", sessPath + "/stop", nil, map[string]any{"force": true}, 400, "bad_request"},
		{"extend without a duration", "POST", sessPath + "/extend-timeout", nil, map[string]any{}, 400, "bad_request"},
		{"snapshot with a negative expiration", "POST", sessPath + "/snapshot", nil, map[string]any{"expiration": -1}, 400, "bad_request"},
		// Routes and methods it does not have: a JSON 404, as the official mock answers.
		{"an unknown route", "GET", sbPath + "/nothing", proj(), nil, 404, "not_found"},
		{"a route with a method it does not take", "PUT", sessPath, nil, nil, 404, "not_found"},
	} {
		got := f.raw(t, tt.method, tt.path, tt.q, tt.body)
		wantError(t, tt.what, got, tt.status, tt.code)
	}
	// None of that stopped the session or its command.
	if got := f.raw(t, "GET", cmdPath, nil, nil); got.status != 200 || got.json(t)["command"].(map[string]any)["exitCode"] != nil {
		t.Errorf("the command after the refused requests = %d %s; want it still running", got.status, got.body)
	}
}

// TestFakeSessionStatusCodes: a session-level request to a session that is not running is
// refused with the code sandbox.ts acts on.
func TestFakeSessionStatusCodes(t *testing.T) {
	f := newSetup(t).f
	_, sess := f.rawSandbox(t, map[string]any{"name": "status"})
	cmd := map[string]any{"command": "true", "args": []string{}, "env": map[string]string{}, "sudo": false}
	set := func(status string) {
		f.mu.Lock()
		f.sessions[sess].status = status
		f.mu.Unlock()
	}
	for _, tt := range []struct {
		status string
		want   int
		code   string
	}{
		{"stopping", http.StatusUnprocessableEntity, "sandbox_stopping"},         // sandbox.ts isSandboxStoppingError
		{"snapshotting", http.StatusUnprocessableEntity, "sandbox_snapshotting"}, // isSandboxSnapshottingError
		{"failed", http.StatusGone, "sandbox_stopped"},                           // isSandboxStoppedError
	} {
		set(tt.status)
		got := f.raw(t, "POST", "/v2/sandboxes/sessions/"+sess+"/cmd", nil, cmd)
		wantError(t, "command in a session "+tt.status, got, tt.want, tt.code)
	}
	set("running")
	f.stop(sess)
	wantError(t, "command in a stopped session", f.raw(t, "POST", "/v2/sandboxes/sessions/"+sess+"/cmd", nil, cmd),
		http.StatusGone, "sandbox_stopped")
}

// TestFakeCommandStreams: with wait, the stream holds the log lines only when logs is true
// (api-client.ts sends logs: params.logs || undefined; the official mock streams logs only
// then); a command's timeout kills it; killing a finished command answers with it.
func TestFakeCommandStreams(t *testing.T) {
	f := newSetup(t).f
	_, sess := f.rawSandbox(t, map[string]any{"name": "streams"})
	path := "/v2/sandboxes/sessions/" + sess + "/cmd"
	run := func(logs bool, args ...string) []map[string]any {
		t.Helper()
		body := map[string]any{"command": args[0], "args": args[1:], "env": map[string]string{}, "sudo": false, "wait": true}
		if logs {
			body["logs"] = true
		}
		got := f.raw(t, "POST", path, nil, body)
		if got.status != 200 || got.ctype != "application/x-ndjson" {
			t.Fatalf("command %q = %d %s %s; want 200 application/x-ndjson", args, got.status, got.ctype, got.body)
		}
		return got.lines(t)
	}
	kinds := func(lines []map[string]any) string {
		var k []string
		for _, l := range lines {
			if c, ok := l["command"].(map[string]any); ok {
				k = append(k, fmt.Sprintf("command(exit %v)", c["exitCode"]))
			} else {
				k = append(k, fmt.Sprintf("%v %q", l["stream"], l["data"]))
			}
		}
		return strings.Join(k, ", ")
	}
	if got, want := kinds(run(false, "echo", "hi")), "command(exit <nil>), command(exit 0)"; got != want {
		t.Errorf("stream without logs = %s; want %s", got, want)
	}
	if got, want := kinds(run(true, "echo", "hi")), `command(exit <nil>), stdout "hi\n", command(exit 0)`; got != want {
		t.Errorf("stream with logs = %s; want %s", got, want)
	}

	start := time.Now()
	got := f.raw(t, "POST", path, nil, map[string]any{"command": "sleep", "args": []string{"30"}, "env": map[string]string{},
		"sudo": false, "wait": true, "timeout": 300})
	lines := got.lines(t)
	last, _ := lines[len(lines)-1]["command"].(map[string]any)
	if last == nil || last["exitCode"] == nil || last["exitCode"] == 0.0 || time.Since(start) > 20*time.Second {
		t.Errorf("sleep 30 with a 300 ms timeout = %s after %s; want killed, at once", kinds(lines), time.Since(start))
	}

	id := lines[0]["command"].(map[string]any)["id"].(string)
	killed := f.raw(t, "POST", path+"/"+id+"/kill", nil, map[string]any{"signal": 15})
	if killed.status != 200 || conformsJSON(vCommandResponse, killed.body) != nil {
		t.Errorf("kill of a finished command = %d %s; want 200 and the command, as the official mock answers", killed.status, killed.body)
	}
}

func conformsJSON(s schema, b []byte) error {
	var v any
	if err := json.Unmarshal(b, &v); err != nil {
		return err
	}
	return s(v)
}

// TestFakeResponseShapes: what the fake answers keeps to validators.ts where it used to
// send nulls for optional fields or values it was not given, and reports what it was told.
func TestFakeResponseShapes(t *testing.T) {
	f := newSetup(t).f
	got := f.raw(t, "POST", "/v3/sandboxes", nil, map[string]any{"projectId": f.project, "ports": []int{}, "name": "shapes",
		"resources":     map[string]any{"vcpus": 4},
		"networkPolicy": map[string]any{"allow": []string{}, "subnets": map[string]any{"deny": []string{"10.0.0.0/8"}}}})
	if got.status != 200 {
		t.Fatalf("create = %d %s", got.status, got.body)
	}
	if err := conformsJSON(vSandboxAndSession, got.body); err != nil {
		t.Errorf("create without tags answered %s: %v", got.body, err)
	}
	m := got.json(t)
	sb, sess := m["sandbox"].(map[string]any), m["session"].(map[string]any)
	if _, ok := sb["tags"]; ok {
		t.Errorf("sandbox without tags has tags %v; want the key left out (zod's optional refuses null)", sb["tags"])
	}
	if sb["vcpus"] != 4.0 || sess["vcpus"] != 4.0 || sess["memory"] != 8192.0 {
		t.Errorf("sandbox with 4 vCPUs reports %v, session %v with %v MB; want 4, 4, 8192", sb["vcpus"], sess["vcpus"], sess["memory"])
	}
	policy, _ := json.Marshal(sb["networkPolicy"])
	if string(policy) != `{"allowedDomains":[],"deniedCIDRs":["10.0.0.0/8"],"mode":"custom"}` {
		t.Errorf("networkPolicy = %s; want custom, no domains (a list, not null), the denied subnet", policy)
	}

	// Pages: newest first, a cursor while more are left.
	f.rawSandbox(t, map[string]any{"name": "shapes-2"})
	f.rawSandbox(t, map[string]any{"name": "shapes-3"})
	var names []string
	q := url.Values{"project": {f.project}, "limit": {"2"}, "namePrefix": {"shapes"}}
	for pages := 0; ; pages++ {
		page := f.raw(t, "GET", "/v2/sandboxes", q, nil)
		if page.status != 200 || pages > 3 {
			t.Fatalf("list = %d %s after %d pages", page.status, page.body, pages)
		}
		pm := page.json(t)
		for _, s := range pm["sandboxes"].([]any) {
			names = append(names, s.(map[string]any)["name"].(string))
		}
		next := pm["pagination"].(map[string]any)["next"]
		if next == nil {
			break
		}
		q.Set("cursor", next.(string))
	}
	if strings.Join(names, " ") != "shapes-3 shapes-2 shapes" {
		t.Errorf("listed by pages of 2: %q; want shapes-3 shapes-2 shapes", names)
	}

	del := f.raw(t, "DELETE", "/v2/sandboxes/shapes-2", url.Values{"projectId": {f.project}}, nil)
	if del.status != 200 || del.json(t)["sandbox"].(map[string]any)["status"] != "stopped" {
		t.Errorf("delete = %d %s; want the sandbox, stopped", del.status, del.body)
	}
}

// TestRunCommandDeliversOutput: our client asks for the log lines in the command stream,
// as the SDK does, so a command's output arrives without reading its logs again.
func TestRunCommandDeliversOutput(t *testing.T) {
	s := newSetup(t)
	b := s.backend(t, nil)
	ctx := ctxT(t, 2*time.Minute)
	vm, _, _, err := b.ensure(ctx, "output")
	if err != nil {
		t.Fatal(err)
	}
	var out, errOut bytes.Buffer
	cmd, err := b.api.RunCommand(ctx, vm.ID, RunCommandRequest{Command: "sh", Args: []string{"-c", "echo out; echo err >&2"}},
		&out, &errOut, nil)
	if err != nil || cmd.ExitCode == nil || *cmd.ExitCode != 0 || out.String() != "out\n" || errOut.String() != "err\n" {
		t.Errorf("RunCommand() = %+v, %v, stdout %q, stderr %q; want exit 0, out, err", cmd, err, out.String(), errOut.String())
	}
	if n := s.f.count(func(r string) bool { return strings.HasSuffix(r, "/logs") }); n != 0 {
		t.Errorf("RunCommand() read the logs %d times; want the output from the command's own stream", n)
	}
}

// TestSessionsFollowPages: the service may answer a list in several pages; every sandbox
// of ours is found, on whichever page.
func TestSessionsFollowPages(t *testing.T) {
	s := newSetup(t)
	b := s.backend(t, nil)
	ctx := ctxT(t, 2*time.Minute)
	for _, name := range []string{"p1", "p2", "p3"} {
		if _, err := b.api.CreateSandbox(ctx, CreateSandboxRequest{Name: b.sandboxName(name), Persistent: true, Tags: b.tags(name)}); err != nil {
			t.Fatal(err)
		}
	}
	s.f.mu.Lock()
	s.f.pageSize = 1
	s.f.mu.Unlock()
	list, err := b.Sessions(ctx)
	if err != nil || len(list) != 3 {
		t.Errorf("Sessions() = %d sessions, %v; want 3, one a page", len(list), err)
	}
}

// TestSnapshotGoneRecreates: a stopped sandbox whose snapshot is gone cannot resume (410
// snapshot_not_found); the session's sandbox is then made anew, as the SDK's getOrCreate
// does, instead of failing on every use.
func TestSnapshotGoneRecreates(t *testing.T) {
	s := newSetup(t)
	b := s.backend(t, nil)
	ctx := ctxT(t, 3*time.Minute)
	vm, _, _, err := b.ensure(ctx, "gone")
	if err != nil {
		t.Fatal(err)
	}
	snap, err := b.Snapshot(ctx, "gone") // stops the VM session, and resumes it
	if err != nil {
		t.Fatal(err)
	}
	got, err := b.api.GetSandbox(ctx, b.sandboxName("gone"), false)
	if err != nil || got.Session.Status != StatusRunning {
		t.Fatalf("the sandbox after Snapshot = %+v, %v; want it resumed", got, err)
	}
	if err := b.api.StopSession(ctx, got.Session.ID); err != nil {
		t.Fatal(err)
	}
	if got := s.f.raw(t, "DELETE", "/v2/sandboxes/snapshots/"+snap.ID, nil, nil); got.status != 200 {
		t.Fatalf("delete snapshot = %d %s", got.status, got.body)
	}
	resume := s.f.raw(t, "GET", "/v2/sandboxes/"+b.sandboxName("gone"), url.Values{"projectId": {s.f.project}, "resume": {"true"}}, nil)
	wantError(t, "resume from a deleted snapshot", resume, http.StatusGone, "snapshot_not_found")

	vm2, recreated, fresh, err := s.backend(t, nil).ensure(ctx, "gone")
	if err != nil || !recreated || !fresh || vm2.ID == vm.ID || vm2.Status != StatusRunning {
		t.Fatalf("ensure() after the snapshot went = %+v, recreated %v, fresh %v, %v; want a new running sandbox, recreated and fresh",
			vm2, recreated, fresh, err)
	}
}
