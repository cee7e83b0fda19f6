package kubetest

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"sync/atomic"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/moby/moby/api/pkg/stdcopy"
	"github.com/moby/moby/client"
	"google.golang.org/grpc/codes"
	grpcstatus "google.golang.org/grpc/status"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/cri-streaming/pkg/streaming/remotecommand"
	utilexec "k8s.io/utils/exec"
)

// runningContainer returns the docker container of the pod's container, or the error the
// kubelet gives when it runs none: "container not found" (the endpoint answers 500 with it).
func (n *Node) runningContainer(ctx context.Context, pod *corev1.Pod, container string) (string, error) {
	n.mu.Lock()
	st := n.byUID[pod.UID]
	var id string
	if st != nil && !st.gone && !st.killed && st.container == container {
		id = st.containerID
	}
	n.mu.Unlock()
	if id == "" {
		return "", fmt.Errorf("container not found (%q)", container)
	}
	ins, err := n.docker.ContainerInspect(ctx, id, client.ContainerInspectOptions{})
	if err != nil {
		return "", fmt.Errorf("container not found (%q): %w", container, err)
	}
	if !ins.Container.State.Running {
		return "", grpcstatus.Errorf(codes.FailedPrecondition, "container %s is not in running state", id)
	}
	return id, nil
}

// dockerExec runs an exec's command in a docker container through the Engine API; it is the
// container runtime behind remotecommand.ServeExec.
type dockerExec struct {
	cli         *client.Client
	containerID string
	served      *atomic.Int64 // counts the execs whose streams were set up
}

var _ remotecommand.Executor = (*dockerExec)(nil)

// ExecInContainer runs cmd with the streams the client opened. It returns when the command
// ends (a non-zero exit is a utilexec.CodeExitError, which ServeExec reports as the exit code
// the client's ExitError carries) or when ctx ends (the client went away or the node stopped):
// then the exec's input is closed and its output no longer read.
func (e *dockerExec) ExecInContainer(ctx context.Context, _, _, _ string, cmd []string, in io.Reader, out, stderr io.WriteCloser,
	tty bool, resize <-chan remotecommand.TerminalSize, _ time.Duration) error {
	e.served.Add(1)
	ex, err := e.cli.ExecCreate(ctx, e.containerID, client.ExecCreateOptions{
		Cmd: cmd, TTY: tty, AttachStdin: in != nil, AttachStdout: out != nil, AttachStderr: stderr != nil && !tty,
	})
	if err != nil {
		return fmt.Errorf("failed to exec in container: failed to create exec: %w", err)
	}
	hr, err := e.cli.ExecAttach(ctx, ex.ID, client.ExecAttachOptions{TTY: tty})
	if err != nil {
		return fmt.Errorf("failed to exec in container: failed to start exec %.12s: %w", ex.ID, err)
	}
	defer hr.Close()

	var wg sync.WaitGroup
	defer wg.Wait()
	stop := make(chan struct{})
	defer close(stop)
	if resize != nil {
		wg.Go(func() {
			for {
				select {
				case size, ok := <-resize:
					if !ok {
						return
					}
					e.cli.ExecResize(ctx, ex.ID, client.ExecResizeOptions{Height: uint(size.Height), Width: uint(size.Width)})
				case <-stop:
					return
				}
			}
		})
	}
	if in != nil {
		// Not waited for: it ends when the client's stdin stream ends or closes, which
		// ServeExec's closing of the connection guarantees.
		go func() {
			io.Copy(hr.Conn, in)
			hr.CloseWrite()
		}()
	}
	// When ctx ends, close the exec's input and stop reading its output.
	wg.Go(func() {
		select {
		case <-ctx.Done():
			hr.CloseWrite()
			hr.Close()
		case <-stop:
		}
	})

	stdout, errOut := io.Writer(io.Discard), io.Writer(io.Discard)
	if out != nil {
		stdout = out
	}
	if stderr != nil {
		errOut = stderr
	}
	if tty {
		_, err = io.Copy(stdout, hr.Reader)
	} else {
		_, err = stdcopy.StdCopy(stdout, errOut, hr.Reader)
	}
	if ctx.Err() != nil {
		return ctx.Err()
	}
	if err != nil && !errors.Is(err, io.EOF) {
		return fmt.Errorf("failed to exec in container: read the output of exec %.12s: %w", ex.ID, err)
	}
	code, err := e.exitCode(ctx, ex.ID)
	if err != nil {
		return err
	}
	if code != 0 {
		return utilexec.CodeExitError{Err: fmt.Errorf("command terminated with exit code %d", code), Code: code}
	}
	return nil
}

// exitCode waits (briefly: the output has ended) for the exec to be reported finished.
func (e *dockerExec) exitCode(ctx context.Context, id string) (int, error) {
	deadline := time.Now().Add(10 * time.Second)
	for {
		ins, err := e.cli.ExecInspect(ctx, id, client.ExecInspectOptions{})
		if err != nil {
			if cerrdefs.IsNotFound(err) {
				return 0, fmt.Errorf("failed to exec in container: the container went away: %w", err)
			}
			return 0, fmt.Errorf("failed to exec in container: inspect exec %.12s: %w", id, err)
		}
		if !ins.Running {
			return ins.ExitCode, nil
		}
		if time.Now().After(deadline) {
			return 0, fmt.Errorf("failed to exec in container: exec %.12s still runs 10s after its output ended", id)
		}
		select {
		case <-ctx.Done():
			return 0, ctx.Err()
		case <-time.After(5 * time.Millisecond):
		}
	}
}
