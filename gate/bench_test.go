package gate_test

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/hermes-sandbox/hermes-sandbox/audit"
	"github.com/hermes-sandbox/hermes-sandbox/backends/local"
	"github.com/hermes-sandbox/hermes-sandbox/config"
	"github.com/hermes-sandbox/hermes-sandbox/gate"
	"github.com/hermes-sandbox/hermes-sandbox/sandbox"
)

// nopBackend runs nothing, so the benchmark measures the gate alone.
type nopBackend struct{}

func (nopBackend) Name() string                       { return "nop" }
func (nopBackend) Capabilities() sandbox.Capabilities { return sandbox.Capabilities{Isolation: "none"} }
func (nopBackend) Close() error                       { return nil }
func (nopBackend) Open(ctx context.Context, name string) (sandbox.Session, error) {
	return nopSession(name), nil
}

type nopSession string

func (s nopSession) Name() string { return string(s) }
func (s nopSession) Close() error { return nil }
func (s nopSession) Exec(ctx context.Context, cmd sandbox.Command) (*sandbox.Result, error) {
	return &sandbox.Result{Stdout: "ok\n", StdoutBytes: 3}, nil
}

// BenchmarkGate is what the gate adds to one command: classification, the switches and the
// cap, and (with audit) one durable, hash-chained audit record.
func BenchmarkGate(b *testing.B) {
	for _, withAudit := range []bool{false, true} {
		name := "classify-only"
		if withAudit {
			name = "with-audit-fsync"
		}
		b.Run(name, func(b *testing.B) {
			opts := gate.Options{Mode: config.ApprovalDeny, Tools: config.NewConfig().Tools}
			if withAudit {
				log, err := audit.Open(filepath.Join(b.TempDir(), "audit.log"), audit.Options{Level: audit.LevelFull})
				if err != nil {
					b.Fatal(err)
				}
				defer log.Close()
				opts.Audit = log
			}
			s, _ := gate.Wrap(nopBackend{}, opts).Open(context.Background(), "b")
			ctx := context.Background()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				if _, err := s.Exec(ctx, sandbox.Command{Script: "git status --short && ls -la src/"}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkGateLocalSession is the gate's cost on a real local session, where it asks the
// helper for the session's state before classifying (raw = the same session ungated).
func BenchmarkGateLocalSession(b *testing.B) {
	dir := b.TempDir()
	cfg := config.NewConfig()
	cfg.Terminal.Cwd = dir
	for _, gated := range []bool{false, true} {
		name := "raw"
		if gated {
			name = "gated"
		}
		b.Run(name, func(b *testing.B) {
			lb, err := local.New(cfg.BackendOptions(sandbox.FactoryOptions{StateDir: filepath.Join(dir, "state-"+name),
				Environ: []string{"PATH=/usr/bin:/bin", "HOME=" + dir}}))
			if err != nil {
				b.Fatal(err)
			}
			be := lb
			if gated {
				be = gate.Wrap(lb, gate.Options{Mode: config.ApprovalDeny, Tools: cfg.Tools})
			}
			s, err := be.Open(context.Background(), "b")
			if err != nil {
				b.Fatal(err)
			}
			defer s.Close()
			ctx := context.Background()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				if _, err := s.Exec(ctx, sandbox.Command{Script: "true"}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
