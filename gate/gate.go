package gate

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/hermes-sandbox/hermes-sandbox/audit"
	"github.com/hermes-sandbox/hermes-sandbox/config"
	"github.com/hermes-sandbox/hermes-sandbox/policy"
	"github.com/hermes-sandbox/hermes-sandbox/sandbox"
)

// Options configure the gate.
type Options struct {
	Classifier *policy.Classifier
	Mode       config.ApprovalMode
	// Timeout bounds how long a person may take to answer (approvals.timeout); silence denies.
	Timeout time.Duration
	// Allowlist holds finding descriptions that need no approval (approvals.command_allowlist).
	Allowlist []string
	// SaveAlways persists an "always" answer: it adds every description to
	// approvals.command_allowlist as it is now (read under a lock, not from a snapshot).
	SaveAlways func(descriptions []string) error
	Tools      config.ToolsConfig
	// MaxToolCalls caps the calls in one session (loop.max_tool_calls); 0 = unlimited.
	MaxToolCalls int
	// Audit receives one record per attempted call, refused ones included; nil = none.
	Audit audit.Sink
	// Store keeps per-session approvals and call counts across processes; nil = memory only.
	Store *Store
	// RedactOutput, if set, is applied to output returned to the caller (results and job
	// output), so known secret values never reach the agent.
	RedactOutput func(string) string
	Logger       *slog.Logger
	// Sessions, if set, supplies the inner sessions in place of the inner backend's Open (a
	// session owner's warm ones); a gated session gives its inner one back on Close.
	Sessions SessionSource
}

// SessionSource lends inner sessions: Release takes back what Open gave.
type SessionSource interface {
	Open(ctx context.Context, name string) (sandbox.Session, error)
	Release(sandbox.Session)
}

// Wrap returns a backend whose sessions pass every call through the gate.
func Wrap(b sandbox.Backend, opts Options) sandbox.Backend {
	if opts.Classifier == nil {
		opts.Classifier = policy.New(policy.Options{})
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	return &Backend{inner: b, opts: opts, allow: slices.Clone(opts.Allowlist), host: b.Capabilities().Host}
}

// Backend is a gated backend.
type Backend struct {
	inner sandbox.Backend
	opts  Options
	host  bool // the inner backend's Capabilities().Host, read once

	mu    sync.Mutex
	allow []string // guarded by mu; grows with "always" answers
}

// Name returns the inner backend's name.
func (b *Backend) Name() string { return b.inner.Name() }

// Capabilities returns the inner backend's capabilities.
func (b *Backend) Capabilities() sandbox.Capabilities { return b.inner.Capabilities() }

// Close closes the inner backend.
func (b *Backend) Close() error { return b.inner.Close() }

// Open opens a gated session. A session store that cannot be read does not stop the open,
// but every call on the session is then refused with the file to repair.
func (b *Backend) Open(ctx context.Context, name string) (sandbox.Session, error) {
	open := b.inner.Open
	if b.opts.Sessions != nil {
		open = b.opts.Sessions.Open
	}
	s, err := open(ctx, name)
	if err != nil {
		return nil, err
	}
	gs := &Session{b: b, inner: s, approved: map[string]bool{}}
	if b.opts.Store != nil {
		st, err := b.opts.Store.load(b.inner.Name(), name)
		gs.storeErr = err
		gs.absorb(st)
	}
	return gs, nil
}

// Sessions passes through to the inner backend.
func (b *Backend) Sessions(ctx context.Context) ([]sandbox.SessionInfo, error) {
	m, ok := b.inner.(sandbox.SessionManager)
	if !ok {
		return nil, fmt.Errorf("%s: list sessions: %w", b.inner.Name(), sandbox.ErrUnsupported)
	}
	return m.Sessions(ctx)
}

// Remove passes through to the inner backend and forgets the session's approvals.
func (b *Backend) Remove(ctx context.Context, name string) error {
	m, ok := b.inner.(sandbox.SessionManager)
	if !ok {
		return fmt.Errorf("%s: remove session: %w", b.inner.Name(), sandbox.ErrUnsupported)
	}
	err := m.Remove(ctx, name)
	if b.opts.Store != nil {
		b.opts.Store.forget(b.inner.Name(), name)
	}
	return err
}

// Recreate passes through to the inner backend (see sandbox.Recreator).
func (b *Backend) Recreate(ctx context.Context, name string) error {
	r, ok := b.inner.(sandbox.Recreator)
	if !ok {
		return fmt.Errorf("%s: recreate session: %w (its sessions never keep a sandbox made from older settings)", b.inner.Name(), sandbox.ErrUnsupported)
	}
	return r.Recreate(ctx, name)
}

// Warnings passes through the inner backend's warnings.
func (b *Backend) Warnings() []string {
	if w, ok := b.inner.(sandbox.Warner); ok {
		return w.Warnings()
	}
	return nil
}

// Egress passes through what the inner backend enforces about egress; a backend that does
// not say enforces nothing.
func (b *Backend) Egress() sandbox.EgressReport {
	if r, ok := b.inner.(sandbox.EgressReporter); ok {
		return r.Egress()
	}
	return sandbox.EgressReport{Status: sandbox.EgressNotAvailable,
		Detail: "not available: " + b.inner.Name() + " cannot filter outbound connections; commands reach whatever its host reaches"}
}

// Redact hides known secrets in text (Options.RedactOutput), for output that leaves by
// another way than a result: progress messages, for one.
func (b *Backend) Redact(text string) string {
	if b.opts.RedactOutput == nil {
		return text
	}
	return b.opts.RedactOutput(text)
}

// Confinement passes through the inner backend's kernel confinement, if it has one.
func (b *Backend) Confinement() (bool, string) {
	if c, ok := b.inner.(Confiner); ok {
		return c.Confinement()
	}
	return false, ""
}

// PoolStats passes through the inner backend's warm pool (zero: it keeps none).
func (b *Backend) PoolStats(ctx context.Context) (sandbox.PoolStats, error) {
	if p, ok := b.inner.(sandbox.PoolReporter); ok {
		return p.PoolStats(ctx)
	}
	return sandbox.PoolStats{}, nil
}

func (b *Backend) allowlisted(desc string) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return slices.Contains(b.allow, desc)
}

func (b *Backend) addAllow(descs []string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, d := range descs {
		if !slices.Contains(b.allow, d) {
			b.allow = append(b.allow, d)
		}
	}
}

// Session is a gated session.
type Session struct {
	b     *Backend
	inner sandbox.Session

	mu       sync.Mutex
	calls    int             // guarded by mu
	approved map[string]bool // guarded by mu; finding descriptions approved for this session
	storeErr error           // guarded by mu; the store could not be read or written: refuse everything
	basePath string          // guarded by mu; the session's PATH when first seen
	workDir  string          // guarded by mu; the session's directory when first seen
}

// absorb takes the stored record's count and approvals.
func (s *Session) absorb(st storedSession) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.calls = st.Calls
	for _, d := range st.Approved {
		s.approved[d] = true
	}
	if st.BasePath != "" || st.WorkDir != "" {
		s.basePath, s.workDir = st.BasePath, st.WorkDir
	}
}

func (s *Session) setStoreErr(err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.storeErr == nil {
		s.storeErr = err
	}
}

// Name returns the session name.
func (s *Session) Name() string { return s.inner.Name() }

// Close closes the inner session.
func (s *Session) Close() error {
	if src := s.b.opts.Sessions; src != nil {
		src.Release(s.inner)
		return nil
	}
	return s.inner.Close()
}

// RemainingCalls reports the tool calls left (-1 = unlimited).
func (s *Session) RemainingCalls() int {
	if s.b.opts.MaxToolCalls <= 0 {
		return -1
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return max(0, s.b.opts.MaxToolCalls-s.calls)
}

// call is one attempted tool call on its way through the gate.
type call struct {
	tool     string // audit tool name
	label    string // human name for errors
	command  string // what is shown, classified and recorded
	classify string // shell text to classify ("" = command)
	plain    bool   // classify without the session's state (job management)
	dir      string // the command's own Dir
	env      map[string]string
	// script, when set, is file content written with an executable name or mode: it is
	// classified as the program it would be.
	script     []byte
	scriptName string
	switches   []toolSwitch
	// code says tools.code_execution applies when the analysis finds an interpreter, and
	// tools.file_write when it finds a file written.
	code     bool
	start    time.Time
	rec      audit.Record
	intent   int64  // seq of the intent record, once written
	admitted bool   // the call went on to the backend
	warning  string // why the call runs unrecorded (audit.on_failure warn)
	// newSession and snapshot, for a branching call, go into its records (branch.go).
	newSession, snapshot string
}

type toolSwitch struct {
	on   bool
	name string
}

// analyze classifies a call in the session's state, and its script content if it has one.
func (s *Session) analyze(ctx context.Context, c *call) policy.Analysis {
	text := c.classify
	if text == "" {
		text = c.command
	}
	cl := s.b.opts.Classifier
	if c.plain {
		return cl.Classify(text)
	}
	sc := s.sessionContext(ctx, c.dir, c.env)
	a := cl.ClassifyIn(sc, text)
	if c.script != nil {
		a = merge(a, cl.ClassifyScript(sc, c.scriptName, c.script))
	}
	return a
}

// merge joins two analyses of one call: the strongest verdict wins, findings are kept once.
func merge(a, b policy.Analysis) policy.Analysis {
	for _, f := range b.Findings {
		if !slices.ContainsFunc(a.Findings, func(g policy.Finding) bool { return g.Rule == f.Rule }) {
			a.Findings = append(a.Findings, f)
		}
	}
	if b.Verdict.AtLeast(a.Verdict) {
		a.Verdict = b.Verdict
	}
	a.Notes = append(a.Notes, b.Notes...)
	a.Runs = append(a.Runs, b.Runs...)
	return a
}

// admit decides on the call and, when it may go, records its intent before the backend is
// touched. A nil error means go. A call whose intent cannot be recorded does not run, unless
// audit.on_failure is warn.
func (s *Session) admit(ctx context.Context, c *call) error {
	if err := s.decide(ctx, c); err != nil {
		return err
	}
	c.admitted = true
	if s.b.opts.Audit == nil {
		return nil
	}
	seq, err := s.b.opts.Audit.Intent(context.WithoutCancel(ctx), c.rec)
	var ie *audit.IntentError
	switch {
	case err == nil:
		c.intent = seq
	case errors.As(err, &ie) && ie.Warn:
		c.warning = "hermes-sandbox: WARNING: this call runs unrecorded (audit.on_failure is warn): " + err.Error()
		s.b.opts.Logger.Error(c.warning)
	default:
		c.admitted = false
		return &RefusedError{Tool: c.label, Command: c.command, Reason: "audit-failed",
			Hint: err.Error() + "; fix the log, or set audit.on_failure warn to run calls unrecorded"}
	}
	return nil
}

// decide runs the switches, the cap, the classifier and the approval. A nil error means go.
func (s *Session) decide(ctx context.Context, c *call) error {
	c.start = time.Now()
	c.rec = audit.Record{Session: s.inner.Name(), Backend: s.b.inner.Name(), Tool: c.tool, Command: c.command,
		Decision: audit.DecisionAllowed, Approver: "policy", NewSession: c.newSession, Snapshot: c.snapshot}
	if cl := callerFrom(ctx); cl != nil {
		c.rec.Client, c.rec.Transport, c.rec.Key = cl.Client, cl.Transport, cl.Key
	}
	a := s.analyze(ctx, c)
	c.rec.Verdict = string(a.Verdict)
	for _, f := range a.Findings {
		c.rec.Findings = append(c.rec.Findings, audit.Finding{Rule: f.Rule, Description: f.Description})
	}
	refuse := func(e *RefusedError) error {
		e.Tool, e.Command = c.label, c.command
		if e.Notes == nil {
			e.Notes = a.Notes
		}
		c.rec.Decision, c.rec.Reason, c.rec.Error = audit.DecisionRefused, e.Reason, e.Error()
		if e.Reason == "denied" || e.Reason == "timeout" || e.Reason == "no-approver" {
			c.rec.Decision = audit.DecisionDenied
		}
		s.record(ctx, c, nil, e)
		return e
	}
	if err := s.count(); err != nil {
		var ce *CorruptError
		if errors.As(err, &ce) || !errors.Is(err, errCallLimit) {
			return refuse(&RefusedError{Reason: "store", Hint: err.Error()})
		}
		return refuse(&RefusedError{Reason: "call-limit",
			Hint: fmt.Sprintf("the limit is %d; start a new session or raise loop.max_tool_calls", s.b.opts.MaxToolCalls)})
	}
	switches := c.switches
	if c.code && (slices.ContainsFunc(a.Runs, policy.IsInterpreter) || len(a.Programs) > 0) {
		switches = append(slices.Clip(switches), toolSwitch{s.b.opts.Tools.CodeExecution, "code_execution"})
	}
	if c.code && len(a.Writes) > 0 {
		switches = append(slices.Clip(switches), toolSwitch{s.b.opts.Tools.FileWrite, "file_write"})
	}
	for _, sw := range switches {
		if !sw.on {
			return refuse(&RefusedError{Reason: "tool-disabled", Verdict: a.Verdict,
				Hint: fmt.Sprintf("tools.%s is off; an operator can enable it with `hermes-sandbox config set tools.%s true`", sw.name, sw.name)})
		}
	}
	switch a.Verdict {
	case policy.VerdictSafe:
		return nil
	case policy.VerdictHardline:
		return refuse(&RefusedError{Reason: "hardline", Verdict: a.Verdict, Findings: a.Findings,
			Hint: "hardline rules protect the host and this tool's own settings; run it yourself outside the agent if you really mean it"})
	}
	missing := s.uncovered(a.Findings)
	if len(missing) == 0 {
		c.rec.Decision, c.rec.Approver = audit.DecisionAllowed, "allowlist"
		return nil
	}
	hint := allowHint(missing)
	switch s.b.opts.Mode {
	case config.ApprovalOff:
		c.rec.Approver = "mode:off"
		return nil
	case config.ApprovalDeny:
		return refuse(&RefusedError{Reason: "denied", Verdict: a.Verdict, Findings: a.Findings,
			Hint: "approvals.mode is deny; " + hint})
	}
	ap := approverFrom(ctx)
	if ap == nil {
		return refuse(&RefusedError{Reason: "no-approver", Verdict: a.Verdict, Findings: a.Findings,
			Hint: "nobody is at a terminal to approve it; " + hint})
	}
	actx := ctx
	if s.b.opts.Timeout > 0 {
		var cancel context.CancelFunc
		actx, cancel = context.WithTimeout(ctx, s.b.opts.Timeout)
		defer cancel()
	}
	d, err := ap.Approve(actx, Request{Backend: s.b.inner.Name(), Session: s.inner.Name(), Tool: c.label,
		Command: c.command, Verdict: a.Verdict, Findings: a.Findings, Notes: a.Notes})
	if err != nil || d == "" {
		if errors.Is(err, context.DeadlineExceeded) || errors.Is(actx.Err(), context.DeadlineExceeded) {
			return refuse(&RefusedError{Reason: "timeout", Verdict: a.Verdict, Findings: a.Findings, Hint: hint})
		}
		d = Deny
	}
	c.rec.Approver = "user"
	switch d {
	case ApproveOnce:
		c.rec.Decision = audit.DecisionApprovedOnce
	case ApproveSession:
		c.rec.Decision = audit.DecisionApprovedSession
		if err := s.approve(a.Findings); err != nil {
			s.b.opts.Logger.Warn("could not save session approvals", "err", err)
		}
	case ApproveAlways:
		c.rec.Decision = audit.DecisionApprovedAlways
		descs := keys(a.Findings)
		s.b.addAllow(descs)
		if err := s.approve(a.Findings); err != nil {
			s.b.opts.Logger.Warn("could not save session approvals", "err", err)
		}
		if s.b.opts.SaveAlways != nil {
			if err := s.b.opts.SaveAlways(descs); err != nil {
				s.b.opts.Logger.Warn("could not save the allowlist", "err", err)
			}
		}
	default:
		return refuse(&RefusedError{Reason: "denied", Verdict: a.Verdict, Findings: a.Findings, Hint: hint})
	}
	return nil
}

// keys returns the allowlist keys of findings that an allowlist may name.
func keys(fs []policy.Finding) []string {
	var out []string
	for _, f := range fs {
		if allowable(f) && !slices.Contains(out, f.Description) {
			out = append(out, f.Description)
		}
	}
	return out
}

// allowable reports whether an allowlist can cover a finding: not one that says the command
// could not be read as a whole.
func allowable(f policy.Finding) bool {
	switch f.Rule {
	case "unparseable", "too-complex", "internal-error":
		return false
	}
	return f.Verdict != policy.VerdictHardline
}

// allowHint says how an operator can let the call through without a prompt, naming only the
// entries that are missing and would help.
func allowHint(missing []policy.Finding) string {
	var descs []string
	for _, f := range missing {
		if !allowable(f) {
			return "an allowlist cannot cover [" + f.Rule + "]: approve it at a terminal, rewrite the command, or set approvals.mode off"
		}
		descs = append(descs, fmt.Sprintf("%q", f.Description))
	}
	return "to allow it without asking, an operator can add " + strings.Join(descs, ", ") +
		" to approvals.command_allowlist, or set approvals.mode off"
}

var errCallLimit = errors.New("call limit")

// count takes one call from the budget. With a cap, the count is kept in the store under its
// lock, so concurrent processes on one session add up; a store that cannot be read or written
// refuses the call rather than start again from zero.
func (s *Session) count() error {
	s.mu.Lock()
	serr := s.storeErr
	s.mu.Unlock()
	if serr != nil {
		return serr
	}
	limit := s.b.opts.MaxToolCalls
	if limit <= 0 {
		s.mu.Lock()
		s.calls++
		s.mu.Unlock()
		return nil
	}
	calls := 0
	if st := s.b.opts.Store; st != nil {
		saved, err := st.update(s.b.inner.Name(), s.inner.Name(), func(r *storedSession) { r.Calls++ })
		if err != nil {
			s.setStoreErr(err)
			return err
		}
		calls = saved.Calls
		s.mu.Lock()
		s.calls = calls
		s.mu.Unlock()
	} else {
		s.mu.Lock()
		s.calls++
		calls = s.calls
		s.mu.Unlock()
	}
	if calls > limit {
		return errCallLimit
	}
	return nil
}

// uncovered returns the findings that neither the allowlist nor the session's approvals
// cover. The rule is the same for every source and for simple and compound commands alike:
// a command is covered when each finding it raises is, and none says it could not be read.
func (s *Session) uncovered(fs []policy.Finding) []policy.Finding {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []policy.Finding
	for _, f := range fs {
		if !allowable(f) || (!s.approved[f.Description] && !s.b.allowlisted(f.Description)) {
			out = append(out, f)
		}
	}
	return out
}

// approve adds the findings to the session's approvals, in memory and in the store.
func (s *Session) approve(fs []policy.Finding) error {
	descs := keys(fs)
	s.mu.Lock()
	for _, d := range descs {
		s.approved[d] = true
	}
	s.mu.Unlock()
	if s.b.opts.Store == nil {
		return nil
	}
	saved, err := s.b.opts.Store.update(s.b.inner.Name(), s.inner.Name(), func(r *storedSession) {
		r.Approved = append(r.Approved, descs...)
	})
	if err != nil {
		return err
	}
	s.absorb(saved)
	return nil
}

// record writes the result record of a finished call (linked to its intent), or the one
// record of a refused call.
func (s *Session) record(ctx context.Context, c *call, res *sandbox.Result, err error) {
	if s.b.opts.Audit == nil {
		return
	}
	rec := c.rec
	if c.admitted {
		rec = audit.Record{Session: rec.Session, Backend: rec.Backend, Tool: rec.Tool,
			StdoutBytes: rec.StdoutBytes, Error: rec.Error, NewSession: c.newSession, Snapshot: c.snapshot,
			Key: rec.Key}
	}
	rec.SetDuration(time.Since(c.start))
	if res != nil {
		code := res.ExitCode
		rec.ExitCode = &code
		rec.StdoutBytes, rec.StderrBytes = res.StdoutBytes, res.StderrBytes
		rec.Excerpt = excerpt(res.Stdout, res.Stderr)
		if c.warning != "" {
			res.Stderr += "\n" + c.warning + "\n"
		}
	}
	if err != nil && rec.Error == "" {
		rec.Error = err.Error()
	}
	var aerr error
	switch {
	case c.admitted:
		aerr = s.b.opts.Audit.Result(context.WithoutCancel(ctx), c.intent, rec)
	default:
		rec.Type = audit.TypeIntent
		aerr = s.b.opts.Audit.Append(context.WithoutCancel(ctx), rec)
	}
	if aerr != nil {
		s.b.opts.Logger.Error("audit: record not written", "err", aerr)
	}
}

func excerpt(stdout, stderr string) string {
	s := stdout
	if stderr != "" {
		s += "\n[stderr]\n" + stderr
	}
	if len(s) > audit.MaxExcerpt {
		s = s[:audit.MaxExcerpt]
	}
	return s
}
