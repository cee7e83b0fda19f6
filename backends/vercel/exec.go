package vercel

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/hermes-sandbox/hermes-sandbox/internal/agent"
	"github.com/hermes-sandbox/hermes-sandbox/internal/channel"
	"github.com/hermes-sandbox/hermes-sandbox/sandbox"
)

// session is a channel session (commands, jobs, terminal over the helper) plus what only
// vercel knows: the VM session it runs in, its lifetime, and files through the REST API.
type session struct {
	*channel.Session
	b    *Backend
	name string

	stop     chan struct{}
	stopOnce sync.Once
	wg       sync.WaitGroup

	mu        sync.Mutex
	vm        *VMSession // guarded by mu
	expiry    time.Time  // guarded by mu; when the VM stops unless extended
	cwd       string     // guarded by mu; the working directory after the last command
	busy      int        // guarded by mu; commands running now
	lastUse   time.Time  // guarded by mu
	keepalive bool       // guarded by mu; the extender runs
}

// start is the channel's Starter: it makes sure the session's sandbox runs (found by name,
// resumed or created) and starts the helper on its PTY.
func (s *session) start(ctx context.Context) (channel.Started, error) {
	b := s.b
	if b.closed.Load() {
		return channel.Started{}, &sandbox.Error{Backend: Name, Op: "start", ID: s.name, Err: sandbox.ErrClosed}
	}
	up, err := b.helperBinary()
	if err != nil {
		return channel.Started{}, &sandbox.Error{Backend: Name, Op: "start", ID: s.name, Err: err}
	}
	vm, recreated, fresh, err := b.ensure(ctx, s.name)
	if err != nil {
		return channel.Started{}, err
	}
	s.setVM(vm)
	s.startKeepalive()
	if fresh {
		if err := b.uploadHelper(ctx, vm, up); err != nil {
			return channel.Started{}, err
		}
	}
	client, err := b.dialHelper(ctx, vm, up)
	if err != nil && ctx.Err() == nil {
		client, err = b.redialHelper(ctx, s.name, vm, up, !fresh, err)
	}
	if err != nil {
		return channel.Started{}, b.apiErr("start helper", s.name, err)
	}
	if recreated {
		b.log.Info("session's sandbox was recreated; earlier state is gone", "session", s.name)
	}
	return channel.Started{Client: client, Recreated: recreated}, nil
}

// helperWait bounds the retries of a helper that does not start.
var helperWait = time.Minute

// redialHelper starts the helper after a first try failed with err. The helper may be
// missing (a sandbox made elsewhere, a new helper version): it is uploaded, unless upload is
// false because this process has just uploaded it. Or the try failed for a passing reason
// (a terminal that dropped, a helper that another process is installing at this moment):
// it is tried again after a pause, and uploaded again when that fails too, for at most
// helperWait.
func (b *Backend) redialHelper(ctx context.Context, session string, vm *VMSession, up *agentUpload, upload bool, err error) (*agent.Client, error) {
	deadline := time.Now().Add(helperWait)
	wait := 50 * time.Millisecond
	for {
		if final(err) {
			return nil, err
		}
		if upload {
			b.log.Debug("helper did not start; uploading it", "session", session, "err", err)
			if uerr := b.uploadHelper(ctx, vm, up); uerr != nil {
				return nil, uerr
			}
			var client *agent.Client
			if client, err = b.dialHelper(ctx, vm, up); err == nil || ctx.Err() != nil || final(err) {
				return client, err
			}
		}
		if time.Now().After(deadline) {
			return nil, err
		}
		// Spread the processes' retries, so that their uploads stop overlapping.
		if serr := sandbox.Sleep(ctx, wait+rand.N(wait)); serr != nil {
			return nil, fmt.Errorf("%w (the helper did not start: %v)", serr, err)
		}
		wait = min(wait*2, time.Second)
		client, derr := b.dialHelper(ctx, vm, up)
		if derr == nil || ctx.Err() != nil {
			return client, derr
		}
		err, upload = derr, true
	}
}

// final reports a failure that another try would only repeat: the terminal's token
// refused, or its server not ready after waitReady's bound.
func final(err error) bool {
	return errors.Is(err, sandbox.ErrDenied) || errors.Is(err, errNotReady)
}

func (s *session) setVM(vm *VMSession) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.vm = vm
	s.expiry = vmExpiry(vm)
}

// vmExpiry is when a VM session stops unless extended.
func vmExpiry(vm *VMSession) time.Time {
	start := vm.StartedAt
	if start == 0 {
		start = vm.RequestedAt
	}
	return time.UnixMilli(start + vm.Timeout)
}

// vmID is the running VM session, starting the sandbox if needed.
func (s *session) vmID(ctx context.Context) (string, error) {
	if _, err := s.Client(ctx); err != nil {
		return "", err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.vm.ID, nil
}

// Exec runs a command through the helper; the VM's lifetime is extended while it runs.
func (s *session) Exec(ctx context.Context, cmd sandbox.Command) (*sandbox.Result, error) {
	s.use(1)
	defer s.use(-1)
	res, err := s.Session.Exec(ctx, cmd)
	if err == nil && res != nil && res.Cwd != "" {
		s.mu.Lock()
		s.cwd = res.Cwd
		s.mu.Unlock()
	}
	return res, err
}

func (s *session) use(d int) {
	s.mu.Lock()
	s.busy += d
	s.lastUse = time.Now()
	s.mu.Unlock()
}

// startKeepalive starts, once, the goroutine that extends the VM's lifetime while the
// session is in use: a command runs, or one ran within the last vercel.timeout.
func (s *session) startKeepalive() {
	s.mu.Lock()
	if s.keepalive {
		s.mu.Unlock()
		return
	}
	s.keepalive = true
	s.mu.Unlock()
	timeout := s.b.set.timeout
	every := min(max(timeout/4, 100*time.Millisecond), time.Minute)
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			select {
			case <-s.stop:
				return
			case <-t.C:
			}
			s.mu.Lock()
			inUse := s.busy > 0 || time.Since(s.lastUse) < timeout
			remaining := time.Until(s.expiry)
			vm := s.vm
			s.mu.Unlock()
			if !inUse || vm == nil || remaining > timeout/2 {
				continue
			}
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			got, err := s.b.api.ExtendTimeout(ctx, vm.ID, timeout-max(remaining, 0))
			cancel()
			if err != nil {
				s.b.log.Warn("extend the sandbox's lifetime", "session", s.name, "err", err)
				continue
			}
			s.mu.Lock()
			if s.vm != nil && s.vm.ID == got.ID {
				s.vm.Timeout = got.Timeout
				s.expiry = vmExpiry(got)
			}
			s.mu.Unlock()
		}
	}()
}

// onClose stops the extender; the sandbox stays and stops at its timeout.
func (s *session) onClose() error {
	s.stopOnce.Do(func() { close(s.stop) })
	s.wg.Wait()
	return nil
}

// currentDir is the session's working directory, for relative file paths.
func (s *session) currentDir(ctx context.Context) (string, error) {
	s.mu.Lock()
	cwd := s.cwd
	s.mu.Unlock()
	if cwd != "" {
		return cwd, nil
	}
	res, err := s.Exec(ctx, sandbox.Command{Argv: []string{"pwd"}})
	if err != nil {
		return "", err
	}
	if res.ExitCode != 0 || res.Cwd == "" {
		return "", fmt.Errorf("cannot learn the session's directory: %s", res.Stderr)
	}
	return res.Cwd, nil
}

var (
	_ sandbox.Session    = (*session)(nil)
	_ sandbox.FileSystem = (*session)(nil)
	_ sandbox.JobRunner  = (*session)(nil)
	_ sandbox.Terminal   = (*session)(nil)
)
