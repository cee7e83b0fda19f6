package gate_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/hermes-sandbox/hermes-sandbox/audit"
	"github.com/hermes-sandbox/hermes-sandbox/gate"
	"github.com/hermes-sandbox/hermes-sandbox/sandbox"
)

// orderSink wraps the real log and notes, when each intent is written, whether the command's
// side effect already exists.
type orderSink struct {
	*audit.Log
	marker     string
	seenBefore []bool
}

func (o *orderSink) Intent(ctx context.Context, r audit.Record) (int64, error) {
	_, err := os.Stat(o.marker)
	o.seenBefore = append(o.seenBefore, err == nil)
	return o.Log.Intent(ctx, r)
}

func TestIntentIsWrittenBeforeTheBackendRuns(t *testing.T) {
	marker := filepath.Join(t.TempDir(), "ran")
	var sink *orderSink
	e := newEnv(t, nil)
	sink = &orderSink{Log: e.log, marker: marker}
	e2 := newEnv(t, func(o *gate.Options) { o.Audit = sink })
	res, err := e2.session(t).Exec(context.Background(), sandbox.Command{Script: "touch " + marker})
	if err != nil || res.ExitCode != 0 {
		t.Fatal(res, err)
	}
	if len(sink.seenBefore) != 1 || sink.seenBefore[0] {
		t.Fatalf("intents written = %v (true = the command had already run); want one, before it ran", sink.seenBefore)
	}
	rs := e.records(t)
	if len(rs) != 2 || rs[0].Type != audit.TypeIntent || rs[1].Type != audit.TypeResult || rs[1].Intent != rs[0].Seq {
		t.Errorf("records = %+v; want an intent and its result", rs)
	}
}

func TestIntentFailureRefusesTheCall(t *testing.T) {
	cause := &os.PathError{Op: "write", Path: "/full/audit.log", Err: syscall.ENOSPC}
	for _, tool := range []string{"exec", "write_file"} {
		t.Run(tool, func(t *testing.T) {
			marker := filepath.Join(t.TempDir(), "ran")
			e := newEnv(t, func(o *gate.Options) {
				o.Audit = audit.Unavailable("/full/audit.log", cause, audit.OnFailureRefuse)
			})
			s := e.session(t)
			var err error
			if tool == "exec" {
				_, err = s.Exec(context.Background(), sandbox.Command{Script: "touch " + marker})
			} else {
				err = s.(sandbox.FileSystem).WriteFile(context.Background(), marker, []byte("x"), 0o600)
			}
			re := refusal(t, err, "audit-failed")
			if re.ExitCode() != sandbox.ExitNotExec {
				t.Errorf("ExitCode() = %d; want %d", re.ExitCode(), sandbox.ExitNotExec)
			}
			for _, want := range []string{"/full/audit.log", "disk full", "did not run", "audit.on_failure warn"} {
				if !strings.Contains(re.Error(), want) {
					t.Errorf("refusal %q does not say %q", re.Error(), want)
				}
			}
			if _, err := os.Stat(marker); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("the call ran although its intent was not recorded (stat: %v)", err)
			}
		})
	}
}

func TestIntentFailureWarnRunsAndSaysSo(t *testing.T) {
	marker := filepath.Join(t.TempDir(), "ran")
	cause := &os.PathError{Op: "open", Path: "/ro/audit.log", Err: syscall.EACCES}
	e := newEnv(t, func(o *gate.Options) {
		o.Audit = audit.Unavailable("/ro/audit.log", cause, audit.OnFailureWarn)
	})
	res, err := e.session(t).Exec(context.Background(), sandbox.Command{Script: "touch " + marker})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(marker); err != nil {
		t.Errorf("audit.on_failure warn did not run the command: %v", err)
	}
	if !strings.Contains(res.Stderr, "WARNING") || !strings.Contains(res.Stderr, "permission denied") ||
		!strings.Contains(res.Stderr, "/ro/audit.log") {
		t.Errorf("stderr = %q; want a loud warning naming the log and the cause", res.Stderr)
	}
}
