package mcpserver

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/hermes-sandbox/hermes-sandbox/config"
	"github.com/hermes-sandbox/hermes-sandbox/gate"
	"github.com/hermes-sandbox/hermes-sandbox/sandbox"
)

// Tool names.
const (
	toolTerminal  = "terminal"
	toolProcess   = "process"
	toolReadFile  = "read_file"
	toolWriteFile = "write_file"
	toolInfo      = "sandbox_info"
)

// maxTimeout bounds the timeout a model may ask for.
const maxTimeout = 24 * time.Hour

// TerminalInput is the terminal tool's arguments.
type TerminalInput struct {
	Command    string   `json:"command" jsonschema:"the shell script to run, e.g. 'ls -la' or 'cd src && make test'"`
	Timeout    *float64 `json:"timeout,omitempty" jsonschema:"seconds before the command's whole process tree is killed (exit code 124); with background: true, the job's lifetime (default terminal.job_timeout)"`
	Workdir    string   `json:"workdir,omitempty" jsonschema:"directory to run in; like a cd, it stays the session's working directory afterwards"`
	Background bool     `json:"background,omitempty" jsonschema:"start the command as a background job and return its job_id at once; follow it with the process tool"`
}

// TerminalResult is the terminal tool's structured result.
type TerminalResult struct {
	// ExitCode is absent for a background job, which has not ended yet.
	ExitCode             *int    `json:"exit_code,omitempty" jsonschema:"the command's exit code: 124 timed out, 126 not executable, 127 not found, 130 interrupted"`
	Stdout               string  `json:"stdout"`
	Stderr               string  `json:"stderr"`
	Truncated            bool    `json:"truncated" jsonschema:"stdout or stderr lost its middle; output_file holds everything"`
	OutputFile           string  `json:"output_file" jsonschema:"where the full output was saved, on the host running hermes-sandbox"`
	Cwd                  string  `json:"cwd" jsonschema:"the session's working directory after the command"`
	EnvironmentRecreated bool    `json:"environment_recreated" jsonschema:"the sandbox was lost and made anew before this command: earlier files and shell state are gone"`
	TimedOut             bool    `json:"timed_out,omitzero"`
	StateSaved           *bool   `json:"state_saved,omitempty" jsonschema:"false when the command's cd and export could not be saved (a full or unwritable disk): the next command runs with the state from before it"`
	DurationMS           float64 `json:"duration_ms,omitzero"`
	JobID                string  `json:"job_id,omitzero" jsonschema:"the background job's id, for the process tool"`
	RemainingToolCalls   *int    `json:"remaining_tool_calls,omitempty" jsonschema:"tool calls left in this session, when loop.max_tool_calls caps them"`
}

// ProcessInput is the process tool's arguments.
type ProcessInput struct {
	Action string `json:"action" jsonschema:"list: every job; poll: new output of job id since the last poll; wait: wait for job id to end and return its remaining output; kill: kill job id's process tree"`
	ID     string `json:"id,omitempty" jsonschema:"the job_id that terminal returned; needed for poll, wait and kill"`
}

// Job describes a background job.
type Job struct {
	ID       string    `json:"id"`
	Command  string    `json:"command"`
	Running  bool      `json:"running"`
	ExitCode *int      `json:"exit_code,omitempty"`
	Started  time.Time `json:"started"`
	PID      int       `json:"pid,omitzero"`
}

// ProcessResult is the process tool's structured result.
type ProcessResult struct {
	Action    string `json:"action"`
	Jobs      []Job  `json:"jobs,omitzero"`
	Job       *Job   `json:"job,omitempty"`
	Stdout    string `json:"stdout,omitzero"`
	Stderr    string `json:"stderr,omitzero"`
	Truncated bool   `json:"truncated,omitzero" jsonschema:"more new output was available than this call returns; poll again"`
	Note      string `json:"note,omitzero"`
}

// InfoInput is sandbox_info's (empty) arguments.
type InfoInput struct{}

// InfoResult is sandbox_info's structured result.
type InfoResult struct {
	Backend      string               `json:"backend"`
	Session      string               `json:"session" jsonschema:"this MCP session's sandbox session"`
	Capabilities sandbox.Capabilities `json:"capabilities"`
	Warnings     []string             `json:"warnings" jsonschema:"configuration that weakens the backend's isolation"`
	Confinement  string               `json:"confinement,omitempty" jsonschema:"whether the kernel keeps commands away from this tool's own files (local backend)"`
	Egress       sandbox.EgressReport `json:"egress" jsonschema:"what is enforced about outbound connections: enforced, provider-enforced, not available, none or open"`
	PolicyGate   bool                 `json:"policy_gate" jsonschema:"calls pass the policy gate and the audit log"`
	ApprovalMode string               `json:"approval_mode"`
	Elicitation  bool                 `json:"elicitation" jsonschema:"this MCP client can show approval requests to its user"`
	Tools        []string             `json:"tools" jsonschema:"the tools available in this session"`
	MaxToolCalls int                  `json:"max_tool_calls" jsonschema:"loop.max_tool_calls; 0 = unlimited"`
	// RemainingToolCalls is -1 when unlimited.
	RemainingToolCalls int    `json:"remaining_tool_calls" jsonschema:"tool calls left in this session; -1 = unlimited"`
	KeepSession        bool   `json:"keep_session" jsonschema:"the sandbox session is kept after the MCP session ends"`
	Error              string `json:"error,omitzero" jsonschema:"why the sandbox session could not be opened"`
}

func boolPtr(b bool) *bool { return &b }

// schemaFor infers an input schema from T and restricts the named string properties to enums.
func schemaFor[T any](enums map[string][]any) *jsonschema.Schema {
	sch, err := jsonschema.For[T](nil)
	if err != nil {
		panic(fmt.Sprintf("mcpserver: schema for %T: %v", *new(T), err))
	}
	for name, values := range enums {
		sch.Properties[name].Enum = values
	}
	return sch
}

func (s *Server) addTools() {
	timeout := "none"
	if d := s.cfg.Terminal.Timeout; d > 0 {
		timeout = fmt.Sprintf("%g seconds", d.Seconds())
	}
	limit := s.outputLimit()

	var b strings.Builder
	fmt.Fprintf(&b, "Run a shell command in this session's sandbox (backend %s). %s ", s.backend.Name(), s.where())
	b.WriteString("The session behaves like one interactive terminal: cd and export carry over to the next call, " +
		"and files persist for the whole session. ")
	fmt.Fprintf(&b, "Returns exit_code, stdout, stderr, cwd (the working directory afterwards), truncated and output_file "+
		"(each stream keeps its first and last parts, %d bytes in all, and the full text is saved in output_file), and "+
		"environment_recreated (the sandbox was lost and made anew, so earlier files and shell state are gone). ", limit)
	fmt.Fprintf(&b, "timeout is in seconds (default %s); at expiry the command's whole process tree is killed and "+
		"exit_code is 124. ", timeout)
	if s.caps.Jobs {
		b.WriteString("With background: true the command starts as a job and its job_id returns at once; poll, wait " +
			"for or kill it with the process tool (use this for servers and long builds). ")
	} else {
		b.WriteString("This backend has no background jobs. ")
	}
	if !s.cfg.Tools.CodeExecution {
		b.WriteString("Running interpreters (python, node, …) is switched off (tools.code_execution). ")
	}
	b.WriteString("Every command passes a policy gate: hardline commands are refused, and dangerous ones need a " +
		"person's approval or are refused.")
	tsch := schemaFor[TerminalInput](nil)
	tsch.Properties["timeout"].Description = fmt.Sprintf("seconds before the command's whole process tree is killed "+
		"(exit code 124); default %s", timeout)
	mcp.AddTool(s.mcp, &mcp.Tool{
		Name:        toolTerminal,
		Title:       "Run a shell command",
		Description: b.String(),
		InputSchema: tsch,
		Annotations: &mcp.ToolAnnotations{Title: "Run a shell command", DestructiveHint: boolPtr(true),
			OpenWorldHint: boolPtr(s.caps.Network)},
	}, s.terminal)

	wait := "until it ends"
	if d := s.cfg.Terminal.Timeout; d > 0 {
		wait = fmt.Sprintf("at most %g seconds, then it reports the job still running", d.Seconds())
	}
	mcp.AddTool(s.mcp, &mcp.Tool{
		Name:  toolProcess,
		Title: "Manage background jobs",
		Description: "Manage the background jobs started with terminal {background: true}. action list: every job " +
			"and whether it still runs; poll: the new output of job id since the last poll (follow a server or a long " +
			"build with it); wait: wait for job id to end (" + wait + ") and return its remaining output and exit " +
			"code; kill: kill job id's whole process tree. Each call counts as a tool call.",
		InputSchema: schemaFor[ProcessInput](map[string][]any{"action": {"list", "poll", "wait", "kill"}}),
		Annotations: &mcp.ToolAnnotations{Title: "Manage background jobs", DestructiveHint: boolPtr(true),
			OpenWorldHint: boolPtr(false)},
	}, s.process)

	mcp.AddTool(s.mcp, &mcp.Tool{
		Name:  toolReadFile,
		Title: "Read a file",
		Description: fmt.Sprintf("Read a text file in the sandbox, by lines. path is absolute or relative to the "+
			"session's working directory. offset is the first line to return (1-based, default 1) and limit the "+
			"number of lines (default %d). Returns content (the lines exactly as in the file, without line numbers), "+
			"start_line, end_line, total_lines and total_bytes; when more lines follow, truncated is true and "+
			"next_offset is the offset to continue from. At most %d bytes of content return per call. Only the "+
			"first %d MiB of a file can be read this way (partial is then true): use terminal (sed -n, tail) beyond "+
			"that. Binary files are refused: inspect them with terminal (file, xxd). Reading credentials needs approval.",
			defaultReadLines, limit, maxReadBytes>>20),
		InputSchema: schemaFor[ReadFileInput](nil),
		Annotations: &mcp.ToolAnnotations{Title: "Read a file", ReadOnlyHint: true, OpenWorldHint: boolPtr(false)},
	}, s.readFile)

	mcp.AddTool(s.mcp, &mcp.Tool{
		Name:  toolWriteFile,
		Title: "Write a file",
		Description: "Write content to a file in the sandbox, replacing the file if it exists and creating missing " +
			"parent directories. path is absolute or relative to the session's working directory. Returns path and " +
			"bytes_written. Writes pass the policy gate: system paths, shell startup files, SSH and credential files " +
			"need approval, and this tool's own settings cannot be written.",
		InputSchema: schemaFor[WriteFileInput](nil),
		Annotations: &mcp.ToolAnnotations{Title: "Write a file", DestructiveHint: boolPtr(true), IdempotentHint: true,
			OpenWorldHint: boolPtr(false)},
	}, s.writeFile)

	s.addSessionTool() // session_tool.go

	mcp.AddTool(s.mcp, &mcp.Tool{
		Name:  toolInfo,
		Title: "Describe the sandbox",
		Description: "Report where commands run: the backend, its isolation, network access and capabilities, " +
			"hardening warnings, whether calls pass the policy gate, the approval mode and whether this client can " +
			"be asked for approvals, the tools available, and the tool calls left in this session. It does not " +
			"count as a tool call.",
		InputSchema: schemaFor[InfoInput](nil),
		Annotations: &mcp.ToolAnnotations{Title: "Describe the sandbox", ReadOnlyHint: true, OpenWorldHint: boolPtr(false)},
	}, s.info)
}

func (s *Server) outputLimit() int {
	if n := s.cfg.Terminal.OutputLimit; n > 0 {
		return n
	}
	return sandbox.DefaultOutputLimit
}

// timeout turns the seconds a model asked for into a duration; nil means terminal.timeout.
func (s *Server) timeout(sec *float64) (time.Duration, error) {
	if sec == nil {
		return s.cfg.Terminal.Timeout, nil
	}
	if math.IsNaN(*sec) || *sec <= 0 {
		return 0, fmt.Errorf("terminal: timeout must be a positive number of seconds, not %v", *sec)
	}
	d := time.Duration(*sec * float64(time.Second))
	if d > maxTimeout || *sec > maxTimeout.Seconds() {
		return 0, fmt.Errorf("terminal: timeout %v s is longer than %g s; use background: true for long work", *sec, maxTimeout.Seconds())
	}
	return d, nil
}

func (s *Server) terminal(ctx context.Context, req *mcp.CallToolRequest, in TerminalInput) (*mcp.CallToolResult, TerminalResult, error) {
	var out TerminalResult
	if strings.TrimSpace(in.Command) == "" {
		return nil, out, errors.New("terminal: command is empty")
	}
	timeout, err := s.timeout(in.Timeout)
	if err != nil {
		return nil, out, err
	}
	// Progress starts before the sandbox is opened: a backend's long waits (a pod no node
	// takes yet) report through the context into the notifications' message.
	meter := &outputMeter{redact: s.redact}
	if req.Params.GetProgressToken() != nil {
		ctx = sandbox.WithProgress(ctx, meter.waitWriter())
	}
	stop := startProgress(ctx, req, meter, "running")
	defer stop()
	sb, cctx, release, err := s.call(ctx, req)
	if err != nil {
		return nil, out, failure(req.Session, "terminal", err)
	}
	defer release()
	if err := s.checkEnabled(sb, toolTerminal); err != nil {
		return nil, out, failure(req.Session, "terminal", err)
	}
	cmd := sandbox.Command{Script: in.Command, Dir: in.Workdir, OutputLimit: s.cfg.Terminal.OutputLimit, SpillLimit: s.cfg.Terminal.SpillLimit.Bytes()}

	if in.Background {
		jr, ok := sb.(sandbox.JobRunner)
		if !ok || !s.caps.Jobs {
			return nil, out, fmt.Errorf("terminal: the %s backend has no background jobs; run the command in the foreground", s.backend.Name())
		}
		cmd.MaxJobs, cmd.JobTimeout = s.cfg.Terminal.MaxJobs, s.cfg.Terminal.JobTimeout
		if in.Timeout != nil {
			// A timeout given with background: true bounds the job's lifetime.
			cmd.Timeout, cmd.JobTimeout = timeout, timeout
		}
		st, err := jr.StartJob(cctx, cmd)
		if err != nil {
			return nil, out, failure(req.Session, "terminal: start background job", err)
		}
		out.JobID = st.ID
		out.RemainingToolCalls = capped(sb)
		text := fmt.Sprintf("started background job %s (pid %d): %s\nFollow it with process {action: \"poll\", id: %q}; "+
			"wait for it with action \"wait\", stop it with action \"kill\".", st.ID, st.PID, st.Command, st.ID)
		return textResult(text), out, nil
	}

	cmd.Timeout = timeout
	if req.Params.GetProgressToken() != nil {
		cmd.Stdout, cmd.Stderr = meter, meter
	}
	res, err := sb.Exec(cctx, cmd)
	stop()
	if res == nil {
		if err == nil {
			err = errors.New("the backend returned no result")
		}
		return nil, out, failure(req.Session, "terminal", err)
	}
	code := res.ExitCode
	out = TerminalResult{ExitCode: &code, Stdout: res.Stdout, Stderr: res.Stderr, Truncated: res.Truncated,
		OutputFile: res.OutputFile, Cwd: res.Cwd, EnvironmentRecreated: res.EnvironmentRecreated,
		TimedOut: res.TimedOut, DurationMS: float64(res.Duration.Microseconds()) / 1000, RemainingToolCalls: capped(sb)}
	saved := !res.StateNotSaved
	out.StateSaved = &saved
	return textResult(terminalText(res, timeout)), out, nil
}

// capped returns the remaining tool calls when a cap applies, else nil.
func capped(sb sandbox.Session) *int {
	if n, ok := remaining(sb); ok && n >= 0 {
		return &n
	}
	return nil
}

func textResult(texts ...string) *mcp.CallToolResult {
	res := &mcp.CallToolResult{}
	for _, t := range texts {
		res.Content = append(res.Content, &mcp.TextContent{Text: t})
	}
	return res
}

// terminalText is the result as a person would read it in a terminal, with a trailer.
func terminalText(res *sandbox.Result, timeout time.Duration) string {
	var b strings.Builder
	b.WriteString(res.Stdout)
	newline := func() {
		if b.Len() > 0 && !strings.HasSuffix(b.String(), "\n") {
			b.WriteByte('\n')
		}
	}
	if res.Stderr != "" {
		newline()
		b.WriteString("[stderr]\n")
		b.WriteString(res.Stderr)
	}
	newline()
	fmt.Fprintf(&b, "[exit code %d; cwd %s]", res.ExitCode, res.Cwd)
	switch {
	case res.TimedOut:
		fmt.Fprintf(&b, "\n[timed out after %s: the command's process tree was killed; raise timeout or use background: true]", timeout)
	case res.Interrupted:
		b.WriteString("\n[interrupted: the command's process tree was killed]")
	}
	if res.Truncated {
		fmt.Fprintf(&b, "\n[output truncated: %d bytes on stdout and %d on stderr; the full output is in %s]",
			res.StdoutBytes, res.StderrBytes, res.OutputFile)
	}
	if res.EnvironmentRecreated {
		b.WriteString("\n[note: the sandbox was lost and recreated before this command; earlier files and shell state are gone]")
	}
	if res.StateNotSaved {
		fmt.Fprintf(&b, "\n[warning: this command's cd and export were not saved: %s; the next command runs with the state from before it]", res.StateError)
	}
	return b.String()
}

func (s *Server) process(ctx context.Context, req *mcp.CallToolRequest, in ProcessInput) (*mcp.CallToolResult, ProcessResult, error) {
	out := ProcessResult{Action: in.Action}
	switch in.Action {
	case "list":
	case "poll", "wait", "kill":
		if strings.TrimSpace(in.ID) == "" {
			return nil, out, fmt.Errorf("process: action %s needs the job id that terminal returned", in.Action)
		}
	default:
		return nil, out, fmt.Errorf("process: unknown action %q: want list, poll, wait or kill", in.Action)
	}
	sb, cctx, release, err := s.call(ctx, req)
	if err != nil {
		return nil, out, failure(req.Session, "process", err)
	}
	defer release()
	if err := s.checkEnabled(sb, toolProcess); err != nil {
		return nil, out, failure(req.Session, "process", err)
	}
	jr, ok := sb.(sandbox.JobRunner)
	if !ok || !s.caps.Jobs {
		return nil, out, fmt.Errorf("process: the %s backend has no background jobs", s.backend.Name())
	}
	op := "process " + in.Action
	switch in.Action {
	case "list":
		jobs, err := jr.Jobs(cctx)
		if err != nil {
			return nil, out, failure(req.Session, op, err)
		}
		out.Jobs = []Job{}
		var b strings.Builder
		for _, j := range jobs {
			out.Jobs = append(out.Jobs, jobOf(j))
			fmt.Fprintf(&b, "%s\t%s\t%s\n", j.ID, jobState(j), j.Command)
		}
		if len(jobs) == 0 {
			b.WriteString("no background jobs\n")
		}
		return textResult(strings.TrimSuffix(b.String(), "\n")), out, nil
	case "kill":
		st, err := jr.KillJob(cctx, in.ID)
		if err != nil {
			return nil, out, failure(req.Session, op, err)
		}
		j := jobOf(st)
		out.Job = &j
		return textResult(fmt.Sprintf("job %s: %s", st.ID, jobState(st))), out, nil
	}

	var jo sandbox.JobOutput
	if in.Action == "poll" {
		jo, err = jr.PollJob(cctx, in.ID)
	} else {
		wctx, cancel := cctx, context.CancelFunc(func() {})
		if d := s.cfg.Terminal.Timeout; d > 0 {
			wctx, cancel = context.WithTimeout(cctx, d)
		}
		stop := startProgress(cctx, req, nil, "waiting for job "+in.ID)
		jo, err = jr.WaitJob(wctx, in.ID)
		stop()
		cancel()
		if err != nil && errors.Is(err, context.DeadlineExceeded) && cctx.Err() == nil {
			out.Job = &Job{ID: in.ID, Running: true}
			out.Note = fmt.Sprintf("job %s is still running after %s; poll it, wait again or kill it", in.ID, s.cfg.Terminal.Timeout)
			return textResult(out.Note), out, nil
		}
	}
	if err != nil {
		return nil, out, failure(req.Session, op, err)
	}
	j := jobOf(jo.JobStatus)
	out.Job, out.Stdout, out.Stderr, out.Truncated = &j, jo.Stdout, jo.Stderr, jo.Truncated
	var b strings.Builder
	b.WriteString(jo.Stdout)
	if jo.Stderr != "" {
		if b.Len() > 0 && !strings.HasSuffix(b.String(), "\n") {
			b.WriteByte('\n')
		}
		b.WriteString("[stderr]\n" + jo.Stderr)
	}
	if b.Len() > 0 && !strings.HasSuffix(b.String(), "\n") {
		b.WriteByte('\n')
	}
	if b.Len() == 0 {
		b.WriteString("(no new output)\n")
	}
	fmt.Fprintf(&b, "[job %s: %s]", jo.ID, jobState(jo.JobStatus))
	if jo.Truncated {
		b.WriteString("\n[more output is waiting: poll again]")
	}
	return textResult(b.String()), out, nil
}

func jobOf(j sandbox.JobStatus) Job {
	return Job{ID: j.ID, Command: j.Command, Running: j.Running, ExitCode: j.ExitCode, Started: j.Started, PID: j.PID}
}

func jobState(j sandbox.JobStatus) string {
	switch {
	case j.Running:
		return "running"
	case j.ExitCode != nil:
		return fmt.Sprintf("exited with code %d", *j.ExitCode)
	}
	return "ended"
}

func (s *Server) info(ctx context.Context, req *mcp.CallToolRequest, _ InfoInput) (*mcp.CallToolResult, InfoResult, error) {
	out := InfoResult{
		Backend: s.backend.Name(),
		// Asked again, not the startup copy: a backend can change how it runs commands
		// (daytona falls back to toolbox sessions where its helper cannot run).
		Capabilities:       s.backend.Capabilities(),
		Warnings:           []string{},
		ApprovalMode:       string(s.cfg.Approvals.Mode),
		Elicitation:        canElicit(req.Session),
		Tools:              []string{},
		MaxToolCalls:       s.cfg.Loop.MaxToolCalls,
		RemainingToolCalls: -1,
		KeepSession:        s.opts.KeepSessions,
	}
	if w, ok := s.backend.(sandbox.Warner); ok {
		out.Warnings = append(out.Warnings, w.Warnings()...)
	}
	if c, ok := s.backend.(gate.Confiner); ok {
		_, out.Confinement = c.Confinement()
	}
	out.Egress = sandbox.EgressReport{Status: sandbox.EgressNotAvailable,
		Detail: "not available: " + s.backend.Name() + " cannot filter outbound connections"}
	if r, ok := s.backend.(sandbox.EgressReporter); ok {
		out.Egress = r.Egress()
	}
	for _, name := range []string{toolProcess, toolReadFile, toolInfo, toolSession, toolTerminal, toolWriteFile} {
		if s.listed(name) {
			out.Tools = append(out.Tools, name)
		}
	}
	st, cctx, release, err := s.acquire(ctx, req.Session)
	if err != nil {
		return nil, out, failure(req.Session, "sandbox_info", err)
	}
	defer release()
	out.Session = st.name
	if sb, err := st.sandbox(cctx, s.backend); err != nil {
		out.Error = err.Error()
	} else if n, ok := remaining(sb); ok {
		out.PolicyGate, out.RemainingToolCalls = true, n
	}
	return textResult(infoText(out)), out, nil
}

func infoText(i InfoResult) string {
	var b strings.Builder
	fmt.Fprintf(&b, "backend: %s (session %s)\n", i.Backend, i.Session)
	fmt.Fprintf(&b, "isolation: %s\n", i.Capabilities.Isolation)
	fmt.Fprintf(&b, "network: %s\n", onOff(i.Capabilities.Network))
	fmt.Fprintf(&b, "egress: %s\n", i.Egress.Detail)
	fmt.Fprintf(&b, "background jobs: %s; files: %s; state persists across processes: %s\n",
		yesNo(i.Capabilities.Jobs), yesNo(i.Capabilities.Files), yesNo(i.Capabilities.Persistent))
	for _, w := range i.Warnings {
		fmt.Fprintf(&b, "warning: %s\n", w)
	}
	if i.Confinement != "" {
		fmt.Fprintf(&b, "confinement: %s\n", i.Confinement)
	}
	fmt.Fprintf(&b, "policy gate and audit: %s\n", onOff(i.PolicyGate))
	fmt.Fprintf(&b, "approval mode: %s", i.ApprovalMode)
	if i.ApprovalMode == string(config.ApprovalManual) {
		if i.Elicitation {
			b.WriteString(" (this client can ask its user)")
		} else {
			b.WriteString(" (this client cannot ask its user, so dangerous commands are refused)")
		}
	}
	b.WriteString("\n")
	fmt.Fprintf(&b, "tools: %s\n", strings.Join(i.Tools, ", "))
	if i.RemainingToolCalls < 0 {
		b.WriteString("tool calls: unlimited\n")
	} else {
		fmt.Fprintf(&b, "tool calls left: %d of %d\n", i.RemainingToolCalls, i.MaxToolCalls)
	}
	if i.KeepSession {
		b.WriteString("the sandbox session is kept after this MCP session ends\n")
	} else {
		b.WriteString("the sandbox session is removed when this MCP session ends\n")
	}
	if i.Error != "" {
		fmt.Fprintf(&b, "error: %s\n", i.Error)
	}
	return strings.TrimSuffix(b.String(), "\n")
}

func onOff(b bool) string {
	if b {
		return "on"
	}
	return "off"
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}
