package cli

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/hermes-sandbox/hermes-sandbox/audit"
	"github.com/hermes-sandbox/hermes-sandbox/config"
	"github.com/hermes-sandbox/hermes-sandbox/gate"
	"github.com/hermes-sandbox/hermes-sandbox/internal/flock"
	"github.com/hermes-sandbox/hermes-sandbox/internal/owner"
	"github.com/hermes-sandbox/hermes-sandbox/policy"
	"github.com/hermes-sandbox/hermes-sandbox/sandbox"
)

// openGuarded builds the backend for this run behind the gate: policy classification,
// approvals, tool switches, the call cap and the audit log. Every command path of the CLI and
// the MCP server goes through it.
func (a *app) openGuarded(ctx context.Context, cfg *config.Config) (sandbox.Backend, error) {
	b, err := a.openBackend(ctx, cfg)
	if err != nil {
		return nil, err
	}
	opts, err := a.gateOptions(cfg, b)
	if err != nil {
		b.Close()
		return nil, err
	}
	if o, ok := b.(sandbox.EgressObserver); ok && (opts.Audit != nil || a.egressTap != nil) {
		var record func(sandbox.EgressEvent)
		if opts.Audit != nil {
			record = egressAuditor(opts.Audit, opts.Logger)
		}
		tap := a.egressTap
		o.ObserveEgress(func(ev sandbox.EgressEvent) {
			if record != nil {
				record(ev)
			}
			tap.send(ev)
		})
	}
	if a.sweepGone {
		a.sweepGoneOwners(ctx, b)
	}
	return gate.Wrap(b, opts), nil
}

// egressTap hands egress decisions to a receiver installed after the backend was built (the
// MCP server's metrics); nil, or with no receiver, it drops them.
type egressTap struct {
	mu sync.Mutex
	fn func(sandbox.EgressEvent) // guarded by mu
}

func (t *egressTap) set(fn func(sandbox.EgressEvent)) {
	t.mu.Lock()
	t.fn = fn
	t.mu.Unlock()
}

func (t *egressTap) send(ev sandbox.EgressEvent) {
	if t == nil {
		return
	}
	t.mu.Lock()
	fn := t.fn
	t.mu.Unlock()
	if fn != nil {
		fn(ev)
	}
}

// sweepGoneOwners removes what processes that are gone left behind on b: the sandboxes of an
// MCP server killed too hard to remove its own (SIGKILL, the OOM killer, a power cut), and
// warm-pool members of processes that are gone. Sandboxes of live processes, kept sessions
// and idle ones stay (that is `hermes-sandbox gc`). A failure is reported, never fatal.
func (a *app) sweepGoneOwners(ctx context.Context, b sandbox.Backend) {
	c, ok := b.(sandbox.Collector)
	if r, records := b.(sandbox.OwnerRecorder); !ok || !records || !r.RecordsOwners() {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	rep, err := c.Collect(ctx, sandbox.GCOptions{OwnerGoneOnly: true})
	for _, it := range rep.Removed {
		fmt.Fprintf(a.stderr, "hermes-sandbox: removed %s %s: %s\n", it.Kind, it.Name, it.Reason)
	}
	if err != nil {
		fmt.Fprintf(a.stderr, "hermes-sandbox: could not sweep the sandboxes of processes that are gone (`hermes-sandbox gc` retries): %v\n", err)
	}
}

// egressReport is what b enforces about egress; a backend that does not say enforces nothing.
func egressReport(b sandbox.Backend) sandbox.EgressReport {
	if r, ok := b.(sandbox.EgressReporter); ok {
		return r.Egress()
	}
	return sandbox.EgressReport{Status: sandbox.EgressNotAvailable,
		Detail: "not available: " + b.Name() + " cannot filter outbound connections; commands reach whatever its host reaches"}
}

// checkSharedEgress refuses to run when terminal.egress_allow is set and the backend would
// not enforce it: running anyway would let the user believe egress is filtered.
func checkSharedEgress(cfg *config.Config, b sandbox.Backend) error {
	if len(cfg.Terminal.EgressAllow) == 0 {
		return nil
	}
	rep := egressReport(b)
	if rep.AppliesShared {
		return nil
	}
	return fmt.Errorf("terminal.egress_allow is set, but the %s backend does not enforce it (egress %s: %s); refusing to run rather than pretend: "+
		"unset terminal.egress_allow (hermes-sandbox config unset terminal.egress_allow), or use a "+
		"backend that enforces it (docker with docker.network allowlist, kubernetes with "+
		"kubernetes.network allowlist): %w",
		b.Name(), rep.Status, rep.Detail, sandbox.ErrInvalidConfig)
}

// egressAuditor writes each egress decision to the audit log as an egress record.
func egressAuditor(sink audit.Sink, log *slog.Logger) func(sandbox.EgressEvent) {
	return func(ev sandbox.EgressEvent) {
		r := audit.Record{Type: audit.TypeEgress, Tool: audit.ToolEgress, Session: ev.Session, Backend: ev.Backend,
			Command: ev.Method + " " + net.JoinHostPort(ev.Host, strconv.Itoa(ev.Port)), Decision: ev.Decision,
			Approver: "egress_allow", Reason: ev.Reason, Error: ev.Error, Host: ev.Host, Port: ev.Port,
			BytesUp: ev.BytesUp, BytesDown: ev.BytesDown}
		if ev.Change != "" {
			// The configuration changed under a live session: its proxy follows it from now on.
			r = audit.Record{Type: audit.TypeEgressPolicy, Tool: audit.ToolEgress, Session: ev.Session, Backend: ev.Backend,
				Command: "egress settings changed in the configuration", Decision: ev.Decision, Approver: "config",
				Reason: ev.Change}
		}
		r.SetDuration(ev.Duration)
		ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
		defer cancel()
		if err := sink.Append(ctx, r); err != nil {
			log.Warn("egress: audit record not written", "host", ev.Host, "err", err)
		}
	}
}

// openSession opens the named session behind the gate, with the terminal approver (if there
// is a terminal) attached to the returned context. done releases everything.
func (a *app) openSession(ctx context.Context, cfg *config.Config, name string) (context.Context, sandbox.Backend, sandbox.Session, func(), error) {
	b, err := a.openGuarded(ctx, cfg)
	if err != nil {
		return ctx, nil, nil, nil, err
	}
	ctx, sess, done, err := a.openApproved(ctx, b, name, func() { b.Close() })
	if err != nil {
		return ctx, nil, nil, nil, err
	}
	return ctx, b, sess, done, nil
}

// openApproved opens session name of the gated backend b, with the caller's approver on the
// returned context. done runs release and closes what was opened, in reverse order; on an
// error, that has already happened.
func (a *app) openApproved(ctx context.Context, b sandbox.Backend, name string, release ...func()) (context.Context, sandbox.Session, func(), error) {
	done := func() {
		for i := len(release) - 1; i >= 0; i-- {
			release[i]()
		}
	}
	if ap, closeTTY := a.approver(); ap != nil {
		release = append(release, closeTTY)
		ctx = gate.WithApprover(ctx, ap)
	}
	stop := a.slowNotice("starting session "+name+" (a cold session's first command creates its sandbox)", time.Second)
	sess, err := b.Open(ctx, name)
	stop()
	if err != nil {
		done()
		return ctx, nil, nil, err
	}
	release = append(release, func() { sess.Close() })
	return ctx, sess, done, nil
}

// gateClassifier builds the gate's classifier, which protects this tool's own files. It opens
// nothing: `policy check` uses it without touching the audit log.
func (a *app) gateClassifier(cfg *config.Config, backend sandbox.Backend) *policy.Classifier {
	auditPath := a.expandHome(cfg.Audit.LogDestination)
	return policy.New(policy.Options{
		ProtectedPaths: a.protectedPaths(cfg, auditPath),
		WorkDir:        workDir(backend),
		Home:           a.getenv("HOME"),
		Host:           backend != nil && backend.Capabilities().Host,
	})
}

// gateOptions derives the gate's settings from the configuration, and refuses a backend
// that would not enforce terminal.egress_allow (checkSharedEgress).
func (a *app) gateOptions(cfg *config.Config, backend sandbox.Backend) (gate.Options, error) {
	if err := checkSharedEgress(cfg, backend); err != nil {
		return gate.Options{}, err
	}
	if err := checkStateDir(cfg.StateDir()); err != nil {
		return gate.Options{}, err
	}
	auditPath := a.expandHome(cfg.Audit.LogDestination)
	opts := gate.Options{
		Logger:       slog.New(slog.NewTextHandler(a.stderr, &slog.HandlerOptions{Level: slog.LevelWarn})),
		Classifier:   a.gateClassifier(cfg, backend),
		Mode:         cfg.Approvals.Mode,
		Timeout:      cfg.Approvals.Timeout,
		Allowlist:    cfg.Approvals.CommandAllowlist,
		Tools:        cfg.Tools,
		MaxToolCalls: cfg.Loop.MaxToolCalls,
		Store:        gate.NewStore(filepath.Join(cfg.StateDir(), "gate")),
		RedactOutput: audit.NewExactRedactor(a.secrets(cfg)),
		SaveAlways:   func(descs []string) error { return a.saveAllowlist(descs) },
	}
	if cfg.Audit.Enabled && cfg.Audit.Level != config.AuditOff {
		opts.Audit = a.openAudit(cfg, auditPath, opts.Logger)
	}
	return opts, nil
}

// saveAllowlist adds descriptions to approvals.command_allowlist as the file holds it now,
// under a lock, so that concurrent "always" answers and several findings all stay.
func (a *app) saveAllowlist(descs []string) error {
	p := a.configPath()
	if p == "" {
		p = config.DefaultPath()
	}
	if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
		return err
	}
	unlock, err := flock.Lock(p + ".lock")
	if err != nil {
		return err
	}
	defer unlock()
	cur, err := config.LoadWith(config.Options{Path: p})
	if err != nil {
		return fmt.Errorf("read the allowlist from %s: %w", p, err)
	}
	list := cur.Approvals.CommandAllowlist
	for _, d := range descs {
		if !slices.Contains(list, d) {
			list = append(list, d)
		}
	}
	quoted := make([]string, len(list))
	for i, d := range list {
		quoted[i] = fmt.Sprintf("%q", d) // a YAML double-quoted scalar
	}
	return config.Set(p, "approvals.command_allowlist", "["+strings.Join(quoted, ", ")+"]")
}

// openAudit opens the audit log and its witness. A log that cannot be opened still gives a
// Sink: it refuses every call (or, with audit.on_failure warn, lets them run unrecorded) with
// an error that names the path and the cause, so no call runs unrecorded by accident.
func (a *app) openAudit(cfg *config.Config, path string, logger *slog.Logger) audit.Sink {
	onFailure := audit.OnFailure(cfg.Audit.OnFailure)
	var witness *audit.Witness
	if cfg.Audit.Witness != config.AuditWitnessNone {
		w, err := audit.NewWitness(string(cfg.Audit.Witness), cfg.Audit.WitnessSocket)
		if err != nil {
			return audit.Unavailable(path, err, onFailure)
		}
		a.closers = append(a.closers, w)
		witness = w
	}
	log, err := audit.Open(path, audit.Options{Level: audit.Level(cfg.Audit.Level), Redact: audit.NewRedactor(a.secrets(cfg)),
		OnFailure: onFailure, Witness: witness, Logger: logger, Sealed: cfg.Audit.Sealed})
	if err != nil {
		return audit.Unavailable(path, fmt.Errorf("%w (the directory %s must be one you can write: fix its ownership or permissions, "+
			"or choose another file with audit.log_destination)", err, filepath.Dir(path)), onFailure)
	}
	a.closers = append(a.closers, log)
	return log
}

// workDir is where routine deletes are fine for the classifier: the directory the backend
// says is the agent's own (sandbox.Workspace). A backend without one has none, and then no
// delete is routine.
func workDir(b sandbox.Backend) string {
	if w, ok := b.(sandbox.Workspace); ok {
		return w.WorkDir()
	}
	return ""
}

// secrets lists the values that must never appear in the audit log: the configured secrets
// and the values of credential variables, not configuration given by environment (an image
// name, a path, "allowlist"), which would blank every record that mentions it.
func (a *app) secrets(cfg *config.Config) []string {
	out := []string{cfg.SSH.Password.Reveal(), cfg.SSH.KeyPassphrase.Reveal(), cfg.Modal.TokenID.Reveal(),
		cfg.Modal.TokenSecret.Reveal(), cfg.Daytona.APIKey.Reveal(), cfg.Vercel.Token.Reveal(), cfg.Vercel.OIDCToken.Reveal()}
	for _, kv := range a.environ {
		if k, v, ok := strings.Cut(kv, "="); ok && len(v) >= 8 && sandbox.LooksCredential(k) {
			out = append(out, v)
		}
	}
	return out
}

func (a *app) expandHome(p string) string {
	if p == "~" || strings.HasPrefix(p, "~/") {
		return filepath.Join(a.getenv("HOME"), p[1:])
	}
	return p
}

// ttyApprover asks the person at the controlling terminal.
type ttyApprover struct {
	in  io.Reader
	out io.Writer
}

// terminalApprover returns an approver on /dev/tty, or nil when there is no terminal (then
// manual mode refuses: silence is never consent).
func terminalApprover() (gate.Approver, func()) {
	tty, err := os.OpenFile("/dev/tty", os.O_RDWR, 0)
	if err != nil {
		return nil, func() {}
	}
	return &ttyApprover{in: tty, out: tty}, func() { tty.Close() }
}

func (t *ttyApprover) Approve(ctx context.Context, req gate.Request) (gate.Decision, error) {
	fmt.Fprint(t.out, approvalPrompt(req))
	answer := make(chan string, 1)
	go func() {
		line, _ := bufio.NewReader(t.in).ReadString('\n')
		answer <- line
	}()
	select {
	case <-ctx.Done():
		fmt.Fprintln(t.out, "\n(no answer in time: denied)")
		return gate.Deny, ctx.Err()
	case s := <-answer:
		return approvalAnswer(s), nil
	}
}

// approvalPrompt is the question put to the person at the terminal.
func approvalPrompt(req gate.Request) string {
	var b strings.Builder
	// Everything that comes from the command or the session goes through gate.Visible: an
	// escape sequence in the command must not repaint what the person reads.
	fmt.Fprintf(&b, "\nhermes-sandbox: approval needed (%s verdict, backend %s, session %s)\n",
		req.Verdict, req.Backend, gate.Visible(req.Session))
	fmt.Fprintf(&b, "  %s: %s\n", req.Tool, strings.ReplaceAll(gate.Visible(req.Command), "\n", "\n    "))
	for _, f := range req.Findings {
		fmt.Fprintf(&b, "  [%s] %s\n", f.Rule, f.Description)
	}
	for _, n := range req.Notes {
		fmt.Fprintf(&b, "  (%s)\n", gate.Visible(n))
	}
	b.WriteString("Allow? [o]nce, [s]ession, [a]lways, [d]eny (default deny): ")
	return b.String()
}

// approvalAnswer reads the line typed; anything unclear denies.
func approvalAnswer(line string) gate.Decision {
	switch strings.ToLower(strings.TrimSpace(line)) {
	case "o", "once", "y", "yes":
		return gate.ApproveOnce
	case "s", "session":
		return gate.ApproveSession
	case "a", "always":
		return gate.ApproveAlways
	}
	return gate.Deny
}

// protectedPaths are the files that steer this tool: its config, secrets, state and audit log,
// and Hermes Agent's .env and config.yaml, which it reads as configuration too.
func (a *app) protectedPaths(cfg *config.Config, auditPath string) []string {
	p := []string{cfg.Path(), cfg.SecretsPath(), filepath.Dir(cfg.Path()), auditPath,
		auditPath + ".checkpoint", auditPath + ".seal", auditPath + ".lock", filepath.Join(cfg.StateDir(), "gate")}
	if d, err := owner.Dir(a.environ); err == nil {
		p = append(p, d) // the session owners' sockets: a planted one would answer for the gate
	}
	if h := config.HermesDir(a.environ); h != "" {
		p = append(p, filepath.Join(h, ".env"), filepath.Join(h, "config.yaml"))
	}
	return p
}

// checkStateDir makes sure the state directory (sessions, the gate's store, owners) can be
// created and written, so that a broken one is reported as such, once, before any command.
func checkStateDir(dir string) error {
	fail := func(err error) error {
		return fmt.Errorf("the state directory %s cannot be used: %w; fix its ownership or permissions "+
			"(or set XDG_STATE_HOME to a directory you can write)", dir, err)
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fail(err)
	}
	f, err := os.CreateTemp(dir, ".probe-*")
	if err != nil {
		return fail(err)
	}
	name := f.Name()
	f.Close()
	if err := os.Remove(name); err != nil {
		return fail(err)
	}
	return nil
}
