//go:build unix

package cli

import (
	"context"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hermes-sandbox/hermes-sandbox/backends/all"
	"github.com/hermes-sandbox/hermes-sandbox/internal/owner"
	"github.com/hermes-sandbox/hermes-sandbox/internal/testenv"
	"github.com/hermes-sandbox/hermes-sandbox/internal/testenv/dockerimage"
)

// BenchmarkOwnerCall times one `exec -- true` handed to a warm session owner in this process,
// without the client's process start: what an owner adds per call. Compare the sub-benchmark
// "in-process", the same call run the way keep_alive 0 runs it, minus process start.
func BenchmarkOwnerCall(b *testing.B) {
	b.Run("local", func(b *testing.B) { benchOwnerCall(b, "HERMES_SANDBOX_TERMINAL_BACKEND=local") })
	b.Run("docker", func(b *testing.B) {
		img := dockerimage.Busybox(b, "the docker owner benchmark", testenv.DefaultRootfs)
		benchOwnerCall(b, "HERMES_SANDBOX_TERMINAL_BACKEND=docker", "HERMES_SANDBOX_DOCKER_IMAGE="+img,
			"HERMES_SANDBOX_DOCKER_USER=", "HERMES_SANDBOX_DOCKER_CWD=/workspace")
		b.Cleanup(func() {
			RunWith(context.Background(), []string{"sessions", "rm", "--all"}, nil, io.Discard, io.Discard, dockerEnv)
		})
	})
}

var dockerEnv []string

func benchOwnerCall(b *testing.B, extra ...string) {
	dir := b.TempDir()
	environ := append([]string{"HOME=" + dir, "PATH=/usr/local/bin:/usr/bin:/bin",
		"XDG_CONFIG_HOME=" + filepath.Join(dir, "config"), "XDG_STATE_HOME=" + filepath.Join(dir, "state"),
		"HERMES_SANDBOX_TERMINAL_CWD=" + dir}, extra...)
	dockerEnv = environ
	for _, audit := range []string{"true", "false"} {
		env := append(environ[:len(environ):len(environ)], "HERMES_SANDBOX_AUDIT_ENABLED="+audit)
		b.Run("owner/audit="+audit, func(b *testing.B) {
			a := &app{stdin: strings.NewReader(""), stdout: io.Discard, stderr: os.Stderr, environ: env, registry: all.Backends()}
			key, err := owner.CurrentKey(env)
			if err != nil {
				b.Fatal(err)
			}
			sock := filepath.Join(b.TempDir(), "o.sock")
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan error, 1)
			go func() { done <- a.serveOwner(ctx, sock, time.Minute) }()
			defer func() { cancel(); <-done }()
			h := owner.Hello{Args: []string{"exec", "--", "true"}, Environ: env, Key: key}
			// The client's stdin is /dev/null, as for most agents' tool calls.
			null, err := os.Open(os.DevNull)
			if err != nil {
				b.Fatal(err)
			}
			defer null.Close()
			call := func() {
				code, err := owner.Forward(sock, h, null, io.Discard, os.Stderr)
				if err != nil || code != 0 {
					ents, _ := os.ReadDir(filepath.Dir(sock))
					var names []string
					for _, e := range ents {
						names = append(names, e.Name())
					}
					b.Fatalf("call: %d %v (dir: %v, at %s)", code, err, names, time.Now().Format("05.000"))
				}
			}
			deadline := time.Now().Add(10 * time.Second)
			for {
				if _, err := os.Stat(sock); err == nil {
					break
				}
				if time.Now().After(deadline) {
					b.Fatal("owner did not listen")
				}
				time.Sleep(5 * time.Millisecond)
			}
			call()
			b.ResetTimer()
			for range b.N {
				call()
			}
		})
		b.Run("in-process/audit="+audit, func(b *testing.B) {
			for range b.N {
				if code := RunWith(context.Background(), []string{"exec", "--", "true"}, strings.NewReader(""), io.Discard, os.Stderr, env); code != 0 {
					b.Fatalf("exit %d", code)
				}
			}
		})
	}
}
