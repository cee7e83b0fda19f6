package daytona

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"mime/multipart"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// The client below is a small typed client for the few routes this backend uses, written
// against the OpenAPI documents in shared/specs/daytona (the fake in the tests validates
// every request against them). See the README for why not the generated clients.

// sandboxInfo is the part of the Sandbox schema the backend reads.
type sandboxInfo struct {
	ID               string            `json:"id"`
	Name             string            `json:"name"`
	State            string            `json:"state"`
	Labels           map[string]string `json:"labels"`
	ErrorReason      string            `json:"errorReason"`
	Recoverable      bool              `json:"recoverable"`
	ToolboxProxyURL  string            `json:"toolboxProxyUrl"`
	AutoStopInterval float64           `json:"autoStopInterval"`
	CreatedAt        string            `json:"createdAt"`
	LastActivityAt   string            `json:"lastActivityAt"`
	CPU              float64           `json:"cpu"`
	Memory           float64           `json:"memory"`
	Disk             float64           `json:"disk"`
}

// createSandbox is the CreateSandbox schema, as far as the backend sets it.
type createSandbox struct {
	Name                string            `json:"name"`
	Snapshot            string            `json:"snapshot,omitempty"`
	Env                 map[string]string `json:"env,omitempty"`
	Labels              map[string]string `json:"labels"`
	NetworkBlockAll     bool              `json:"networkBlockAll"`
	NetworkAllowList    string            `json:"networkAllowList,omitempty"`
	Target              string            `json:"target,omitempty"`
	CPU                 int               `json:"cpu,omitempty"`
	Memory              int               `json:"memory,omitempty"`
	Disk                int               `json:"disk,omitempty"`
	AutoStopInterval    int               `json:"autoStopInterval"`
	AutoArchiveInterval *int              `json:"autoArchiveInterval,omitempty"`
	AutoDeleteInterval  int               `json:"autoDeleteInterval"`
	BuildInfo           *buildInfo        `json:"buildInfo,omitempty"`
}

// buildInfo is CreateBuildInfo: an image is given to Daytona as a one-line Dockerfile.
type buildInfo struct {
	DockerfileContent string `json:"dockerfileContent"`
}

type listSandboxes struct {
	Items      []sandboxInfo `json:"items"`
	NextCursor *string       `json:"nextCursor"`
}

type executeRequest struct {
	Command string `json:"command"`
	Cwd     string `json:"cwd,omitempty"`
	Timeout int    `json:"timeout,omitempty"`
}

type executeResponse struct {
	ExitCode int    `json:"exitCode"`
	Result   string `json:"result"`
}

type ptyCreateRequest struct {
	ID   string `json:"id"`
	Cwd  string `json:"cwd,omitempty"`
	Cols int    `json:"cols"`
	Rows int    `json:"rows"`
}

type ptyCreateResponse struct {
	SessionID string `json:"sessionId"`
}

type fileInfo struct {
	Name       string `json:"name"`
	IsDir      bool   `json:"isDir"`
	Size       int64  `json:"size"`
	Mode       string `json:"mode"`
	ModifiedAt string `json:"modifiedAt"`
}

// apiError is a non-2xx answer from the control plane or the toolbox.
type apiError struct {
	Method, Path string
	Status       int
	Message      string
}

func (e *apiError) Error() string {
	msg := e.Message
	if msg == "" {
		msg = http.StatusText(e.Status)
	}
	return fmt.Sprintf("%s %s: %d %s", e.Method, e.Path, e.Status, msg)
}

// netError is a request that got no answer (connection refused, reset, timed out).
type netError struct {
	Method, Path string
	Err          error
}

func (e *netError) Error() string {
	return fmt.Sprintf("%s %s: no answer from Daytona: %v", e.Method, e.Path, e.Err)
}
func (e *netError) Unwrap() error { return e.Err }

// statusOf returns the HTTP status of an apiError in err's chain, else 0.
func statusOf(err error) int {
	var ae *apiError
	if errors.As(err, &ae) {
		return ae.Status
	}
	return 0
}

// apiClient speaks to the control plane and to sandboxes' toolboxes.
type apiClient struct {
	base  string // daytona.api_url, no trailing slash
	key   string
	org   string // X-Daytona-Organization-ID, with a JWT
	hc    *http.Client
	retry retryPolicy
}

// retryPolicy bounds the retries of idempotent calls.
type retryPolicy struct {
	attempts int
	base     time.Duration
	max      time.Duration
}

var defaultRetry = retryPolicy{attempts: 4, base: 200 * time.Millisecond, max: 3 * time.Second}

// request is one HTTP call.
type request struct {
	method, url, path string // url is absolute; path is for messages
	body              []byte
	contentType       string
	idempotent        bool
	query             url.Values
}

// contractVersion is the Daytona release whose API and toolbox documents this client follows
// (shared/specs/daytona). It goes out as X-Daytona-SDK-Version, as every vendor SDK sends its
// own version: the toolbox keys its answers on it, and strips the stdout/stderr labels from a
// session command's log for a client that declares none (session.IsCombinedOutput).
const contractVersion = "0.190.0"

func (c *apiClient) authorize(h http.Header) {
	h.Set("Authorization", "Bearer "+c.key)
	h.Set("X-Daytona-SDK-Version", contractVersion)
	if c.org != "" {
		h.Set("X-Daytona-Organization-ID", c.org)
	}
}

// do sends r and returns the response body of a 2xx answer. Idempotent requests are retried
// with backoff on no answer, 429 and 5xx; others are sent once, since their effect is
// unknown when no answer comes.
func (c *apiClient) do(ctx context.Context, r request) ([]byte, error) {
	u := r.url
	if len(r.query) > 0 {
		u += "?" + r.query.Encode()
	}
	attempts := 1
	if r.idempotent {
		attempts = c.retry.attempts
	}
	var last error
	for i := 0; i < attempts; i++ {
		if i > 0 {
			d := min(c.retry.base<<(i-1), c.retry.max)
			d = d/2 + rand.N(d/2+1)
			if ra := retryAfter(last); ra > 0 {
				d = min(ra, c.retry.max)
			}
			select {
			case <-time.After(d):
			case <-ctx.Done():
				return nil, errors.Join(last, ctx.Err())
			}
		}
		var body io.Reader
		if r.body != nil {
			body = bytes.NewReader(r.body)
		}
		req, err := http.NewRequestWithContext(ctx, r.method, u, body)
		if err != nil {
			return nil, err
		}
		c.authorize(req.Header)
		if r.contentType != "" {
			req.Header.Set("Content-Type", r.contentType)
		}
		req.Header.Set("Accept", "application/json")
		resp, err := c.hc.Do(req)
		if err != nil {
			if ctx.Err() != nil {
				return nil, ctx.Err()
			}
			last = &netError{Method: r.method, Path: r.path, Err: err}
			continue
		}
		data, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil {
			last = &netError{Method: r.method, Path: r.path, Err: err}
			continue
		}
		if resp.StatusCode/100 == 2 {
			return data, nil
		}
		ae := &apiError{Method: r.method, Path: r.path, Status: resp.StatusCode, Message: errorMessage(data)}
		last = &retryAfterError{apiError: ae, after: parseRetryAfter(resp.Header.Get("Retry-After"))}
		if resp.StatusCode != http.StatusTooManyRequests && resp.StatusCode/100 != 5 {
			return nil, ae
		}
	}
	var ra *retryAfterError
	if errors.As(last, &ra) {
		return nil, ra.apiError
	}
	return nil, last
}

// retryAfterError carries a Retry-After hint between attempts.
type retryAfterError struct {
	*apiError
	after time.Duration
}

func retryAfter(err error) time.Duration {
	var ra *retryAfterError
	if errors.As(err, &ra) {
		return ra.after
	}
	return 0
}

func parseRetryAfter(v string) time.Duration {
	if n, err := strconv.Atoi(strings.TrimSpace(v)); err == nil && n >= 0 {
		return time.Duration(n) * time.Second
	}
	return 0
}

// errorMessage pulls the message out of an error body ({"message": …} from the control
// plane, {"error": …} from the toolbox), else returns the body itself, shortened.
func errorMessage(data []byte) string {
	var m struct {
		Message json.RawMessage `json:"message"`
		Error   string          `json:"error"`
	}
	if json.Unmarshal(data, &m) == nil {
		var s string
		if json.Unmarshal(m.Message, &s) == nil && s != "" {
			return s
		}
		var list []string
		if json.Unmarshal(m.Message, &list) == nil && len(list) > 0 {
			return strings.Join(list, "; ")
		}
		if m.Error != "" {
			return m.Error
		}
	}
	s := strings.TrimSpace(string(data))
	if len(s) > 300 {
		s = s[:300] + "…"
	}
	return s
}

func (c *apiClient) call(ctx context.Context, method, path string, idempotent bool, in, out any, query url.Values) error {
	r := request{method: method, url: c.base + path, path: path, idempotent: idempotent, query: query}
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			return err
		}
		r.body, r.contentType = b, "application/json"
	}
	data, err := c.do(ctx, r)
	if err != nil {
		return err
	}
	if out == nil {
		return nil
	}
	if err := json.Unmarshal(data, out); err != nil {
		return fmt.Errorf("%s %s: undecodable answer: %v", method, path, err)
	}
	return nil
}

// Control plane ---------------------------------------------------------------------------

func (c *apiClient) create(ctx context.Context, body createSandbox) (sandboxInfo, error) {
	var sb sandboxInfo
	err := c.call(ctx, http.MethodPost, "/sandbox", false, body, &sb, nil)
	return sb, err
}

func (c *apiClient) get(ctx context.Context, idOrName string) (sandboxInfo, error) {
	var sb sandboxInfo
	err := c.call(ctx, http.MethodGet, "/sandbox/"+url.PathEscape(idOrName), true, nil, &sb, nil)
	return sb, err
}

// list returns every sandbox carrying all of labels.
func (c *apiClient) list(ctx context.Context, labels map[string]string) ([]sandboxInfo, error) {
	lj, err := json.Marshal(labels)
	if err != nil {
		return nil, err
	}
	var out []sandboxInfo
	cursor := ""
	for {
		q := url.Values{"labels": {string(lj)}, "limit": {"200"}}
		if cursor != "" {
			q.Set("cursor", cursor)
		}
		var page listSandboxes
		if err := c.call(ctx, http.MethodGet, "/sandbox", true, nil, &page, q); err != nil {
			return nil, err
		}
		out = append(out, page.Items...)
		if page.NextCursor == nil || *page.NextCursor == "" || len(page.Items) == 0 {
			return out, nil
		}
		cursor = *page.NextCursor
	}
}

// action posts a state change (start, stop, archive). They are idempotent on the service's
// side: starting a started sandbox is a no-op.
func (c *apiClient) action(ctx context.Context, id, verb string) (sandboxInfo, error) {
	var sb sandboxInfo
	err := c.call(ctx, http.MethodPost, "/sandbox/"+url.PathEscape(id)+"/"+verb, true, nil, &sb, nil)
	return sb, err
}

func (c *apiClient) remove(ctx context.Context, id string) error {
	return c.call(ctx, http.MethodDelete, "/sandbox/"+url.PathEscape(id), true, nil, nil, nil)
}

// Toolbox --------------------------------------------------------------------------------

// toolbox addresses one sandbox's toolbox.
type toolbox struct {
	c    *apiClient
	base string // {toolboxProxyUrl}/{sandboxId}
}

func (c *apiClient) toolbox(sb sandboxInfo) toolbox {
	return toolbox{c: c, base: strings.TrimRight(sb.ToolboxProxyURL, "/") + "/" + url.PathEscape(sb.ID)}
}

func (t toolbox) call(ctx context.Context, method, path string, idempotent bool, in, out any, query url.Values) error {
	r := request{method: method, url: t.base + path, path: "toolbox " + path, idempotent: idempotent, query: query}
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			return err
		}
		r.body, r.contentType = b, "application/json"
	}
	data, err := t.c.do(ctx, r)
	if err != nil {
		return err
	}
	if out != nil {
		if err := json.Unmarshal(data, out); err != nil {
			return fmt.Errorf("%s %s: undecodable answer: %v", method, path, err)
		}
	}
	return nil
}

// execute runs one command through /process/execute. It is never retried: a command whose
// completion is unknown must not run twice. The toolbox joins stdout and stderr, and on its
// own timeout answers 408 and discards the output.
func (t toolbox) execute(ctx context.Context, command, cwd string, timeout time.Duration) (executeResponse, error) {
	var out executeResponse
	req := executeRequest{Command: command, Cwd: cwd}
	if timeout > 0 {
		req.Timeout = int((timeout + time.Second - 1) / time.Second)
	}
	err := t.call(ctx, http.MethodPost, "/process/execute", false, req, &out, nil)
	return out, err
}

func (t toolbox) upload(ctx context.Context, path string, data []byte) error {
	var buf bytes.Buffer
	mw := multipart.NewWriter(&buf)
	fw, err := mw.CreateFormFile("file", "upload")
	if err != nil {
		return err
	}
	fw.Write(data)
	if err := mw.Close(); err != nil {
		return err
	}
	_, err = t.c.do(ctx, request{method: http.MethodPost, url: t.base + "/files/upload", path: "toolbox /files/upload",
		body: buf.Bytes(), contentType: mw.FormDataContentType(), idempotent: true, query: url.Values{"path": {path}}})
	return err
}

func (t toolbox) download(ctx context.Context, path string) ([]byte, error) {
	return t.c.do(ctx, request{method: http.MethodGet, url: t.base + "/files/download", path: "toolbox /files/download",
		idempotent: true, query: url.Values{"path": {path}}})
}

func (t toolbox) listFiles(ctx context.Context, path string) ([]fileInfo, error) {
	var out []fileInfo
	err := t.call(ctx, http.MethodGet, "/files", true, nil, &out, url.Values{"path": {path}})
	return out, err
}

func (t toolbox) createPty(ctx context.Context, req ptyCreateRequest) (string, error) {
	var out ptyCreateResponse
	err := t.call(ctx, http.MethodPost, "/process/pty", false, req, &out, nil)
	return out.SessionID, err
}

func (t toolbox) deletePty(ctx context.Context, id string) error {
	return t.call(ctx, http.MethodDelete, "/process/pty/"+url.PathEscape(id), true, nil, nil, nil)
}

// ptyURL is the WebSocket address of a PTY session.
func (t toolbox) ptyURL(id string) string {
	return wsURL(t.base + "/process/pty/" + url.PathEscape(id) + "/connect")
}

// isNetErr reports whether err is a request that got no answer.
func isNetErr(err error) bool {
	var ne *netError
	var op *net.OpError
	return errors.As(err, &ne) || errors.As(err, &op)
}

// Process sessions ------------------------------------------------------------------------

type createSessionRequest struct {
	SessionID string `json:"sessionId"`
}

type sessionExecuteRequest struct {
	Command  string `json:"command"`
	RunAsync bool   `json:"runAsync"`
}

type sessionExecuteResponse struct {
	CmdID    string `json:"cmdId"`
	ExitCode *int   `json:"exitCode"`
}

type sessionCommand struct {
	ID       string `json:"id"`
	Command  string `json:"command"`
	ExitCode *int   `json:"exitCode"`
}

// createSession makes a process session (a shell the toolbox feeds commands to). It is
// sent once: a lost answer leaves at most an idle shell, deleted with the session's id.
func (t toolbox) createSession(ctx context.Context, id string) error {
	return t.call(ctx, http.MethodPost, "/process/session", false, createSessionRequest{SessionID: id}, nil, nil)
}

// sessionExec starts command in session id without waiting for it and returns the
// command's id. It is never retried: a command whose start is unknown must not run twice.
func (t toolbox) sessionExec(ctx context.Context, id, command string) (string, error) {
	var out sessionExecuteResponse
	err := t.call(ctx, http.MethodPost, "/process/session/"+url.PathEscape(id)+"/exec", false,
		sessionExecuteRequest{Command: command, RunAsync: true}, &out, nil)
	if err == nil && out.CmdID == "" {
		err = fmt.Errorf("POST toolbox /process/session/{id}/exec: no command id in the answer")
	}
	return out.CmdID, err
}

func (t toolbox) sessionCommand(ctx context.Context, id, cmdID string) (sessionCommand, error) {
	var out sessionCommand
	err := t.call(ctx, http.MethodGet, "/process/session/"+url.PathEscape(id)+"/command/"+url.PathEscape(cmdID), true, nil, &out, nil)
	return out, err
}

func (t toolbox) deleteSession(ctx context.Context, id string) error {
	return t.call(ctx, http.MethodDelete, "/process/session/"+url.PathEscape(id), true, nil, nil, nil)
}

// logsURL is the WebSocket address that follows a session command's log.
func (t toolbox) logsURL(id, cmdID string) string {
	return wsURL(t.base + "/process/session/" + url.PathEscape(id) + "/command/" + url.PathEscape(cmdID) + "/logs?follow=true")
}

// wsURL turns an http(s) address into a ws(s) one.
func wsURL(u string) string {
	if rest, ok := strings.CutPrefix(u, "https://"); ok {
		return "wss://" + rest
	}
	if rest, ok := strings.CutPrefix(u, "http://"); ok {
		return "ws://" + rest
	}
	return u
}
