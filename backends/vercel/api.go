package vercel

// The typed REST client. Request bodies and response types follow the official SDK's
// api-client.ts and validators.ts (@vercel/sandbox 3.1.0, ../../shared/specs/vercel-sandbox):
// field names, optional fields (omitempty where the SDK leaves them undefined) and status
// enums as there. Responses are decoded leniently (the service adds fields over time);
// the test fake decodes requests strictly.

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// DefaultAPIURL is the SDK's base URL; routes are joined under it.
const DefaultAPIURL = "https://vercel.com/api"

// Status is a sandbox's or session's status (validators.ts Session.status).
type Status string

// The statuses validators.ts allows.
const (
	StatusPending      Status = "pending"
	StatusRunning      Status = "running"
	StatusStopping     Status = "stopping"
	StatusStopped      Status = "stopped"
	StatusFailed       Status = "failed"
	StatusAborted      Status = "aborted"
	StatusSnapshotting Status = "snapshotting"
)

// Valid reports whether s is one of the statuses the API defines.
func (s Status) Valid() bool {
	switch s {
	case StatusPending, StatusRunning, StatusStopping, StatusStopped, StatusFailed, StatusAborted, StatusSnapshotting:
		return true
	}
	return false
}

// NetworkPolicy is the request form (NetworkPolicyRequestValidator): a mode, or a domain
// allowlist.
type NetworkPolicy struct {
	Mode  string   `json:"mode,omitempty"`  // "allow-all" or "deny-all"
	Allow []string `json:"allow,omitempty"` // V2 object form: allowed domains
}

// NetworkPolicyState is the response form (NetworkPolicyResponseValidator).
type NetworkPolicyState struct {
	Mode           string   `json:"mode"` // allow-all, deny-all or custom
	AllowedDomains []string `json:"allowedDomains,omitempty"`
	AllowedCIDRs   []string `json:"allowedCIDRs,omitempty"`
	DeniedCIDRs    []string `json:"deniedCIDRs,omitempty"`
}

// VMSession is one running VM of a sandbox (validators.ts Session).
type VMSession struct {
	ID              string              `json:"id"`
	Memory          float64             `json:"memory"`
	VCPUs           float64             `json:"vcpus"`
	Region          string              `json:"region"`
	Runtime         string              `json:"runtime,omitempty"`
	Timeout         int64               `json:"timeout"` // ms
	Status          Status              `json:"status"`
	RequestedAt     int64               `json:"requestedAt"`
	StartedAt       int64               `json:"startedAt,omitempty"`
	RequestedStopAt int64               `json:"requestedStopAt,omitempty"`
	StoppedAt       int64               `json:"stoppedAt,omitempty"`
	AbortedAt       int64               `json:"abortedAt,omitempty"`
	Duration        int64               `json:"duration,omitempty"`
	SourceSnapshot  string              `json:"sourceSnapshotId,omitempty"`
	SnapshottedAt   int64               `json:"snapshottedAt,omitempty"`
	CreatedAt       int64               `json:"createdAt"`
	Cwd             string              `json:"cwd"`
	UpdatedAt       int64               `json:"updatedAt"`
	InteractivePort int                 `json:"interactivePort,omitempty"`
	NetworkPolicy   *NetworkPolicyState `json:"networkPolicy,omitempty"`
}

// Route is an exposed port (validators.ts SandboxRoute).
type Route struct {
	URL       string `json:"url"`
	Subdomain string `json:"subdomain"`
	Port      int    `json:"port"`
}

// SandboxMeta is a named, durable sandbox (validators.ts Sandbox).
type SandboxMeta struct {
	Name              string              `json:"name"`
	Persistent        bool                `json:"persistent"`
	Region            string              `json:"region,omitempty"`
	VCPUs             float64             `json:"vcpus,omitempty"`
	Memory            float64             `json:"memory,omitempty"`
	Runtime           string              `json:"runtime,omitempty"`
	Image             string              `json:"image,omitempty"`
	Timeout           int64               `json:"timeout,omitempty"`
	NetworkPolicy     *NetworkPolicyState `json:"networkPolicy,omitempty"`
	CreatedAt         int64               `json:"createdAt"`
	UpdatedAt         int64               `json:"updatedAt"`
	ExpiresAt         int64               `json:"expiresAt,omitempty"`
	CurrentSessionID  string              `json:"currentSessionId"`
	CurrentSnapshotID string              `json:"currentSnapshotId,omitempty"`
	Status            Status              `json:"status"`
	StatusUpdatedAt   int64               `json:"statusUpdatedAt,omitempty"`
	Cwd               string              `json:"cwd,omitempty"`
	Tags              map[string]string   `json:"tags,omitempty"`
}

// Snapshot is a saved sandbox filesystem (validators.ts Snapshot).
type Snapshot struct {
	ID              string `json:"id"`
	SourceSessionID string `json:"sourceSessionId"`
	Region          string `json:"region"`
	Status          string `json:"status"` // created, deleted, failed
	SizeBytes       int64  `json:"sizeBytes"`
	ExpiresAt       int64  `json:"expiresAt,omitempty"`
	CreatedAt       int64  `json:"createdAt"`
	UpdatedAt       int64  `json:"updatedAt"`
}

// Command is a command's record (validators.ts Command); ExitCode is nil while it runs.
type Command struct {
	ID         string   `json:"id"`
	Name       string   `json:"name"`
	Args       []string `json:"args"`
	Cwd        string   `json:"cwd"`
	SessionID  string   `json:"sessionId"`
	ExitCode   *int     `json:"exitCode"`
	DurationMs int64    `json:"durationMs,omitempty"`
	StartedAt  int64    `json:"startedAt"`
}

// Pagination is validators.ts CursorPagination.
type Pagination struct {
	Count int     `json:"count"`
	Next  *string `json:"next"`
}

// SandboxAndSession is validators.ts SandboxAndSessionResponse.
type SandboxAndSession struct {
	Sandbox SandboxMeta `json:"sandbox"`
	Session VMSession   `json:"session"`
	Routes  []Route     `json:"routes"`
	Resumed bool        `json:"resumed,omitempty"`
}

// Source is where a new sandbox's filesystem comes from.
type Source struct {
	Type       string `json:"type"` // "snapshot" (git and tarball are not used here)
	SnapshotID string `json:"snapshotId,omitempty"`
}

// Resources is the createSandbox resources object.
type Resources struct {
	VCPUs int `json:"vcpus"`
}

// CreateSandboxRequest is createSandbox's body.
type CreateSandboxRequest struct {
	ProjectID     string            `json:"projectId"`
	Ports         []int             `json:"ports,omitempty"`
	Source        *Source           `json:"source,omitempty"`
	Timeout       int64             `json:"timeout,omitempty"` // ms
	Resources     *Resources        `json:"resources,omitempty"`
	Runtime       string            `json:"runtime,omitempty"`
	Name          string            `json:"name,omitempty"`
	Persistent    bool              `json:"persistent,omitempty"`
	NetworkPolicy *NetworkPolicy    `json:"networkPolicy,omitempty"`
	Env           map[string]string `json:"env,omitempty"`
	Tags          map[string]string `json:"tags,omitempty"`
}

// UpdateSandboxRequest is updateSandbox's body.
type UpdateSandboxRequest struct {
	Timeout           int64             `json:"timeout,omitempty"`
	NetworkPolicy     *NetworkPolicy    `json:"networkPolicy,omitempty"`
	Tags              map[string]string `json:"tags,omitempty"`
	CurrentSnapshotID string            `json:"currentSnapshotId,omitempty"`
}

// RunCommandRequest is runCommand's body.
type RunCommandRequest struct {
	Command string            `json:"command"`
	Args    []string          `json:"args"`
	Cwd     string            `json:"cwd,omitempty"`
	Env     map[string]string `json:"env"`
	Sudo    bool              `json:"sudo"`
	Wait    bool              `json:"wait,omitempty"`
	Logs    bool              `json:"logs,omitempty"`
	Timeout int64             `json:"timeout,omitempty"`
}

// LogLine is one line of a command's NDJSON output (validators.ts LogLine): stdout or
// stderr data, or an error whose data is an object.
type LogLine struct {
	Stream string          `json:"stream"`
	Data   json.RawMessage `json:"data"`
}

// APIError is an error response: {error: {code, message}} with the HTTP status.
type APIError struct {
	Status  int
	Code    string
	Message string
	// RetryAfter is the server's Retry-After on 429.
	RetryAfter time.Duration
}

func (e *APIError) Error() string {
	msg := e.Message
	if msg == "" {
		msg = http.StatusText(e.Status)
	}
	if e.Code != "" {
		return fmt.Sprintf("%s (HTTP %d %s)", msg, e.Status, e.Code)
	}
	return fmt.Sprintf("%s (HTTP %d)", msg, e.Status)
}

// Client speaks the Vercel Sandbox REST API for one team and project.
type Client struct {
	base    *url.URL
	token   string
	teamID  string
	project string
	http    *http.Client
	// retries and backoff for idempotent requests (network errors, 429, 5xx)
	retries int
	backoff time.Duration
}

// NewClient returns a client; base is the API URL ("" = DefaultAPIURL).
func NewClient(base, token, teamID, projectID string, hc *http.Client) (*Client, error) {
	if base == "" {
		base = DefaultAPIURL
	}
	u, err := url.Parse(strings.TrimRight(base, "/"))
	if err != nil || u.Host == "" || (u.Scheme != "http" && u.Scheme != "https") {
		return nil, fmt.Errorf("vercel.api_url %q: want an http(s) URL such as %s", base, DefaultAPIURL)
	}
	if hc == nil {
		hc = &http.Client{Transport: http.DefaultTransport}
	}
	return &Client{base: u, token: token, teamID: teamID, project: projectID, http: hc, retries: 4, backoff: 200 * time.Millisecond}, nil
}

// route builds {base}{path}?teamId=…&query.
func (c *Client) route(path string, q url.Values) string {
	u := *c.base
	u.Path = strings.TrimRight(u.Path, "/") + path
	if q == nil {
		q = url.Values{}
	}
	q.Set("teamId", c.teamID)
	u.RawQuery = q.Encode()
	return u.String()
}

// do sends one request. Idempotent requests (and any request refused with 429) are retried
// on network errors and 5xx; a command start is retried only when the server refused it.
func (c *Client) do(ctx context.Context, method, path string, q url.Values, body io.Reader, ctype string, header http.Header, idempotent bool) (*http.Response, error) {
	var payload []byte
	if body != nil {
		var err error
		if payload, err = io.ReadAll(body); err != nil {
			return nil, err
		}
	}
	for attempt := 0; ; attempt++ {
		var rd io.Reader
		if payload != nil {
			rd = bytes.NewReader(payload)
		}
		req, err := http.NewRequestWithContext(ctx, method, c.route(path, q), rd)
		if err != nil {
			return nil, err
		}
		req.Header.Set("Authorization", "Bearer "+c.token)
		req.Header.Set("User-Agent", "hermes-sandbox")
		if ctype != "" {
			req.Header.Set("Content-Type", ctype)
		}
		for k, v := range header {
			req.Header[k] = v
		}
		resp, err := c.http.Do(req)
		retry := false
		wait := c.backoff << attempt
		switch {
		case err != nil:
			retry = idempotent || refused(err)
		case resp.StatusCode == http.StatusTooManyRequests:
			retry = true
			if s, perr := strconv.Atoi(resp.Header.Get("Retry-After")); perr == nil {
				wait = time.Duration(s) * time.Second
			}
		case resp.StatusCode >= 500 && idempotent:
			retry = true
		}
		if !retry || attempt >= c.retries || ctx.Err() != nil {
			if err != nil {
				return nil, err
			}
			return resp, nil
		}
		if resp != nil {
			io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<16))
			resp.Body.Close()
		}
		select {
		case <-time.After(wait):
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

// refused reports a connection that never reached the server, so nothing ran.
func refused(err error) bool {
	var op *net.OpError
	return errors.As(err, &op) && op.Op == "dial"
}

// decodeError reads an error response.
func decodeError(resp *http.Response) error {
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<16))
	e := &APIError{Status: resp.StatusCode}
	var body struct {
		Error struct {
			Code    string `json:"code"`
			Message string `json:"message"`
		} `json:"error"`
	}
	if json.Unmarshal(b, &body) == nil {
		e.Code, e.Message = body.Error.Code, body.Error.Message
	}
	if e.Message == "" && e.Code == "" {
		e.Message = strings.TrimSpace(string(b))
	}
	if s, err := strconv.Atoi(resp.Header.Get("Retry-After")); err == nil {
		e.RetryAfter = time.Duration(s) * time.Second
	}
	return e
}

// call sends a JSON request and decodes a JSON response into out (may be nil).
func (c *Client) call(ctx context.Context, method, path string, q url.Values, in, out any) error {
	var body io.Reader
	ctype := ""
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			return err
		}
		body, ctype = bytes.NewReader(b), "application/json"
	}
	idempotent := method == http.MethodGet || method == http.MethodDelete || method == http.MethodPatch
	resp, err := c.do(ctx, method, path, q, body, ctype, nil, idempotent)
	if err != nil {
		return err
	}
	if resp.StatusCode/100 != 2 {
		return decodeError(resp)
	}
	defer resp.Body.Close()
	if out == nil {
		io.Copy(io.Discard, resp.Body)
		return nil
	}
	if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
		return fmt.Errorf("decode %s %s response: %w", method, path, err)
	}
	return nil
}

func sessionPath(id string, rest string) string {
	return "/v2/sandboxes/sessions/" + url.PathEscape(id) + rest
}

// CreateSandbox creates a named sandbox and starts its first session. As the SDK does, it
// posts to /v2/sandboxes when a runtime is given and to /v3/sandboxes otherwise.
func (c *Client) CreateSandbox(ctx context.Context, req CreateSandboxRequest) (*SandboxAndSession, error) {
	req.ProjectID = c.project
	path := "/v3/sandboxes"
	if req.Runtime != "" {
		path = "/v2/sandboxes"
	}
	var out SandboxAndSession
	if err := c.call(ctx, http.MethodPost, path, nil, req, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// GetSandbox finds a sandbox by name; resume starts a new session when it is stopped.
func (c *Client) GetSandbox(ctx context.Context, name string, resume bool) (*SandboxAndSession, error) {
	q := url.Values{"projectId": {c.project}}
	if resume {
		q.Set("resume", "true")
	}
	var out SandboxAndSession
	if err := c.call(ctx, http.MethodGet, "/v2/sandboxes/"+url.PathEscape(name), q, nil, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// ListSandboxes lists the project's sandboxes carrying all of tags, following pagination.
func (c *Client) ListSandboxes(ctx context.Context, namePrefix string, tags map[string]string) ([]SandboxMeta, error) {
	var all []SandboxMeta
	cursor := ""
	for {
		q := url.Values{"project": {c.project}, "limit": {"100"}}
		if namePrefix != "" {
			q.Set("namePrefix", namePrefix)
		}
		if cursor != "" {
			q.Set("cursor", cursor)
		}
		for k, v := range tags {
			q.Add("tags", k+":"+v)
		}
		var out struct {
			Sandboxes  []SandboxMeta `json:"sandboxes"`
			Pagination Pagination    `json:"pagination"`
		}
		if err := c.call(ctx, http.MethodGet, "/v2/sandboxes", q, nil, &out); err != nil {
			return nil, err
		}
		all = append(all, out.Sandboxes...)
		if out.Pagination.Next == nil || *out.Pagination.Next == "" || len(out.Sandboxes) == 0 {
			return all, nil
		}
		cursor = *out.Pagination.Next
	}
}

// UpdateSandbox changes a sandbox's settings.
func (c *Client) UpdateSandbox(ctx context.Context, name string, req UpdateSandboxRequest) (*SandboxMeta, error) {
	var out struct {
		Sandbox SandboxMeta `json:"sandbox"`
	}
	if err := c.call(ctx, http.MethodPatch, "/v2/sandboxes/"+url.PathEscape(name), url.Values{"projectId": {c.project}}, req, &out); err != nil {
		return nil, err
	}
	return &out.Sandbox, nil
}

// DeleteSandbox deletes a sandbox with its sessions.
func (c *Client) DeleteSandbox(ctx context.Context, name string) error {
	return c.call(ctx, http.MethodDelete, "/v2/sandboxes/"+url.PathEscape(name), url.Values{"projectId": {c.project}}, nil, nil)
}

// GetSession returns a VM session.
func (c *Client) GetSession(ctx context.Context, id string) (*VMSession, error) {
	var out struct {
		Session VMSession `json:"session"`
		Routes  []Route   `json:"routes"`
	}
	if err := c.call(ctx, http.MethodGet, sessionPath(id, ""), nil, nil, &out); err != nil {
		return nil, err
	}
	return &out.Session, nil
}

// StopSession stops a VM session; a persistent sandbox keeps its filesystem.
func (c *Client) StopSession(ctx context.Context, id string) error {
	return c.call(ctx, http.MethodPost, sessionPath(id, "/stop"), nil, nil, nil)
}

// ExtendTimeout extends a session's lifetime by d.
func (c *Client) ExtendTimeout(ctx context.Context, id string, d time.Duration) (*VMSession, error) {
	var out struct {
		Session VMSession `json:"session"`
	}
	body := struct {
		Duration int64 `json:"duration"`
	}{d.Milliseconds()}
	if err := c.call(ctx, http.MethodPost, sessionPath(id, "/extend-timeout"), nil, body, &out); err != nil {
		return nil, err
	}
	return &out.Session, nil
}

// UpdateNetworkPolicy sets a running session's network policy.
func (c *Client) UpdateNetworkPolicy(ctx context.Context, id string, p NetworkPolicy) error {
	return c.call(ctx, http.MethodPost, sessionPath(id, "/network-policy"), nil, p, nil)
}

// CreateSnapshot snapshots a session's filesystem; the session stops.
func (c *Client) CreateSnapshot(ctx context.Context, id string) (*Snapshot, error) {
	var out struct {
		Snapshot Snapshot  `json:"snapshot"`
		Session  VMSession `json:"session"`
	}
	if err := c.call(ctx, http.MethodPost, sessionPath(id, "/snapshot"), nil, nil, &out); err != nil {
		return nil, err
	}
	return &out.Snapshot, nil
}

// GetSnapshot returns a snapshot.
func (c *Client) GetSnapshot(ctx context.Context, id string) (*Snapshot, error) {
	var out struct {
		Snapshot Snapshot `json:"snapshot"`
	}
	if err := c.call(ctx, http.MethodGet, "/v2/sandboxes/snapshots/"+url.PathEscape(id), nil, nil, &out); err != nil {
		return nil, err
	}
	return &out.Snapshot, nil
}

// DeleteSnapshot deletes a snapshot (api-client.ts deleteSnapshot: DELETE, no body).
func (c *Client) DeleteSnapshot(ctx context.Context, id string) (*Snapshot, error) {
	var out struct {
		Snapshot Snapshot `json:"snapshot"`
	}
	if err := c.call(ctx, http.MethodDelete, "/v2/sandboxes/snapshots/"+url.PathEscape(id), nil, nil, &out); err != nil {
		return nil, err
	}
	return &out.Snapshot, nil
}

// Interactive returns the URL and token of a session's PTY WebSocket.
func (c *Client) Interactive(ctx context.Context, id string) (wsURL, token string, err error) {
	var out struct {
		URL   string `json:"url"`
		Token string `json:"token"`
	}
	if err := c.call(ctx, http.MethodPost, sessionPath(id, "/interactive"), nil, struct{}{}, &out); err != nil {
		return "", "", err
	}
	return out.URL, out.Token, nil
}

// ReadFile reads a whole file; a missing file is an *APIError with status 404.
func (c *Client) ReadFile(ctx context.Context, id, path, cwd string) ([]byte, error) {
	b, _ := json.Marshal(struct {
		Path string `json:"path"`
		Cwd  string `json:"cwd,omitempty"`
	}{path, cwd})
	resp, err := c.do(ctx, http.MethodPost, sessionPath(id, "/fs/read"), nil, bytes.NewReader(b), "application/json", nil, true)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode/100 != 2 {
		return nil, decodeError(resp)
	}
	defer resp.Body.Close()
	if ct := resp.Header.Get("Content-Type"); !strings.Contains(ct, "application/octet-stream") {
		return nil, fmt.Errorf("read %s: unexpected content type %q", path, ct)
	}
	return io.ReadAll(resp.Body)
}

// WriteFiles extracts a gzipped tar into dir (the x-cwd header).
func (c *Client) WriteFiles(ctx context.Context, id, dir string, tgz []byte) error {
	resp, err := c.do(ctx, http.MethodPost, sessionPath(id, "/fs/write"), nil, bytes.NewReader(tgz), "application/gzip",
		http.Header{"X-Cwd": {dir}}, true)
	if err != nil {
		return err
	}
	if resp.StatusCode/100 != 2 {
		return decodeError(resp)
	}
	resp.Body.Close()
	return nil
}

// KillCommand sends a signal to a command.
func (c *Client) KillCommand(ctx context.Context, sessionID, cmdID string, signal int) error {
	body := struct {
		Signal int `json:"signal"`
	}{signal}
	return c.call(ctx, http.MethodPost, sessionPath(sessionID, "/cmd/"+url.PathEscape(cmdID)+"/kill"), nil, body, nil)
}

// GetCommand returns a command; wait blocks until it has finished.
func (c *Client) GetCommand(ctx context.Context, sessionID, cmdID string, wait bool) (*Command, error) {
	var q url.Values
	if wait {
		q = url.Values{"wait": {"true"}}
	}
	var out struct {
		Command Command `json:"command"`
	}
	if err := c.call(ctx, http.MethodGet, sessionPath(sessionID, "/cmd/"+url.PathEscape(cmdID)), q, nil, &out); err != nil {
		return nil, err
	}
	return &out.Command, nil
}
