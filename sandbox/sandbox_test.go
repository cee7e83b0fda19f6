package sandbox

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestShellQuoteRoundTripsThroughSh(t *testing.T) {
	words := []string{"", "plain", "a b", "it's", `"dq"`, "$(touch x)", "`x`", "a\nb", "tab\there", "~", "*", "if",
		"a=b", "-n", "\\", "'", "''", "é€", "\x01ctl", string([]byte{0xff, 'x'})}
	var script strings.Builder
	script.WriteString("printf '%s\\000'")
	for _, w := range words {
		script.WriteString(" " + ShellQuote(w))
	}
	out, err := exec.Command("/bin/sh", "-c", script.String()).Output()
	if err != nil {
		t.Fatalf("sh: %v (script %q)", err, script.String())
	}
	got := strings.Split(strings.TrimSuffix(string(out), "\x00"), "\x00")
	if len(got) != len(words) {
		t.Fatalf("sh read %d words %q; want %d", len(got), got, len(words))
	}
	for i := range words {
		if got[i] != words[i] {
			t.Errorf("ShellQuote(%q) = %s, which sh reads as %q", words[i], ShellQuote(words[i]), got[i])
		}
	}
}

func TestWithKind(t *testing.T) {
	cause := &fs.PathError{Op: "open", Path: "/x", Err: fs.ErrNotExist}
	err := WithKind(ErrNotFound, cause)
	var pe *fs.PathError
	if err.Error() != cause.Error() || !errors.Is(err, ErrNotFound) || !errors.Is(err, fs.ErrNotExist) || !errors.As(err, &pe) {
		t.Errorf("WithKind = %q; want the cause's message, matching the kind and the cause", err)
	}
	if errors.Is(err, ErrDenied) {
		t.Errorf("WithKind matches an unrelated sentinel")
	}
}

func TestWithHint(t *testing.T) {
	cause := &fs.PathError{Op: "open", Path: "/x", Err: fs.ErrPermission}
	err := WithHint(ErrDenied, cause, "ask for access")
	var pe *fs.PathError
	if want := cause.Error() + ": ask for access"; err.Error() != want {
		t.Errorf("WithHint = %q; want %q", err, want)
	}
	if !errors.Is(err, ErrDenied) || !errors.Is(err, fs.ErrPermission) || !errors.As(err, &pe) || !HasKind(err) {
		t.Errorf("WithHint(%q) does not match its kind and its cause", err)
	}
	if HasKind(cause) || HasKind(context.Canceled) {
		t.Errorf("HasKind of an error without a sentinel = true; want false")
	}
}

func TestWrap(t *testing.T) {
	classified := errors.New("x")
	classify := func(error) error { return WithKind(ErrNotFound, classified) }
	if Wrap("b", "op", "id", nil, classify) != nil {
		t.Errorf("Wrap(nil) != nil")
	}
	err := Wrap("b", "op", "id", classified, classify)
	if err.Error() != "b: op id: x" || !errors.Is(err, ErrNotFound) {
		t.Errorf("Wrap = %q (not found: %v); want \"b: op id: x\", classified", err, errors.Is(err, ErrNotFound))
	}
	if again := Wrap("b", "other", "", err, classify); again != err {
		t.Errorf("Wrap of its own *Error = %q; want it unchanged", again)
	}
	if other := Wrap("c", "op", "", err, nil); other.Error() != "c: op: b: op id: x" {
		t.Errorf("Wrap of another backend's *Error = %q; want it wrapped", other)
	}
	ctxErr := fmt.Errorf("call: %w", context.Canceled)
	if err := Wrap("b", "op", "", ctxErr, classify); errors.Is(err, ErrNotFound) || !errors.Is(err, context.Canceled) {
		t.Errorf("Wrap(cancelled) = %q; want it unclassified", err)
	}
}

func TestScope(t *testing.T) {
	a, err := NewScope(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	b, _ := NewScope(t.TempDir())
	if !filepath.IsAbs(a.Dir()) {
		t.Errorf("Scope.Dir() = %q; want an absolute path", a.Dir())
	}
	if a.ID() == b.ID() || len(a.ID()) != 8 {
		t.Errorf("scopes of two state directories = %q, %q; want distinct 8-character ids", a.ID(), b.ID())
	}
	name := a.Name("s1")
	if name != "hermes-"+a.ID()+"-s1" || a.Session(name) != "s1" || a.Session("/"+name) != "s1" {
		t.Errorf("Name/Session do not round trip: %q → %q", name, a.Session(name))
	}
	for _, other := range []string{b.Name("s1"), "hermes-pool-" + a.ID() + "-x", "hermes-" + a.ID() + "-", "unrelated"} {
		if s := a.Session(other); s != "" {
			t.Errorf("Session(%q) = %q; want none", other, s)
		}
	}
	if _, err := NewScope(""); !errors.Is(err, ErrInvalidConfig) {
		t.Errorf("NewScope(\"\") = %v; want ErrInvalidConfig", err)
	}
}

func TestFactoryOptionsPassthrough(t *testing.T) {
	o := FactoryOptions{Environ: []string{"A=1", "B=2", "A=3", "C="}, EnvPassthrough: []string{"B", "A", "MISSING", "C"}}
	got := strings.Join(o.Passthrough("X", "B"), " ")
	if got != "B=2 A=3 C=" {
		t.Errorf("Passthrough = %q; want the listed names present in Environ, once each, last value wins", got)
	}
	if o.IsExplicit("any") {
		t.Errorf("IsExplicit with no Explicit func = true")
	}
	o.Explicit = func(k string) bool { return k == "x.y" }
	if !o.IsExplicit("x.y") || o.IsExplicit("x.z") {
		t.Errorf("IsExplicit does not follow Explicit")
	}
}

type fakeBackend struct{ Backend }

func TestRegistry(t *testing.T) {
	r := NewRegistry[string]()
	var gotCfg string
	r.Register("b", func(cfg string, o FactoryOptions) (Backend, error) { gotCfg = cfg; return fakeBackend{}, nil })
	r.Register("a", func(string, FactoryOptions) (Backend, error) { return nil, errors.New("a fails") })
	if strings.Join(r.Names(), ",") != "a,b" || !r.Has("a") || r.Has("c") {
		t.Errorf("Names = %v", r.Names())
	}
	if _, err := r.New("b", "section", FactoryOptions{}); err != nil || gotCfg != "section" {
		t.Errorf("New(b) = %v, config %q; want the factory called with the configuration", err, gotCfg)
	}
	if _, err := r.New("nope", "", FactoryOptions{}); !errors.Is(err, ErrInvalidConfig) || !strings.Contains(err.Error(), "a, b") {
		t.Errorf("New(unknown) = %v; want ErrInvalidConfig listing a, b", err)
	}
	defer func() {
		if recover() == nil {
			t.Errorf("a duplicate registration did not panic")
		}
	}()
	r.Register("a", func(string, FactoryOptions) (Backend, error) { return nil, nil })
}

func TestSleep(t *testing.T) {
	if err := Sleep(t.Context(), time.Millisecond); err != nil {
		t.Errorf("Sleep = %v", err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	start := time.Now()
	if err := Sleep(ctx, time.Hour); !errors.Is(err, context.Canceled) || time.Since(start) > time.Minute {
		t.Errorf("Sleep on an ended context = %v after %s; want context.Canceled at once", err, time.Since(start))
	}
}

type nilBackend struct{ Backend }

func TestAsBackend(t *testing.T) {
	if b, err := AsBackend((*nilBackend)(nil), ErrInvalidConfig); b != nil || err != ErrInvalidConfig {
		t.Errorf("AsBackend(nil, err) = %v, %v; want a nil Backend and the error", b, err)
	}
	nb := &nilBackend{}
	if b, err := AsBackend(nb, nil); b != Backend(nb) || err != nil {
		t.Errorf("AsBackend(b, nil) = %v, %v; want b", b, err)
	}
}

func TestFactoryOptionsForRemoteSandboxes(t *testing.T) {
	o := FactoryOptions{Environ: []string{"A=1", "B=x=y", "A=2"}, EnvPassthrough: []string{"A", "B", "C", "A"}, Cwd: "/srv/w"}
	if got := o.PassthroughMap(); len(got) != 2 || got["A"] != "2" || got["B"] != "x=y" {
		t.Errorf("PassthroughMap() = %v; want A=2 B=x=y", got)
	}
	if got := o.RemoteCwd("/workspace"); got != "/workspace" {
		t.Errorf("RemoteCwd without terminal.cwd set = %q; want the default", got)
	}
	o.Explicit = func(key string) bool { return key == "terminal.cwd" }
	if got := o.RemoteCwd("/workspace"); got != "/srv/w" {
		t.Errorf("RemoteCwd with terminal.cwd = /srv/w = %q; want /srv/w", got)
	}
	if o.Cwd = "rel"; o.RemoteCwd("/workspace") != "/workspace" {
		t.Errorf("RemoteCwd with a relative terminal.cwd = %q; want the default", o.RemoteCwd("/workspace"))
	}
}

func TestCheckOpen(t *testing.T) {
	bad := errors.New("bad config")
	for _, c := range []struct {
		name     string
		closed   bool
		validate func() error
		want     error
	}{
		{"s1", false, nil, nil},
		{"s1", false, func() error { return nil }, nil},
		{"../x", true, func() error { return bad }, ErrInvalidConfig},
		{"s1", true, func() error { return bad }, ErrClosed},
		{"s1", false, func() error { return bad }, bad},
	} {
		err := CheckOpen("b", c.name, c.closed, c.validate)
		var se *Error
		if !errors.Is(err, c.want) || c.want == nil && err != nil || c.want != nil && (!errors.As(err, &se) || se.Op != "open" || se.ID != c.name) {
			t.Errorf("CheckOpen(%q, closed %v) = %v; want \"b: open %s: …\" matching %v", c.name, c.closed, err, c.name, c.want)
		}
	}
}

func TestCIDREgress(t *testing.T) {
	cidrs := []string{"10.0.0.0/8", "192.0.2.1/32"}
	r := CIDREgress("Acme", "acme.allow", cidrs)
	want := "provider-enforced, by CIDR only: Acme lets the sandbox reach 10.0.0.0/8, 192.0.2.1/32 (acme.allow); " +
		"host names cannot be allowed by name, so terminal.egress_allow is not available here"
	if r.Status != EgressProviderEnforced || r.Detail != want || r.AppliesShared || len(r.Allow) != 2 {
		t.Errorf("CIDREgress = %+v; want provider-enforced, %q, not applying terminal.egress_allow", r, want)
	}
	if r.Allow[0] = "x"; cidrs[0] != "10.0.0.0/8" {
		t.Errorf("CIDREgress shares its Allow with the caller's list")
	}
}
