package daytona

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"mime"
	"mime/multipart"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
)

// The fake's two origins and the contract every request and answer is held to.
//
// Daytona serves the control plane (api_url, https://app.daytona.io/api by default) and the
// sandboxes' toolboxes on different origins: a Sandbox's toolboxProxyUrl is the proxy
// (https://proxy.app.daytona.io/toolbox in the API document's example), which takes
// {toolboxProxyUrl}/{sandboxId}/{toolbox path} (the toolbox document's info.description; the
// vendor's Go SDK builds its toolbox client the same way, in createToolboxClient). The fake
// runs the two on two loopback servers, so that a toolbox call sent to the API's origin, or
// one that leaves out the sandbox id, is refused as the proxy refuses it, and fails the test.
//
// Error bodies take the shape of the part that answers: the API's exception filter
// ({path, timestamp, statusCode, error, message}), the proxy's and the daemon's error
// middleware ({statusCode, message, code, timestamp, path, method}), a handler's own
// {"error": …}, or nothing at all where the daemon aborts with a bare status.

// serveAPI is the control plane's origin: everything under /api.
func (f *fakeDaytona) serveAPI(w http.ResponseWriter, r *http.Request) {
	rest, ok := strings.CutPrefix(r.URL.Path, "/api/")
	if !ok {
		f.t.Errorf("fake Daytona: %s %s: the API serves nothing outside /api (a toolbox call belongs on the sandbox's toolboxProxyUrl)", r.Method, r.URL)
		controlError(w, r, http.StatusNotFound, "Cannot "+r.Method+" "+r.URL.Path)
		return
	}
	f.serve(w, r, f.api, "/"+rest, "")
}

// serveProxy is the toolbox proxy's origin: /toolbox/{sandboxId}/{toolbox path}, as the
// proxy's parseToolboxSubpath reads it.
func (f *fakeDaytona) serveProxy(w http.ResponseWriter, r *http.Request) {
	p, ok := strings.CutPrefix(r.URL.Path, "/toolbox/")
	id, rest, ok2 := strings.Cut(p, "/")
	if !ok || !ok2 || id == "" {
		f.t.Errorf("fake Daytona: %s %s: the proxy takes only /toolbox/{sandboxId}/{path}", r.Method, r.URL)
		proxyError(w, r, http.StatusNotFound, "NOT_FOUND", "not found")
		return
	}
	// A toolbox request in progress is activity, as an open PTY socket is.
	f.mu.Lock()
	b := f.boxes[id]
	if b != nil {
		b.active = time.Now()
		b.conns++
	}
	f.mu.Unlock()
	if b != nil {
		defer func() {
			f.mu.Lock()
			b.conns--
			b.active = time.Now()
			f.mu.Unlock()
		}()
	}
	f.serve(w, r, f.tb, "/"+rest, id)
}

// serve checks the request against the document of its API, then serves it and checks the
// answer against the document too. sbID is the sandbox of a toolbox request ("" for the API).
func (f *fakeDaytona) serve(w http.ResponseWriter, r *http.Request, router routers.Router, rest, sbID string) {
	body, err := io.ReadAll(r.Body)
	r.Body.Close()
	if err != nil {
		// The client went away mid-request (a cancelled call): the service sees a broken
		// connection, not a malformed request, and nothing happens.
		return
	}
	vr := r.Clone(r.Context())
	vr.URL = &url.URL{Scheme: "http", Host: r.Host, Path: rest, RawQuery: r.URL.RawQuery}
	vr.RequestURI = ""
	vr.Body = io.NopCloser(bytes.NewReader(body))
	route, params, err := router.FindRoute(vr)
	if err != nil {
		f.fail(w, r, err)
		return
	}
	// A multipart body (the helper upload, megabytes) is checked against the document's
	// schema here, part by part: kin-openapi's decoder takes seconds per upload under -race.
	multi := strings.HasPrefix(r.Header.Get("Content-Type"), "multipart/form-data")
	in := &openapi3filter.RequestValidationInput{Request: vr, PathParams: params, Route: route,
		Options: &openapi3filter.Options{AuthenticationFunc: openapi3filter.NoopAuthenticationFunc, MultiError: true,
			ExcludeRequestBody: multi}}
	if err := openapi3filter.ValidateRequest(r.Context(), in); err != nil {
		f.fail(w, r, err)
		return
	}
	if multi {
		if err := multipartMatches(route, r.Header.Get("Content-Type"), body); err != nil {
			f.fail(w, r, err)
			return
		}
	}
	if err := unknownProperties(route, body, r.Header.Get("Content-Type")); err != nil {
		f.fail(w, r, err)
		return
	}
	// Both origins take the key as a bearer token (the API's bearer security scheme; the
	// proxy's Authenticate, fed by the SDK's Authorization default header on its toolbox
	// client). With an API key the organisation is the key's: X-Daytona-Organization-ID is
	// read only with a JWT (the API's jwt.strategy), so the fake ignores it.
	if r.Header.Get("Authorization") != "Bearer "+f.key {
		f.unauthorized(w, r, sbID != "")
		return
	}
	op := route.Operation.OperationID
	f.mu.Lock()
	f.ops[op]++
	if st := f.inject[op]; len(st) > 0 {
		f.inject[op] = st[1:]
		f.mu.Unlock()
		if sbID != "" {
			daemonError(w, r, st[0], "injected "+http.StatusText(st[0]))
		} else {
			controlError(w, r, st[0], "injected "+http.StatusText(st[0]))
		}
		return
	}
	f.mu.Unlock()
	r.Body = io.NopCloser(bytes.NewReader(body))
	// An upgraded connection has no answer to check; every other answer is recorded.
	var rec *answer
	if !strings.EqualFold(r.Header.Get("Upgrade"), "websocket") {
		rec = &answer{ResponseWriter: w}
		w = rec
	}
	if sbID != "" {
		f.toolbox(w, r, op, sbID, params, body)
	} else {
		f.control(w, r, op, params, body)
	}
	if rec != nil {
		if err := checkAnswer(r, in, rec); err != nil {
			f.t.Errorf("fake Daytona: its answer to %s %s does not match the OpenAPI document: %v", r.Method, r.URL, err)
		}
	}
}

// fail reports a request that the real service would reject as malformed.
func (f *fakeDaytona) fail(w http.ResponseWriter, r *http.Request, err error) {
	f.t.Errorf("fake Daytona: %s %s does not match the OpenAPI document: %v", r.Method, r.URL, err)
	controlError(w, r, http.StatusBadRequest, err.Error())
}

// unauthorized answers a request without the key, in the shape of the origin that refuses it.
func (f *fakeDaytona) unauthorized(w http.ResponseWriter, r *http.Request, toolbox bool) {
	if toolbox {
		msg := "authentication failed: Bearer token is invalid"
		if !strings.HasPrefix(r.Header.Get("Authorization"), "Bearer ") {
			msg = "missing authentication: provide a preview access token (via header, query parameter, or cookie) or use an API key or JWT"
		}
		proxyError(w, r, http.StatusUnauthorized, "UNAUTHORIZED", msg)
		return
	}
	controlError(w, r, http.StatusUnauthorized, "Unauthorized")
}

// answer records the status and body of an answer while passing them on.
type answer struct {
	http.ResponseWriter
	status int
	body   bytes.Buffer
}

func (a *answer) WriteHeader(status int) {
	if a.status == 0 {
		a.status = status
	}
	a.ResponseWriter.WriteHeader(status)
}

func (a *answer) Write(p []byte) (int, error) {
	if a.status == 0 {
		a.status = http.StatusOK
	}
	a.body.Write(p)
	return a.ResponseWriter.Write(p)
}

// nullsSent are the operations whose answers the daemon writes with null for what it does not
// know (Go structs without omitempty) where the document declares the field non-nullable;
// the vendor's generated client decodes those nulls as absent, and so does the check.
var nullsSent = map[string]bool{
	"SessionExecuteCommand": true, // session.SessionExecuteResponse: output, stdout, stderr, exitCode
}

// checkAnswer checks a 2xx answer against the operation's response in the document: its
// status, content type and, for JSON, its body (required fields, types, enums; a field the
// document does not make nullable is never null). Error answers are not checked against the
// document: its error schemas (a map of strings) are not what the daemon sends.
func checkAnswer(r *http.Request, in *openapi3filter.RequestValidationInput, a *answer) error {
	status := a.status
	if status == 0 {
		status = http.StatusOK
	}
	if status/100 != 2 {
		return nil
	}
	ct := a.Header().Get("Content-Type")
	jsonBody := strings.HasPrefix(ct, "application/json")
	body := a.body.Bytes()
	if jsonBody && nullsSent[in.Route.Operation.OperationID] {
		var m map[string]any
		if err := json.Unmarshal(body, &m); err != nil {
			return err
		}
		for k, v := range m {
			if v == nil {
				delete(m, k)
			}
		}
		body, _ = json.Marshal(m)
	}
	out := &openapi3filter.ResponseValidationInput{RequestValidationInput: in, Status: status, Header: a.Header(),
		Body: io.NopCloser(bytes.NewReader(body)),
		Options: &openapi3filter.Options{MultiError: true, IncludeResponseStatus: true,
			ExcludeResponseBody: !jsonBody || a.body.Len() == 0}}
	// The document renders gin.H (a handler's map of strings, {"message": …}) as a map of
	// objects, which no answer of the daemon is: such a body is held to its content type only.
	if resp := in.Route.Operation.Responses.Status(status); resp != nil && resp.Value != nil {
		if mt := resp.Value.Content.Get(ct); mt != nil && mt.Schema != nil && mt.Schema.Ref == "#/components/schemas/gin.H" {
			out.Options.ExcludeResponseBody = true
		}
	}
	if err := openapi3filter.ValidateResponse(r.Context(), out); err != nil {
		return err
	}
	// A body that is not JSON (a file, a plain log) is held to its declared content type.
	if a.body.Len() > 0 && !jsonBody {
		resp := in.Route.Operation.Responses.Status(status)
		if resp == nil || resp.Value == nil || resp.Value.Content.Get(ct) == nil {
			return fmt.Errorf("status %d with content type %q is not in the document", status, ct)
		}
	}
	return nil
}

// unknownProperties reports JSON body properties the operation's schema does not declare.
// Neither the API (a ValidationPipe without whitelist) nor the daemon (gin's ShouldBindJSON)
// refuses them: they are dropped without a word, so a property the vendor's client would
// never send is a backend bug that the real service would hide.
func unknownProperties(route *routers.Route, body []byte, ctype string) error {
	rb := route.Operation.RequestBody
	if rb == nil || rb.Value == nil || !strings.HasPrefix(ctype, "application/json") {
		return nil
	}
	mt := rb.Value.Content.Get("application/json")
	if mt == nil || mt.Schema == nil || mt.Schema.Value == nil || len(mt.Schema.Value.Properties) == 0 {
		return nil
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(body, &m); err != nil {
		return err
	}
	for k := range m {
		if _, ok := mt.Schema.Value.Properties[k]; !ok {
			return fmt.Errorf("property %q is not in the schema (the service would ignore it)", k)
		}
	}
	return nil
}

// multipartMatches checks a multipart body against the operation's multipart/form-data
// schema: every required property is a part, and no part is undeclared.
func multipartMatches(route *routers.Route, ctype string, body []byte) error {
	rb := route.Operation.RequestBody
	if rb == nil || rb.Value == nil {
		return fmt.Errorf("the operation takes no body")
	}
	mt := rb.Value.Content.Get("multipart/form-data")
	if mt == nil || mt.Schema == nil || mt.Schema.Value == nil {
		return fmt.Errorf("the operation takes no multipart/form-data body")
	}
	_, params, err := mime.ParseMediaType(ctype)
	if err != nil {
		return err
	}
	mr := multipart.NewReader(bytes.NewReader(body), params["boundary"])
	seen := map[string]bool{}
	for {
		p, err := mr.NextPart()
		if err == io.EOF {
			break
		}
		if err != nil {
			return fmt.Errorf("malformed multipart body: %v", err)
		}
		if _, ok := mt.Schema.Value.Properties[p.FormName()]; !ok {
			return fmt.Errorf("part %q is not in the schema", p.FormName())
		}
		seen[p.FormName()] = true
	}
	for _, req := range mt.Schema.Value.Required {
		if !seen[req] {
			return fmt.Errorf("required part %q is missing", req)
		}
	}
	return nil
}

// Answers --------------------------------------------------------------------------------

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(v)
}

// controlError is an error from the control plane (its AllExceptionsFilter).
func controlError(w http.ResponseWriter, r *http.Request, status int, msg string) {
	writeJSON(w, status, map[string]any{"path": r.URL.RequestURI(), "timestamp": time.Now().UTC().Format(time.RFC3339Nano),
		"statusCode": status, "error": http.StatusText(status), "message": msg})
}

func conflict(w http.ResponseWriter, r *http.Request, msg string) {
	controlError(w, r, http.StatusConflict, msg)
}

func notFound(w http.ResponseWriter, r *http.Request, what string) {
	controlError(w, r, http.StatusNotFound, what+" not found")
}

// errorCodes are the codes common-go's error middleware gives its error types.
var errorCodes = map[int]string{
	http.StatusBadRequest: "BAD_REQUEST", http.StatusUnauthorized: "UNAUTHORIZED", http.StatusForbidden: "FORBIDDEN",
	http.StatusNotFound: "NOT_FOUND", http.StatusRequestTimeout: "REQUEST_TIMEOUT", http.StatusConflict: "CONFLICT",
	http.StatusGone: "GONE", http.StatusInternalServerError: "INTERNAL_SERVER_ERROR",
}

// proxyError is an error from the toolbox proxy or, through the same middleware, from the
// daemon (a handler's c.Error(common_errors.New…Error(…))).
func proxyError(w http.ResponseWriter, r *http.Request, status int, code, msg string) {
	writeJSON(w, status, map[string]any{"statusCode": status, "message": msg, "code": code,
		"timestamp": time.Now().UTC().Format(time.RFC3339Nano), "path": r.URL.Path, "method": r.Method})
}

// daemonError is a daemon handler's typed error, as its error middleware writes it.
func daemonError(w http.ResponseWriter, r *http.Request, status int, msg string) {
	code := errorCodes[status]
	if code == "" {
		code = strings.ToUpper(strings.ReplaceAll(http.StatusText(status), " ", "_"))
	}
	proxyError(w, r, status, code, msg)
}

// daemonAbort is a daemon handler's c.AbortWithError(status, …): the status is written at
// once, so the error middleware adds no body.
func daemonAbort(w http.ResponseWriter, status int) {
	w.WriteHeader(status)
}

// ginError is a daemon handler's own c.JSON(status, gin.H{"error": …}).
func ginError(w http.ResponseWriter, status int, msg string) {
	writeJSON(w, status, map[string]any{"error": msg})
}

// The daemon's versioned behaviour ----------------------------------------------------------

// sdkVersion is the client version a toolbox request declares: its X-Daytona-SDK-Version
// header, else a WebSocket subprotocol X-Daytona-SDK-Version~<version> (the daemon's
// util.ExtractSdkVersionFromHeader). Every vendor SDK sends the header on each request.
func sdkVersion(h http.Header) string {
	if v := h.Get("X-Daytona-SDK-Version"); v != "" {
		return v
	}
	for _, p := range strings.Split(h.Get("Sec-WebSocket-Protocol"), ",") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(p), "X-Daytona-SDK-Version~"); ok {
			return v
		}
	}
	return ""
}

// versionBefore reports whether version v (X.Y.Z with an optional suffix) comes before
// major.minor.0's first pre-release; ok is false when v is no version.
func versionBefore(v string, major, minor int) (before, ok bool) {
	v = strings.TrimPrefix(v, "v")
	if i := strings.IndexAny(v, "-+"); i >= 0 {
		v = v[:i]
	}
	parts := strings.Split(v, ".")
	if len(parts) != 3 {
		return false, false
	}
	var n [3]int
	for i, p := range parts {
		x, err := strconv.Atoi(p)
		if err != nil {
			return false, false
		}
		n[i] = x
	}
	if n[0] != major {
		return n[0] < major, true
	}
	return n[1] < minor, true
}

// splitOutput reports whether a session command's log keeps its stream labels (0x01 0x01 0x01
// before each stdout line, 0x02 0x02 0x02 before each stderr line) for a request with these
// headers. The daemon strips them ("combined output", session.IsCombinedOutput) for a client
// that declares no version, unless it sends X-Daytona-Split-Output: true, and for one older
// than 0.27.0.
func splitOutput(h http.Header) bool {
	v := sdkVersion(h)
	if v == "" {
		return h.Get("X-Daytona-Split-Output") == "true"
	}
	if strings.Contains(v, "dev") {
		return true
	}
	before, ok := versionBefore(v, 0, 27)
	return !ok || !before
}

// serverDemux reports whether the daemon also splits a log into stdout and stderr itself,
// answering a plain GET of it with JSON (the negation of session.SkipServerDemux): for
// clients from 0.167.0 on.
func serverDemux(h http.Header) bool {
	v := sdkVersion(h)
	if v == "" {
		return false
	}
	if strings.Contains(v, "dev") {
		return true
	}
	before, ok := versionBefore(v, 0, 167)
	return ok && !before
}

// stripLabels removes the stream labels from a log (the daemon's combined output).
func stripLabels(b []byte) []byte {
	return bytes.ReplaceAll(bytes.ReplaceAll(b, prefixOut, nil), prefixErr, nil)
}

// demuxLog splits a labelled log into its streams (the daemon's DemuxLogBytes).
func demuxLog(b []byte) (stdout, stderr []byte) {
	var cur *[]byte
	for len(b) > 0 {
		switch {
		case bytes.HasPrefix(b, prefixOut):
			cur, b = &stdout, b[3:]
		case bytes.HasPrefix(b, prefixErr):
			cur, b = &stderr, b[3:]
		default:
			if cur != nil {
				*cur = append(*cur, b[0])
			}
			b = b[1:]
		}
	}
	return stdout, stderr
}
