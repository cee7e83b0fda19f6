package gate

import (
	"context"
	"fmt"
	"strings"

	"mvdan.cc/sh/v3/syntax"

	"github.com/hermes-sandbox/hermes-sandbox/audit"
	"github.com/hermes-sandbox/hermes-sandbox/sandbox"
)

// commandText is the shell text of a command, for classification and the audit log.
func commandText(cmd sandbox.Command) string {
	if cmd.Script != "" || len(cmd.Argv) == 0 {
		return cmd.Script
	}
	parts := make([]string, len(cmd.Argv))
	for i, a := range cmd.Argv {
		q, err := syntax.Quote(a, syntax.LangBash)
		if err != nil {
			q = fmt.Sprintf("%q", a)
		}
		parts[i] = q
	}
	return strings.Join(parts, " ")
}

// commandCall is the gate's view of a command: classified where it starts (its Dir, else the
// session's directory) with its own variables; tools.code_execution applies when the analysis
// finds an interpreter anywhere in it, wrappers looked through.
func (s *Session) commandCall(tool, label string, cmd sandbox.Command) *call {
	return &call{tool: tool, label: label, command: commandText(cmd), dir: cmd.Dir, env: cmd.Env,
		switches: []toolSwitch{{s.b.opts.Tools.ShellExecute, "shell_execute"}}, code: true}
}

// Exec classifies, approves, runs and records a command.
func (s *Session) Exec(ctx context.Context, cmd sandbox.Command) (*sandbox.Result, error) {
	c := s.commandCall(audit.ToolExec, "command", cmd)
	if err := s.admit(ctx, c); err != nil {
		return nil, err
	}
	res, err := s.inner.Exec(ctx, cmd)
	s.record(ctx, c, res, err)
	if res != nil && s.b.opts.RedactOutput != nil {
		res.Stdout, res.Stderr = s.b.opts.RedactOutput(res.Stdout), s.b.opts.RedactOutput(res.Stderr)
	}
	return res, err
}

// redactJob hides secrets in job output.
func (s *Session) redactJob(o sandbox.JobOutput) sandbox.JobOutput {
	if s.b.opts.RedactOutput != nil {
		o.Stdout, o.Stderr = s.b.opts.RedactOutput(o.Stdout), s.b.opts.RedactOutput(o.Stderr)
	}
	return o
}

func (s *Session) jobs() (sandbox.JobRunner, error) {
	jr, ok := s.inner.(sandbox.JobRunner)
	if !ok {
		return nil, fmt.Errorf("%s: background jobs: %w", s.b.inner.Name(), sandbox.ErrUnsupported)
	}
	return jr, nil
}

// StartJob gates a background job like a command.
func (s *Session) StartJob(ctx context.Context, cmd sandbox.Command) (sandbox.JobStatus, error) {
	jr, err := s.jobs()
	if err != nil {
		return sandbox.JobStatus{}, err
	}
	c := s.commandCall(audit.ToolJobStart, "background command", cmd)
	if err := s.admit(ctx, c); err != nil {
		return sandbox.JobStatus{}, err
	}
	st, err := jr.StartJob(ctx, cmd)
	s.record(ctx, c, nil, err)
	return st, err
}

// jobCall gates a job-management call: it counts against the budget and is recorded.
func (s *Session) jobCall(ctx context.Context, op, id string, fn func(sandbox.JobRunner) error) error {
	jr, err := s.jobs()
	if err != nil {
		return err
	}
	c := &call{tool: "job_" + op, label: "job " + op, command: strings.TrimSpace("job " + op + " " + id),
		classify: ":", plain: true, switches: []toolSwitch{{s.b.opts.Tools.ShellExecute, "shell_execute"}}}
	if err := s.admit(ctx, c); err != nil {
		return err
	}
	err = fn(jr)
	s.record(ctx, c, nil, err)
	return err
}

// Jobs lists background jobs.
func (s *Session) Jobs(ctx context.Context) (out []sandbox.JobStatus, err error) {
	err = s.jobCall(ctx, "list", "", func(jr sandbox.JobRunner) (e error) { out, e = jr.Jobs(ctx); return })
	return
}

// PollJob returns a job's new output.
func (s *Session) PollJob(ctx context.Context, id string) (out sandbox.JobOutput, err error) {
	err = s.jobCall(ctx, "poll", id, func(jr sandbox.JobRunner) (e error) { out, e = jr.PollJob(ctx, id); return })
	return s.redactJob(out), err
}

// WaitJob waits for a job.
func (s *Session) WaitJob(ctx context.Context, id string) (out sandbox.JobOutput, err error) {
	err = s.jobCall(ctx, "wait", id, func(jr sandbox.JobRunner) (e error) { out, e = jr.WaitJob(ctx, id); return })
	return s.redactJob(out), err
}

// KillJob kills a job.
func (s *Session) KillJob(ctx context.Context, id string) (out sandbox.JobStatus, err error) {
	err = s.jobCall(ctx, "kill", id, func(jr sandbox.JobRunner) (e error) { out, e = jr.KillJob(ctx, id); return })
	return
}

func (s *Session) files() (sandbox.FileSystem, error) {
	fs, ok := s.inner.(sandbox.FileSystem)
	if !ok {
		return nil, fmt.Errorf("%s: files: %w", s.b.inner.Name(), sandbox.ErrUnsupported)
	}
	return fs, nil
}

func quote(p string) string {
	q, err := syntax.Quote(p, syntax.LangBash)
	if err != nil {
		return fmt.Sprintf("%q", p)
	}
	return q
}

// ReadFile is gated like `cat PATH`, so reading credentials needs approval. PATH is judged
// as written and as the file it names (see fileTarget): `~/.ssh/id_ed25519`, or a link to
// it, is judged as the key it opens.
func (s *Session) ReadFile(ctx context.Context, p string, offset, limit int64) ([]byte, error) {
	fs, err := s.files()
	if err != nil {
		return nil, err
	}
	t := s.fileTarget(ctx, p)
	c := &call{tool: audit.ToolReadFile, label: "read_file", command: "read " + t.shown(), classify: t.reading("cat"),
		switches: []toolSwitch{{s.b.opts.Tools.FileSystem, "file_system"}}}
	if err := s.admit(ctx, c); err != nil {
		return nil, err
	}
	b, err := fs.ReadFile(ctx, p, offset, limit)
	c.rec.StdoutBytes = int64(len(b))
	s.record(ctx, c, nil, err)
	if s.b.opts.RedactOutput != nil && len(b) > 0 {
		b = []byte(s.b.opts.RedactOutput(string(b)))
	}
	return b, err
}

// WriteFile is gated like `cat > PATH` in the session's directory, so writes to rc files,
// /etc or this tool's own settings are caught, whether PATH names them directly, through
// "~" or through a symbolic link (see fileTarget). Content written with an executable name
// or mode (or a #! line) is classified as the program it will be, so a hardline script is
// refused when written, and again when run.
func (s *Session) WriteFile(ctx context.Context, p string, data []byte, mode uint32) error {
	fs, err := s.files()
	if err != nil {
		return err
	}
	t := s.fileTarget(ctx, p)
	c := &call{tool: audit.ToolWriteFile, label: "write_file", command: fmt.Sprintf("write %s (%d bytes)", t.shown(), len(data)),
		classify: t.writing(),
		switches: []toolSwitch{{s.b.opts.Tools.FileSystem, "file_system"}, {s.b.opts.Tools.FileWrite, "file_write"}}}
	switch {
	case executableName(p, mode, data):
		c.script, c.scriptName = data, p
	case t.real != "" && executableName(t.real, mode, data):
		c.script, c.scriptName = data, t.real
	}
	if err := s.admit(ctx, c); err != nil {
		return err
	}
	err = fs.WriteFile(ctx, p, data, mode)
	s.record(ctx, c, nil, err)
	return err
}

// ListDir is gated like `ls PATH`, PATH judged as written and as the directory it names.
func (s *Session) ListDir(ctx context.Context, p string) ([]sandbox.FileInfo, error) {
	fs, err := s.files()
	if err != nil {
		return nil, err
	}
	t := s.fileTarget(ctx, p)
	c := &call{tool: "list_dir", label: "list_dir", command: "list " + t.shown(), classify: t.reading("ls"),
		switches: []toolSwitch{{s.b.opts.Tools.FileSystem, "file_system"}}}
	if err := s.admit(ctx, c); err != nil {
		return nil, err
	}
	out, err := fs.ListDir(ctx, p)
	s.record(ctx, c, nil, err)
	return out, err
}

var (
	_ sandbox.Backend        = (*Backend)(nil)
	_ sandbox.SessionManager = (*Backend)(nil)
	_ sandbox.PoolReporter   = (*Backend)(nil)
	_ sandbox.Session        = (*Session)(nil)
	_ sandbox.JobRunner      = (*Session)(nil)
	_ sandbox.FileSystem     = (*Session)(nil)
	_ sandbox.Terminal       = (*Session)(nil)
	_ Budget                 = (*Session)(nil)
)
