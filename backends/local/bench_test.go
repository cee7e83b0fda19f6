package local_test

import (
	"context"
	"os/exec"
	"testing"

	"github.com/hermes-sandbox/hermes-sandbox/backends/local"
	"github.com/hermes-sandbox/hermes-sandbox/config"
	"github.com/hermes-sandbox/hermes-sandbox/sandbox"
)

// BenchmarkExecTrue is the per-command cost of `true` in a warm local session.
func BenchmarkExecTrue(b *testing.B) {
	for _, shell := range []config.Shell{config.ShellSh, config.ShellBash} {
		b.Run(string(shell), func(b *testing.B) {
			cfg := config.NewConfig()
			cfg.Terminal.Shell = shell
			be, err := local.New(sandbox.FactoryOptions{Config: cfg, StateDir: b.TempDir(), Environ: []string{"PATH=/usr/bin:/bin"}})
			if err != nil {
				b.Fatal(err)
			}
			defer be.Close()
			sess, err := be.Open(context.Background(), "bench")
			if err != nil {
				b.Fatal(err)
			}
			defer sess.Close()
			ctx := context.Background()
			for i := 0; i < 5; i++ {
				sess.Exec(ctx, sandbox.Command{Script: "true"})
			}
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				res, err := sess.Exec(ctx, sandbox.Command{Script: "true"})
				if err != nil || res.ExitCode != 0 {
					b.Fatal(res, err)
				}
			}
		})
	}
}

// BenchmarkForkExecBaseline is plain fork/exec of `sh -c true`, for comparison.
func BenchmarkForkExecBaseline(b *testing.B) {
	for i := 0; i < b.N; i++ {
		if err := exec.Command("/bin/sh", "-c", "true").Run(); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkExecScript is the cost of a script that needs the shell (`:` is a builtin).
func BenchmarkExecScript(b *testing.B) {
	for _, shell := range []config.Shell{config.ShellSh, config.ShellBash} {
		b.Run(string(shell), func(b *testing.B) {
			cfg := config.NewConfig()
			cfg.Terminal.Shell = shell
			be, err := local.New(sandbox.FactoryOptions{Config: cfg, StateDir: b.TempDir(), Environ: []string{"PATH=/usr/bin:/bin"}})
			if err != nil {
				b.Fatal(err)
			}
			defer be.Close()
			sess, err := be.Open(context.Background(), "bench")
			if err != nil {
				b.Fatal(err)
			}
			defer sess.Close()
			ctx := context.Background()
			for i := 0; i < 5; i++ {
				sess.Exec(ctx, sandbox.Command{Script: ":"})
			}
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				res, err := sess.Exec(ctx, sandbox.Command{Script: ":"})
				if err != nil || res.ExitCode != 0 {
					b.Fatal(res, err)
				}
			}
		})
	}
}
