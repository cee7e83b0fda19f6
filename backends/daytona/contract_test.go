package daytona

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers/legacy"
)

// These tests hold the fake to the vendor's contract where the backend's own traffic cannot
// show a divergence: each sends what the vendor's client or service would (or would not) and
// checks the fake answers as the real service does.

// reportTB keeps the fake's contract reports (Errorf) instead of failing the test with them.
type reportTB struct {
	testing.TB
	mu   sync.Mutex
	errs []string
}

func (r *reportTB) Errorf(format string, args ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.errs = append(r.errs, fmt.Sprintf(format, args...))
}

// take returns the reports so far and forgets them.
func (r *reportTB) take() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	e := r.errs
	r.errs = nil
	return e
}

// rawCall sends one request and returns the status and the JSON body (nil when not JSON).
func rawCall(t *testing.T, method, u string, h http.Header, body []byte) (int, map[string]any, []byte) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), method, u, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range h {
		req.Header[k] = v
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, u, err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	var m map[string]any
	if json.Unmarshal(data, &m) != nil {
		m = nil
	}
	return resp.StatusCode, m, data
}

// contractSandbox creates a started sandbox in f through the backend's client.
func contractSandbox(t *testing.T, f *fakeDaytona) (*apiClient, sandboxInfo) {
	t.Helper()
	c := &apiClient{base: f.apiURL(), key: f.key, hc: &http.Client{}, retry: defaultRetry}
	sb, err := c.create(t.Context(), createSandbox{Name: "contract-" + randomID(), Labels: map[string]string{}, AutoDeleteInterval: -1})
	if err != nil {
		t.Fatalf("create() = %v", err)
	}
	deadline := time.Now().Add(time.Minute)
	for sb.State != "started" {
		if time.Now().After(deadline) {
			t.Fatalf("sandbox %s still %s", sb.ID, sb.State)
		}
		select {
		case <-time.After(25 * time.Millisecond):
		case <-t.Context().Done():
			t.Fatal(t.Context().Err())
		}
		if sb, err = c.get(t.Context(), sb.ID); err != nil {
			t.Fatalf("get() = %v", err)
		}
	}
	return c, sb
}

// readLog follows a session command's log over the WebSocket with headers h until it ends.
func readLog(t *testing.T, u string, h http.Header) []byte {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	conn, _, err := websocket.Dial(ctx, u, &websocket.DialOptions{HTTPHeader: h})
	if err != nil {
		t.Fatalf("dial %s: %v", u, err)
	}
	defer conn.CloseNow()
	var out []byte
	for {
		_, data, err := conn.Read(ctx)
		if err != nil {
			if websocket.CloseStatus(err) != websocket.StatusNormalClosure {
				t.Fatalf("read log: %v", err)
			}
			return out
		}
		out = append(out, data...)
	}
}

func TestFakeContract(t *testing.T) {
	rt := &reportTB{TB: t}
	f := newFake(rt, testImage(t), time.Minute)
	c, sb := contractSandbox(t, f)
	tb := c.toolbox(sb)
	authed := http.Header{}
	c.authorize(authed)
	bare := http.Header{"Authorization": {"Bearer " + f.key}}
	if errs := rt.take(); len(errs) > 0 {
		t.Fatalf("the backend's client broke the contract: %q", errs)
	}

	t.Run("ToolboxOrigin", func(t *testing.T) {
		// The toolbox lives behind the proxy at toolboxProxyUrl, not on the API's origin.
		pu, _ := url.Parse(sb.ToolboxProxyURL)
		au, _ := url.Parse(f.apiURL())
		if pu.Host == au.Host || pu.Path != "/toolbox" {
			t.Errorf("toolboxProxyUrl = %q; want /toolbox on another origin than %q", sb.ToolboxProxyURL, f.apiURL())
		}
		body := []byte(`{"command":"true"}`)
		for _, u := range []string{
			f.srv.URL + "/toolbox/" + sb.ID + "/process/execute",       // the API's origin
			f.srv.URL + "/api/toolbox/" + sb.ID + "/process/execute",   // under the API
			f.proxy.URL + "/toolbox/" + sb.ID,                          // no toolbox path
			f.proxy.URL + "/process/execute",                           // no sandbox id
			f.proxy.URL + "/api/toolbox/" + sb.ID + "/process/execute", // the API's path form
		} {
			st, _, _ := rawCall(t, http.MethodPost, u, authed, body)
			if st/100 != 4 {
				t.Errorf("POST %s = %d; want a refusal", u, st)
			}
			if errs := rt.take(); len(errs) == 0 {
				t.Errorf("POST %s: the fake did not report the misplaced call", u)
			}
		}
	})

	t.Run("Auth", func(t *testing.T) {
		st, m, _ := rawCall(t, http.MethodPost, tb.base+"/process/execute", nil, []byte(`{"command":"true"}`))
		if st != http.StatusUnauthorized || m["code"] != "UNAUTHORIZED" || m["statusCode"] != 401.0 {
			t.Errorf("toolbox call without a key = %d %v; want 401 in the proxy's shape (code UNAUTHORIZED)", st, m)
		}
		st, m, _ = rawCall(t, http.MethodGet, f.apiURL()+"/sandbox/"+sb.ID, http.Header{"Authorization": {"Bearer nope"}}, nil)
		if st != http.StatusUnauthorized || m["error"] != "Unauthorized" || m["path"] == nil {
			t.Errorf("API call with a wrong key = %d %v; want 401 in the API's shape (error, path)", st, m)
		}
		// A sandbox the key cannot reach (here: none) is refused by the proxy's Authenticate.
		st, m, _ = rawCall(t, http.MethodPost, sb.ToolboxProxyURL+"/nosuch/process/execute", authed, []byte(`{"command":"true"}`))
		if st != http.StatusUnauthorized || m["code"] != "UNAUTHORIZED" {
			t.Errorf("toolbox call to no sandbox = %d %v; want 401 UNAUTHORIZED", st, m)
		}
		if errs := rt.take(); len(errs) != 0 {
			t.Errorf("the fake reported a well-formed call: %q", errs)
		}
	})

	t.Run("ExecuteShell", func(t *testing.T) {
		// The daemon hands the command to a shell: variables expand in the sandbox.
		res, err := tb.execute(t.Context(), `echo "$HOME"`, "", 10*time.Second)
		if err != nil || res.Result != fakeHome+"\n" {
			t.Errorf(`execute("echo \"$HOME\"") = %+v, %v; want %q`, res, err, fakeHome+"\n")
		}
		st, m, _ := rawCall(t, http.MethodPost, tb.base+"/process/execute", authed, []byte(`{"command":"sleep 5","timeout":1}`))
		if st != http.StatusRequestTimeout || m["code"] != "REQUEST_TIMEOUT" || m["message"] != "command execution timeout" {
			t.Errorf("execute past its timeout = %d %v; want 408 in the daemon's error shape", st, m)
		}
	})

	t.Run("SessionLogLabels", func(t *testing.T) {
		sid := "contract-" + randomID()
		if err := tb.createSession(t.Context(), sid); err != nil {
			t.Fatalf("createSession() = %v", err)
		}
		cmdID, err := tb.sessionExec(t.Context(), sid, "echo out; echo err >&2")
		if err != nil {
			t.Fatalf("sessionExec() = %v", err)
		}
		logs := tb.logsURL(sid, cmdID)
		// A client that declares no version gets the combined output, labels stripped.
		got := readLog(t, logs, bare)
		if bytes.Contains(got, prefixOut) || bytes.Contains(got, prefixErr) || !bytes.Contains(got, []byte("out\n")) || !bytes.Contains(got, []byte("err\n")) {
			t.Errorf("log without X-Daytona-SDK-Version = %q; want both lines without labels", got)
		}
		// The backend declares its contract version and gets the labelled log.
		got = readLog(t, logs, authed)
		if !bytes.Contains(got, append(prefixOut, "out\n"...)) || !bytes.Contains(got, append(prefixErr, "err\n"...)) {
			t.Errorf("log with X-Daytona-SDK-Version %s = %q; want labelled lines", contractVersion, got)
		}
		plain := strings.Replace(logs, "ws://", "http://", 1)
		plain = strings.TrimSuffix(plain, "?follow=true")
		_, _, data := rawCall(t, http.MethodGet, plain, bare, nil)
		if bytes.Contains(data, prefixOut) || !bytes.Contains(data, []byte("out\n")) {
			t.Errorf("GET log without a version = %q; want the plain combined text", data)
		}
		_, m, _ := rawCall(t, http.MethodGet, plain, authed, nil)
		if m["stdout"] != "out\n" || m["stderr"] != "err\n" {
			t.Errorf("GET log with version %s = %v; want JSON with stdout and stderr split by the daemon", contractVersion, m)
		}
		tb.deleteSession(t.Context(), sid)
	})

	t.Run("SessionCommandFields", func(t *testing.T) {
		sid := "contract-" + randomID()
		if err := tb.createSession(t.Context(), sid); err != nil {
			t.Fatalf("createSession() = %v", err)
		}
		defer tb.deleteSession(context.WithoutCancel(t.Context()), sid)
		st, m, _ := rawCall(t, http.MethodPost, tb.base+"/process/session/"+sid+"/exec", authed,
			[]byte(`{"command":"sleep 7","runAsync":true}`))
		if v, ok := m["exitCode"]; st != http.StatusAccepted || !ok || v != nil {
			t.Fatalf("async exec = %d %v; want 202 with exitCode null (the daemon's struct has no omitempty)", st, m)
		}
		cmdID, _ := m["cmdId"].(string)
		st, m, _ = rawCall(t, http.MethodGet, tb.base+"/process/session/"+sid+"/command/"+cmdID, authed, nil)
		if _, ok := m["exitCode"]; st != http.StatusOK || ok || m["id"] != cmdID {
			t.Errorf("running command = %d %v; want 200 without exitCode (omitempty)", st, m)
		}
		st, m, _ = rawCall(t, http.MethodGet, tb.base+"/process/session/nosuch/command/"+cmdID, authed, nil)
		if st != http.StatusNotFound || m["code"] != "NOT_FOUND" || m["message"] != "session not found" {
			t.Errorf("command of no session = %d %v; want 404 in the daemon's error shape", st, m)
		}
	})

	t.Run("PtyControl", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
		defer cancel()
		id := "contract-" + randomID()
		if _, err := tb.createPty(ctx, ptyCreateRequest{ID: id, Cols: 80, Rows: 24}); err != nil {
			t.Fatalf("createPty() = %v", err)
		}
		conn, _, err := websocket.Dial(ctx, tb.ptyURL(id), &websocket.DialOptions{HTTPHeader: authed})
		if err != nil {
			t.Fatalf("dial pty: %v", err)
		}
		defer conn.CloseNow()
		typ, data, err := conn.Read(ctx)
		if err != nil || typ != websocket.MessageText || string(data) != `{"status":"connected","type":"control"}` {
			t.Fatalf("first pty message = %v %q %v; want the connected control message", typ, data, err)
		}
		conn.Write(ctx, websocket.MessageBinary, []byte("exit 3\n"))
		for {
			if _, _, err = conn.Read(ctx); err != nil {
				break
			}
		}
		var ce websocket.CloseError
		if !errors.As(err, &ce) || ce.Code != websocket.StatusInternalError || !strings.Contains(ce.Reason, `"exitCode":3`) {
			t.Errorf("pty end after exit 3 = %v; want close 1011 with exitCode 3", err)
		}

		// A PTY that is not there: the upgrade succeeds, then a control error, then nothing.
		conn, _, err = websocket.Dial(ctx, tb.ptyURL("nosuch"), &websocket.DialOptions{HTTPHeader: authed})
		if err != nil {
			t.Fatalf("dial missing pty = %v; want the upgrade to succeed", err)
		}
		p := newWSPipe(conn, slog.New(slog.DiscardHandler))
		_, rerr := io.ReadAll(p)
		cerr := p.controlErr()
		p.Close()
		if rerr == nil || cerr == nil || !strings.Contains(cerr.Error(), "not found") {
			t.Errorf("missing pty stream = %v, control error %v; want the toolbox's control error", rerr, cerr)
		}
	})
	if errs := rt.take(); len(errs) > 0 {
		t.Errorf("the fake reported well-formed calls: %q", errs)
	}
}

// TestFakeAnswerCheck: the fake holds its own answers to the document, as the vendor's
// generated client reads them.
func TestFakeAnswerCheck(t *testing.T) {
	_, tbDoc := loadSpecs(t)
	router, err := legacy.NewRouter(tbDoc, openapi3.DisableExamplesValidation())
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		method, path string
		status       int
		ctype, body  string
		ok           bool
	}{
		{"GET", "/process/session/s/command/c", 200, "application/json", `{"id":"c","command":"x"}`, true},
		{"GET", "/process/session/s/command/c", 200, "application/json", `{"id":"c","command":"x","exitCode":null}`, false},
		{"GET", "/process/session/s/command/c", 200, "application/json", `{"id":"c"}`, false},
		{"POST", "/process/execute", 200, "application/json", `{"exitCode":0,"result":""}`, true},
		{"POST", "/process/execute", 200, "application/json", `{"exitCode":0}`, false},
		{"POST", "/process/execute", 200, "text/plain", `ok`, false},
		{"POST", "/process/execute", 201, "application/json", `{"exitCode":0,"result":""}`, false},
		{"POST", "/process/session/s/exec", 202, "application/json", `{"cmdId":"c","exitCode":null,"output":null}`, true},
		{"POST", "/process/session/s/exec", 202, "application/json", `{"exitCode":null}`, false},
		{"DELETE", "/process/pty/p", 200, "application/json", `{"message":"PTY session deleted"}`, true},
	} {
		req := httptest.NewRequest(tc.method, tc.path, nil)
		route, params, err := router.FindRoute(req)
		if err != nil {
			t.Fatalf("FindRoute(%s %s) = %v", tc.method, tc.path, err)
		}
		in := &openapi3filter.RequestValidationInput{Request: req, PathParams: params, Route: route}
		a := &answer{ResponseWriter: httptest.NewRecorder()}
		a.Header().Set("Content-Type", tc.ctype)
		a.WriteHeader(tc.status)
		a.Write([]byte(tc.body))
		err = checkAnswer(req, in, a)
		if (err == nil) != tc.ok {
			t.Errorf("checkAnswer(%s %s %d %s) = %v; want ok %v", tc.method, tc.path, tc.status, tc.body, err, tc.ok)
		}
	}
}
