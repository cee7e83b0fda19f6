package modal

import (
	"bufio"
	"context"
	"io"
	"sync"
	"time"

	modalsdk "github.com/modal-labs/modal-client/go"

	"github.com/hermes-sandbox/hermes-sandbox/internal/shellwrap"
	"github.com/hermes-sandbox/hermes-sandbox/sandbox"
)

// The fallback runs each command as its own Exec through shellwrap.Run, which keeps the
// session's directory and exported variables in a state file and kills a command's whole
// process tree with a second Exec on a timeout or cancel.

// fallbackDir holds the state files inside the sandbox.
const fallbackDir = hermesDir + "/fallback"

// sandboxForFallback returns the session's sandbox, making sure it runs.
func (s *session) sandboxForFallback(ctx context.Context) (*modalsdk.Sandbox, bool, error) {
	s.mu.Lock()
	known := s.sb
	s.mu.Unlock()
	sb, recreated, err := s.b.ensure(ctx, s.name, known)
	if err != nil {
		return nil, false, err
	}
	s.mu.Lock()
	s.sb = sb
	recreated = recreated || s.recreated
	s.recreated = false
	s.mu.Unlock()
	return sb, recreated, nil
}

// execFallback runs cmd as one Exec.
func (s *session) execFallback(ctx context.Context, cmd sandbox.Command) (*sandbox.Result, error) {
	p := &fbProvider{s: s}
	res, err := shellwrap.Run(ctx, p, shellwrap.Options{Backend: Name, Session: s.name, Dir: fallbackDir, PassEnv: s.b.passEnv,
		MaxArgv: MaxArgvBytes, SpillDir: s.b.spillDir, Log: s.b.log}, cmd)
	if res != nil {
		res.EnvironmentRecreated = p.recreated
	}
	return res, err
}

// fbProvider is shellwrap.Provider over Modal Execs and the sandbox's filesystem API. It
// makes sure the sandbox runs at its first call.
type fbProvider struct {
	s         *session
	sb        *modalsdk.Sandbox
	recreated bool
}

func (p *fbProvider) sandbox(ctx context.Context) (*modalsdk.Sandbox, error) {
	if p.sb != nil {
		return p.sb, nil
	}
	sb, recreated, err := p.s.sandboxForFallback(ctx)
	p.sb, p.recreated = sb, recreated
	return sb, err
}

// Start starts c as one Exec, copying its streams.
func (p *fbProvider) Start(ctx context.Context, c shellwrap.Call) (shellwrap.Process, error) {
	sb, err := p.sandbox(ctx)
	if err != nil {
		return nil, err
	}
	var params *modalsdk.SandboxExecParams
	if c.Env != nil {
		params = &modalsdk.SandboxExecParams{Env: c.Env}
	}
	cp, err := sb.Exec(ctx, c.Argv, params)
	if err != nil {
		return nil, p.s.b.mapErr("exec", p.s.name, err)
	}
	pr := &fbProc{p: p, cp: cp, stdinDone: make(chan struct{})}
	if c.Stdout == nil {
		close(pr.stdinDone)
		return pr, nil
	}
	pr.wg.Add(2)
	go func() { defer pr.wg.Done(); io.Copy(c.Stdout, cp.Stdout) }()
	go func() { defer pr.wg.Done(); io.Copy(c.Stderr, cp.Stderr) }()
	go func() {
		defer close(pr.stdinDone)
		if c.Stdin != nil {
			bw := bufio.NewWriterSize(cp.Stdin, 256<<10)
			io.Copy(bw, c.Stdin)
			bw.Flush()
		}
		cp.Stdin.Close()
	}()
	return pr, nil
}

type fbProc struct {
	p         *fbProvider
	cp        *modalsdk.ContainerProcess
	wg        sync.WaitGroup // the output copies
	stdinDone chan struct{}
}

func (pr *fbProc) Wait(ctx context.Context) (int, error) {
	code, err := pr.cp.Wait(ctx, nil)
	if err != nil {
		return 0, pr.p.s.b.mapErr("exec", pr.p.s.name, err)
	}
	pr.wg.Wait()
	select {
	case <-pr.stdinDone:
	case <-time.After(time.Second): // the command ended without reading all its input
	}
	return code, nil
}

func (p *fbProvider) ReadFile(ctx context.Context, path string) ([]byte, error) {
	sb, err := p.sandbox(ctx)
	if err != nil {
		return nil, err
	}
	return sb.Filesystem.ReadBytes(ctx, path, nil)
}

func (p *fbProvider) WriteFile(ctx context.Context, path string, data []byte) error {
	sb, err := p.sandbox(ctx)
	if err != nil {
		return err
	}
	return p.s.b.mapErr("exec", p.s.name, sb.Filesystem.WriteBytes(ctx, data, path, nil))
}
