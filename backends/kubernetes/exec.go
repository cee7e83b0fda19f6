package kubernetes

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"runtime"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/remotecommand"
	utilexec "k8s.io/client-go/util/exec"
	"k8s.io/streaming/pkg/httpstream"

	"github.com/hermes-sandbox/hermes-sandbox/config"
	"github.com/hermes-sandbox/hermes-sandbox/internal/agent"
	"github.com/hermes-sandbox/hermes-sandbox/internal/agentbin"
	"github.com/hermes-sandbox/hermes-sandbox/internal/channel"
	"github.com/hermes-sandbox/hermes-sandbox/internal/egress"
	"github.com/hermes-sandbox/hermes-sandbox/sandbox"
)

// session is a channel session over the helper's long-lived exec, plus the pod it runs in.
type session struct {
	*channel.Session
	b    *Backend
	name string

	mu        sync.Mutex
	pod       string    // guarded by mu
	uid       types.UID // guarded by mu
	lastTouch time.Time // guarded by mu
	touching  sync.WaitGroup
	relay     *relay // guarded by mu; the egress relay and proxy (kubernetes.network allowlist)

	egressMu sync.Mutex // serialises starting and stopping the relay
}

// start is the channel's Starter: a running pod and a helper attached to it.
func (s *session) start(ctx context.Context) (channel.Started, error) {
	b := s.b
	s.mu.Lock()
	known := s.uid
	s.mu.Unlock()
	if known == "" {
		rec, _, _ := b.records.Read(s.name)
		known = types.UID(rec.ID)
	}
	pod, recreated, err := b.ensure(ctx, s.name, known)
	if err != nil {
		return channel.Started{}, err
	}
	if b.network() == config.NetworkAllowlist && pod.Labels[labelEgress] != "deny" {
		// Made while kubernetes.network was open: no NetworkPolicy selects it, so the
		// allowlist would be a pretence.
		return channel.Started{}, &sandbox.Error{Backend: Name, Op: "egress", ID: s.name, Err: fmt.Errorf(
			"the session's pod %s was made with an open network and the deny-all-egress NetworkPolicy "+
				"does not select it; remove the session (hermes-sandbox sessions rm %s) so "+
				"kubernetes.network allowlist applies: %w",
			pod.Name, s.name, sandbox.ErrInvalidConfig)}
	}
	client, err := b.startHelper(ctx, pod)
	if err != nil && gone(err) {
		// The pod ended between the check and the exec: make a new one, once.
		if pod, _, err = b.ensure(ctx, s.name, pod.UID); err != nil {
			return channel.Started{}, err
		}
		recreated = true
		client, err = b.startHelper(ctx, pod)
	}
	if err != nil {
		return channel.Started{}, b.mapErr("start helper", s.name, err)
	}
	if err := b.installBundle(ctx, s.name, client); err != nil { // secrets.go
		client.Close()
		return channel.Started{}, b.mapErr("install the session's CA bundle", s.name, err)
	}
	if err := s.startEgress(ctx, pod.Name); err != nil {
		client.Close()
		return channel.Started{}, err
	}
	s.mu.Lock()
	s.pod, s.uid = pod.Name, pod.UID
	s.mu.Unlock()
	if rec, _, _ := b.records.Read(s.name); rec.ID != string(pod.UID) {
		b.records.Save(s.name, sandbox.IDRecord{ID: string(pod.UID)})
	}
	return channel.Started{Client: client, Recreated: recreated}, nil
}

func (s *session) onClose() error {
	s.stopEgress()
	s.touching.Wait()
	return nil
}

// Exec runs cmd over the helper and marks the pod used (for gc).
func (s *session) Exec(ctx context.Context, cmd sandbox.Command) (*sandbox.Result, error) {
	if err := s.reviveEgress(ctx); err != nil {
		return nil, err
	}
	res, err := s.Session.Exec(ctx, cmd)
	s.touch()
	return res, err
}

// touch marks the pod used, at most once a minute, in the background.
func (s *session) touch() {
	s.mu.Lock()
	now := time.Now()
	pod := s.pod
	due := pod != "" && now.Sub(s.lastTouch) > time.Minute
	if due {
		s.lastTouch = now
		s.touching.Add(1)
	}
	s.mu.Unlock()
	if due {
		go func() {
			defer s.touching.Done()
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			s.b.touch(ctx, pod)
		}()
	}
}

// gone says an exec failed because the pod (or its container) is no more. The API server
// says NotFound for a pod; what a kubelet says of a container it no longer runs is only text.
func gone(err error) bool {
	if apierrors.IsNotFound(err) {
		return true
	}
	msg := err.Error()
	return strings.Contains(msg, "not found") || strings.Contains(msg, "container not running") ||
		strings.Contains(msg, "cannot exec into a container in a completed pod") || strings.Contains(msg, "is not running")
}

// helperEnv is what the helper seeds a session with: the passed-through variables and, with
// kubernetes.network allowlist, the proxy variables (also in the pod's own environment; seeded
// too for a pod made before the setting changed).
func (b *Backend) helperEnv() map[string]string {
	if b.network() != config.NetworkAllowlist {
		return b.passEnv
	}
	env := maps.Clone(b.passEnv)
	maps.Copy(env, egress.ProxyEnv())
	return env
}

// agentBinary is the helper for the nodes' architecture: the one kubernetes.node_selector
// asks for, else this machine's.
func (b *Backend) agentBinary() (*agentbin.Binary, error) {
	arch := b.cfg.NodeSelector["kubernetes.io/arch"]
	if arch == "" {
		arch = runtime.GOARCH
	}
	return b.helper.Load(arch)
}

// remotePath is where the helper lives in a pod, named by its content.
func remotePath(bin *agentbin.Binary) string { return hermesDir + "/" + bin.Name() }

// sendHelper is what the start script prints when the pod has no helper yet: the client then
// sends the helper's bytes on the same exec's stdin, so a new pod costs one exec, not three.
const sendHelper = "HERMES-SANDBOX-SEND-HELPER\n"

// startScript runs the helper ($0) with its arguments after making the session's starting
// directory. Where the pod has no helper yet it asks for its bytes on stdin, to a temporary
// name of its own (so concurrent starts cannot mix), and installs them only when their size
// and checksum are the helper's (exit 95 otherwise); it exits 97 without `head`.
func (b *Backend) startScript(bin *agentbin.Binary) string {
	return "mkdir -p " + sandbox.ShellQuote(b.cwd) + " 2>/dev/null; " +
		"if [ ! -x \"$0\" ]; then command -v head >/dev/null 2>&1 || exit 97; t=\"${0%/*}/.up-$$\" f=$0; " +
		"mkdir -p \"${0%/*}\" && printf '" + strings.TrimSuffix(sendHelper, "\n") + "\\n' && " +
		fmt.Sprintf("head -c %d >\"$t\"", bin.Size) + " || { rm -f \"$t\"; exit 98; }\n" +
		agentbin.VerifyScript(bin) + "fi; exec \"$0\" \"$@\""
}

// executor returns an executor for one exec in the pod's container: WebSocket (v5) first,
// SPDY where the server or a proxy does not upgrade, as kubectl does.
func (b *Backend) executor(c *conn, pod string, argv []string, stdin bool) (remotecommand.Executor, error) {
	req := c.api.core.Post().Resource("pods").Namespace(c.namespace).Name(pod).SubResource("exec").
		VersionedParams(&corev1.PodExecOptions{Container: containerName, Command: argv, Stdin: stdin, Stdout: true, Stderr: true}, apiParams)
	spdy, err := remotecommand.NewSPDYExecutor(c.rest, "POST", req.URL())
	if err != nil {
		return nil, err
	}
	if b.spdyOnly.Load() {
		return spdy, nil
	}
	ws, err := remotecommand.NewWebSocketExecutor(c.rest, "GET", req.URL().String())
	if err != nil {
		return spdy, nil
	}
	return remotecommand.NewFallbackExecutor(ws, spdy, func(err error) bool {
		fallback := httpstream.IsUpgradeFailure(err) || httpstream.IsHTTPSProxyError(err)
		if fallback {
			b.spdyOnly.Store(true) // this server (or a proxy on the way) does not upgrade: ask no more
			b.log.Debug("exec over WebSocket refused; using SPDY", "err", err)
		}
		return fallback
	})
}

// startHelper starts the helper in the pod as one long-lived exec, uploading it first if the
// pod does not have it, and returns a client speaking to it over the exec's stdin and stdout.
func (b *Backend) startHelper(ctx context.Context, pod *corev1.Pod) (*agent.Client, error) {
	c, err := b.cluster()
	if err != nil {
		return nil, err
	}
	bin, err := b.agentBinary()
	if err != nil {
		return nil, fmt.Errorf("the sandbox helper: %w (%w)", err, sandbox.ErrUnavailable)
	}
	argv := append([]string{"/bin/sh", "-c", b.startScript(bin), remotePath(bin)}, bin.Args...)
	argv = append(argv, "serve", "--state", helperState, "--cwd", b.cwd, "--shell", b.shell)
	client, err := agentbin.Start(ctx, func(ctx context.Context) (*agent.Client, error) {
		return b.attach(ctx, c, pod.Name, argv, bin)
	}, func(ctx context.Context) error {
		return agentbin.Install(ctx, &podTarget{b: b, c: c, pod: pod.Name}, bin, remotePath(bin))
	})
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, fmt.Errorf("pod %s: %w (%w)", pod.Name, err, sandbox.ErrUnavailable)
	}
	if err := client.SeedEnv(ctx, b.helperEnv()); err != nil {
		client.Close()
		return nil, fmt.Errorf("pass environment to the helper: %w", err)
	}
	return client, nil
}

// podTarget installs the helper in a pod through execs (agentbin.Target).
type podTarget struct {
	b   *Backend
	c   *conn
	pod string
}

func (t *podTarget) Write(ctx context.Context, p string, r io.Reader, _ int64) error {
	code, out, err := t.exec(ctx, r, `mkdir -p "${1%/*}" && cat >"$1"`, p)
	if err == nil && code != 0 {
		err = fmt.Errorf("exit %d", code)
	}
	if err != nil {
		return fmt.Errorf("upload the sandbox helper to pod %s: %v %s", t.pod, err, out)
	}
	return nil
}

func (t *podTarget) Run(ctx context.Context, script string, args ...string) (int, string, error) {
	return t.exec(ctx, nil, script, args...)
}

// exec runs script in the pod with stdin, and returns its exit status and what it printed.
func (t *podTarget) exec(ctx context.Context, stdin io.Reader, script string, args ...string) (int, string, error) {
	ex, err := t.b.executor(t.c, t.pod, append([]string{"/bin/sh", "-c", script, "sh"}, args...), stdin != nil)
	if err != nil {
		return -1, "", err
	}
	var out sandbox.TailWriter
	err = ex.StreamWithContext(ctx, remotecommand.StreamOptions{Stdin: stdin, Stdout: &out, Stderr: &out})
	var ee utilexec.ExitError
	if errors.As(err, &ee) {
		return ee.ExitStatus(), out.String(), nil
	}
	return 0, out.String(), err
}

// attach runs argv as a long-lived exec and speaks the helper protocol over its stdio; when
// the start script asks for the helper (sendHelper), its bytes go first on stdin. When the
// helper does not start, the error is an *agentbin.StartError with the exec's exit status.
func (b *Backend) attach(ctx context.Context, c *conn, pod string, argv []string, helper *agentbin.Binary) (*agent.Client, error) {
	ex, err := b.executor(c, pod, argv, true)
	if err != nil {
		return nil, err
	}
	inR, inW := io.Pipe()
	outR, pipeW := io.Pipe()
	outW := &askWatcher{w: pipeW, onAsk: func() {
		// Nothing else writes to stdin before the helper's greeting, which comes only after
		// the script has read every byte of it.
		go func() {
			f, err := helper.Open()
			if err == nil {
				_, err = io.Copy(inW, f)
				f.Close()
			}
			if err != nil {
				b.log.Debug("sending the helper failed", "pod", pod, "err", err)
				inW.CloseWithError(err)
			}
		}()
	}}
	tail := &sandbox.TailWriter{}
	streamCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	done := make(chan struct{})
	var streamErr error
	go func() {
		defer close(done)
		streamErr = ex.StreamWithContext(streamCtx, remotecommand.StreamOptions{Stdin: inR, Stdout: outW, Stderr: tail})
		if streamErr == nil {
			pipeW.CloseWithError(io.EOF)
		} else {
			pipeW.CloseWithError(streamErr)
		}
		inW.Close() // client-go's stdin copier sees EOF, not an error it would log
	}()
	var once sync.Once
	closeFn := func() error {
		once.Do(func() {
			inW.Close() // EOF: the helper ends, killing what still runs
			select {
			case <-done:
			case <-time.After(5 * time.Second):
			}
			cancel()
			outR.Close()
			<-done
		})
		return nil
	}
	client, err := agent.NewClient(ctx, outR, inW, closeFn)
	if err != nil {
		closeFn()
		code := -1
		var ee utilexec.ExitError
		if errors.As(streamErr, &ee) {
			code = ee.ExitStatus()
		}
		if streamErr != nil && code == -1 {
			err = streamErr
		}
		return nil, &agentbin.StartError{Code: code, Output: tail.String(), Err: err}
	}
	return client, nil
}

var (
	_ sandbox.Session    = (*session)(nil)
	_ sandbox.JobRunner  = (*session)(nil)
	_ sandbox.FileSystem = (*session)(nil)
	_ sandbox.Terminal   = (*session)(nil)
)

// askWatcher passes a start script's stdout through, calling onAsk once if it begins with
// sendHelper.
type askWatcher struct {
	w      io.Writer
	onAsk  func()
	prefix []byte
	done   bool
}

func (a *askWatcher) Write(p []byte) (int, error) {
	if !a.done {
		need := len(sendHelper) - len(a.prefix)
		a.prefix = append(a.prefix, p[:min(need, len(p))]...)
		switch {
		case string(a.prefix) == sendHelper:
			a.done = true
			a.onAsk()
		case !strings.HasPrefix(sendHelper, string(a.prefix)):
			a.done = true
		}
	}
	return a.w.Write(p)
}
