package agentbin

import (
	"context"
	"errors"
	"strings"
	"testing"
)

func TestStart(t *testing.T) {
	errBoom := errors.New("boom")
	for _, tc := range []struct {
		name        string
		first       error
		second      error
		installErr  error
		wantInstall bool
		wantTries   int
		wantErr     error
	}{
		{"started", nil, nil, nil, false, 1, nil},
		{"missing, then started", &StartError{Code: ExitMissing, Err: errBoom}, nil, nil, true, 2, nil},
		{"corrupt in-band upload, then started", &StartError{Code: ExitCorrupt, Err: errBoom}, nil, nil, true, 2, nil},
		{"missing twice", &StartError{Code: ExitMissing, Err: errBoom}, &StartError{Code: ExitMissing, Err: errBoom}, nil, true, 2, errBoom},
		{"missing, install fails", &StartError{Code: ExitMissing, Err: errBoom}, nil, errors.New("disk full"), true, 1, nil},
		{"not executable", &StartError{Code: ExitNotExec, Err: errBoom}, nil, nil, false, 1, errBoom},
		{"not a start error", errBoom, nil, nil, false, 1, errBoom},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tries, installed := 0, false
			got, err := Start(t.Context(), func(context.Context) (int, error) {
				tries++
				e := tc.first
				if tries > 1 {
					e = tc.second
				}
				if e != nil {
					return 0, e
				}
				return 42, nil
			}, func(context.Context) error {
				installed = true
				return tc.installErr
			})
			if tries != tc.wantTries || installed != tc.wantInstall {
				t.Errorf("Start(%s): %d tries, installed %v; want %d, %v", tc.name, tries, installed, tc.wantTries, tc.wantInstall)
			}
			switch {
			case tc.installErr != nil:
				if err != tc.installErr {
					t.Errorf("Start(%s) = %v; want the install's error", tc.name, err)
				}
			case tc.wantErr != nil:
				if !errors.Is(err, tc.wantErr) {
					t.Errorf("Start(%s) = %v; want %v", tc.name, err, tc.wantErr)
				}
			case err != nil || got != 42:
				t.Errorf("Start(%s) = %d, %v; want 42", tc.name, got, err)
			}
		})
	}
}

// A cancelled start does not go on to upload.
func TestStartCancelled(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	_, err := Start(ctx, func(context.Context) (int, error) {
		cancel()
		return 0, &StartError{Code: ExitMissing, Err: context.Canceled}
	}, func(context.Context) error {
		t.Error("install ran after the start was cancelled")
		return nil
	})
	if !errors.Is(err, context.Canceled) {
		t.Errorf("Start = %v; want context.Canceled", err)
	}
}

func TestStartErrorExplains(t *testing.T) {
	for _, code := range []int{ExitCorrupt, ExitNoRaw, ExitMissing, ExitSetup, ExitNotExec, ExitNotFound} {
		e := &StartError{Code: code, Output: "last words", Err: errors.New("helper did not start")}
		msg := e.Error()
		if !strings.Contains(msg, Explain(code)) || !strings.Contains(msg, "last words") || Explain(code) == Explain(1) {
			t.Errorf("StartError{%d}.Error() = %q; want its own explanation and the output", code, msg)
		}
	}
	for code, want := range map[int]bool{ExitSetup: true, ExitNotExec: true, ExitNotFound: true, ExitMissing: false, ExitCorrupt: false} {
		if got := (&StartError{Code: code, Err: errors.New("x")}).CannotRun(); got != want {
			t.Errorf("StartError{%d}.CannotRun() = %v; want %v", code, got, want)
		}
	}
}

func TestGoArch(t *testing.T) {
	for in, want := range map[string]string{"x86_64": "amd64", "amd64": "amd64", "aarch64": "arm64", "arm64": "arm64", "armv8l": "arm64", "riscv64": "", "": ""} {
		if got := GoArch(in); got != want {
			t.Errorf("GoArch(%q) = %q; want %q", in, got, want)
		}
	}
}
