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

	"mvdan.cc/sh/v3/syntax"

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
	// SaveAlways persists an "always" answer (adds the description to command_allowlist).
	SaveAlways func(description string) error
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
}

// Wrap returns a backend whose sessions pass every call through the gate.
func Wrap(b sandbox.Backend, opts Options) sandbox.Backend {
	if opts.Classifier == nil {
		opts.Classifier = policy.New(policy.Options{})
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	return &Backend{inner: b, opts: opts, allow: slices.Clone(opts.Allowlist)}
}

// Backend is a gated backend.
type Backend struct {
	inner sandbox.Backend
	opts  Options

	mu    sync.Mutex
	allow []string // grows with "always" answers
}

// Name returns the inner backend's name.
func (b *Backend) Name() string { return b.inner.Name() }

// Capabilities returns the inner backend's capabilities.
func (b *Backend) Capabilities() sandbox.Capabilities { return b.inner.Capabilities() }

// Close closes the inner backend.
func (b *Backend) Close() error { return b.inner.Close() }

// Open opens a gated session.
func (b *Backend) Open(ctx context.Context, name string) (sandbox.Session, error) {
	s, err := b.inner.Open(ctx, name)
	if err != nil {
		return nil, err
	}
	gs := &Session{b: b, inner: s, approved: map[string]bool{}}
	if b.opts.Store != nil {
		st := b.opts.Store.load(b.inner.Name(), name)
		gs.calls = st.Calls
		for _, d := range st.Approved {
			gs.approved[d] = true
		}
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

// Warnings passes through the inner backend's warnings.
func (b *Backend) Warnings() []string {
	if w, ok := b.inner.(sandbox.Warner); ok {
		return w.Warnings()
	}
	return nil
}

func (b *Backend) allowlisted(desc string) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return slices.Contains(b.allow, desc)
}

func (b *Backend) addAllow(desc string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if !slices.Contains(b.allow, desc) {
		b.allow = append(b.allow, desc)
	}
}

// Session is a gated session.
type Session struct {
	b     *Backend
	inner sandbox.Session

	mu       sync.Mutex
	calls    int
	approved map[string]bool // finding descriptions approved for this session
}

// Name returns the session name.
func (s *Session) Name() string { return s.inner.Name() }

// Close closes the inner session.
func (s *Session) Close() error { return s.inner.Close() }

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
	switches []toolSwitch
	start    time.Time
	rec      audit.Record
	intent   int64  // seq of the intent record, once written
	admitted bool   // the call went on to the backend
	warning  string // why the call runs unrecorded (audit.on_failure warn)
}

type toolSwitch struct {
	on   bool
	name string
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
		Verdict: string(policy.VerdictSafe), Decision: audit.DecisionAllowed, Approver: "policy"}
	refuse := func(e *RefusedError) error {
		e.Tool, e.Command = c.label, c.command
		c.rec.Decision, c.rec.Reason, c.rec.Error = audit.DecisionRefused, e.Reason, e.Error()
		if e.Reason == "denied" || e.Reason == "timeout" || e.Reason == "no-approver" {
			c.rec.Decision = audit.DecisionDenied
		}
		s.record(ctx, c, nil, e)
		return e
	}
	if err := s.count(); err != nil {
		return refuse(&RefusedError{Reason: "call-limit",
			Hint: fmt.Sprintf("the limit is %d; start a new session or raise loop.max_tool_calls", s.b.opts.MaxToolCalls)})
	}
	for _, sw := range c.switches {
		if !sw.on {
			return refuse(&RefusedError{Reason: "tool-disabled",
				Hint: fmt.Sprintf("an operator can enable it with `hermes-sandbox config set tools.%s true`", sw.name)})
		}
	}
	text := c.classify
	if text == "" {
		text = c.command
	}
	a := s.b.opts.Classifier.Classify(text)
	c.rec.Verdict = string(a.Verdict)
	for _, f := range a.Findings {
		c.rec.Findings = append(c.rec.Findings, audit.Finding{Rule: f.Rule, Description: f.Description})
	}
	switch a.Verdict {
	case policy.VerdictSafe:
		return nil
	case policy.VerdictHardline:
		return refuse(&RefusedError{Reason: "hardline", Verdict: a.Verdict, Findings: a.Findings,
			Hint: "hardline rules protect the host and this tool's own settings; run it yourself outside the agent if you really mean it"})
	}
	hint := allowHint(a.Findings)
	if s.covered(a.Findings) && !compound(text) {
		c.rec.Decision, c.rec.Approver = audit.DecisionAllowed, "allowlist"
		return nil
	}
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
		Command: c.command, Verdict: a.Verdict, Findings: a.Findings})
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
		s.approve(a.Findings)
	case ApproveAlways:
		c.rec.Decision = audit.DecisionApprovedAlways
		for _, f := range a.Findings {
			s.b.addAllow(f.Description)
			if s.b.opts.SaveAlways != nil {
				if err := s.b.opts.SaveAlways(f.Description); err != nil {
					s.b.opts.Logger.Warn("could not save the allowlist", "err", err)
				}
			}
		}
	default:
		return refuse(&RefusedError{Reason: "denied", Verdict: a.Verdict, Findings: a.Findings, Hint: hint})
	}
	return nil
}

func allowHint(fs []policy.Finding) string {
	var descs []string
	for _, f := range fs {
		descs = append(descs, fmt.Sprintf("%q", f.Description))
	}
	return "to allow it without asking, an operator can add " + strings.Join(descs, ", ") +
		" to approvals.command_allowlist, or set approvals.mode off"
}

// count takes one call from the budget.
func (s *Session) count() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	limited := s.b.opts.MaxToolCalls > 0
	s.calls++
	if limited {
		// Only a cap makes the count worth a write per call.
		s.save()
	}
	if limited && s.calls > s.b.opts.MaxToolCalls {
		return errors.New("call limit")
	}
	return nil
}

// covered reports whether every finding is allowlisted or approved for the session.
func (s *Session) covered(fs []policy.Finding) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, f := range fs {
		if !s.approved[f.Description] && !s.b.allowlisted(f.Description) {
			return false
		}
	}
	return len(fs) > 0
}

func (s *Session) approve(fs []policy.Finding) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, f := range fs {
		s.approved[f.Description] = true
	}
	s.save()
}

// save persists approvals and the call count; s.mu is held.
func (s *Session) save() {
	if s.b.opts.Store == nil {
		return
	}
	st := storedSession{Calls: s.calls}
	for d := range s.approved {
		st.Approved = append(st.Approved, d)
	}
	slices.Sort(st.Approved)
	if err := s.b.opts.Store.save(s.b.inner.Name(), s.inner.Name(), st); err != nil {
		s.b.opts.Logger.Warn("could not save session approvals", "err", err)
	}
}

// compound reports whether a shell text holds more than one simple command, so an allowlist
// shortcut for one part cannot carry another along.
func compound(text string) bool {
	f, err := syntax.NewParser().Parse(strings.NewReader(text), "")
	if err != nil {
		return true
	}
	n := 0
	syntax.Walk(f, func(node syntax.Node) bool {
		switch node.(type) {
		case *syntax.CallExpr, *syntax.BinaryCmd, *syntax.Subshell, *syntax.Block, *syntax.CmdSubst, *syntax.ProcSubst:
			n++
		}
		return n < 2
	})
	return n > 1
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
			StdoutBytes: rec.StdoutBytes, Error: rec.Error}
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
