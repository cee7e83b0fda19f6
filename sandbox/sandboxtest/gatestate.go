package sandboxtest

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/hermes-sandbox/hermes-sandbox/config"
	"github.com/hermes-sandbox/hermes-sandbox/gate"
	"github.com/hermes-sandbox/hermes-sandbox/policy"
	"github.com/hermes-sandbox/hermes-sandbox/sandbox"
)

// testGateWithState runs, through gate.Wrap on this backend, the two-step ways around a gate
// that judges each command on its own text: a directory set by an earlier command, a script
// written in one call and run in the next, a changed PATH or BASH_ENV. Every payload is
// harmless if it ever ran (it appends to a stand-in for the tool's config in a scratch
// directory), and each case checks the stand-in afterwards, so the section fails when the gate
// is missing, not only when it answers wrongly.
func (s *suite) testGateWithState(t *testing.T) {
	raw := s.newSession(t)
	work := fmt.Sprintf("%s/hermes-gws-%d", s.opts.Scratch, time.Now().UnixNano())
	prot := work + "/protected"
	target := prot + "/config.yaml"
	payload := "echo pwned >> " + target
	setup := strings.Join([]string{
		"mkdir -p " + prot + " " + work + "/bin",
		"echo original > " + target,
		"printf '%s\\n' '" + payload + "' > " + work + "/two-step.sh",
		"cp " + work + "/two-step.sh " + work + "/bin/ls",
		"chmod +x " + work + "/two-step.sh " + work + "/bin/ls",
		"echo " + target + " > " + work + "/list",
		// BASH_ENV runs before every later command of the session, the suite's own included:
		// this one acts only when the command under test arms it.
		"printf '%s\\n' 'if [ -n \"$HERMES_GWS_ARMED\" ]; then " + payload + "; fi' > " + work + "/armed.sh",
	}, " && ")
	if res := s.sh(t, raw, setup); res.ExitCode != 0 {
		t.Fatalf("setup = %d %q", res.ExitCode, res.Stderr)
	}
	t.Cleanup(func() {
		_, _ = raw.Exec(context.WithoutCancel(context.Background()), sandbox.Command{Script: "rm -rf " + work})
	})
	// The gate wraps this very session, so the steps it does not see (made on raw) and the
	// commands it judges share one shell state, as an agent's calls do. Closing the gated
	// session would close raw, so it is left to raw's own cleanup.
	g := gate.Wrap(oneSession{s.b, raw}, gate.Options{Mode: config.ApprovalDeny, Tools: config.NewConfig().Tools,
		Classifier: policy.New(policy.Options{WorkDir: work, ProtectedPaths: []string{prot}})})
	gs, err := g.Open(s.ctx(t), raw.Name())
	if err != nil {
		t.Fatal(err)
	}
	_, stateful := any(raw).(gate.ShellStater)
	// The gate first sees the session with its usual PATH.
	if _, err := gs.Exec(s.ctx(t), sandbox.Command{Script: "cd " + work}); err != nil {
		t.Fatalf("a plain cd through the gate: %v", err)
	}

	cases := []struct {
		name  string
		prep  string // run on the raw session first: the step the gate does not see
		cmd   sandbox.Command
		want  string // the refusal reason
		state bool   // needs the session's state (a backend without it refuses for another reason)
	}{
		{name: "relative path after cd", prep: "cd " + prot, cmd: sandbox.Command{Script: "echo pwned >> config.yaml"}, want: "hardline", state: true},
		{name: "dot-dot after cd", prep: "cd " + work + "/bin", cmd: sandbox.Command{Script: "echo pwned >> ../protected/config.yaml"}, want: "hardline", state: true},
		{name: "command Dir", cmd: sandbox.Command{Script: "echo pwned >> config.yaml", Dir: prot}, want: "hardline"},
		{name: "sh FILE", cmd: sandbox.Command{Script: "sh " + work + "/two-step.sh"}, want: "hardline"},
		{name: "source FILE", cmd: sandbox.Command{Script: ". " + work + "/two-step.sh"}, want: "hardline"},
		{name: "./FILE", prep: "cd " + work, cmd: sandbox.Command{Script: "./two-step.sh"}, want: "hardline", state: true},
		{name: "xargs < FILE", cmd: sandbox.Command{Script: "xargs -I{} sh -c 'echo pwned >> {}' < " + work + "/list"}, want: "hardline"},
		{name: "export PATH", cmd: sandbox.Command{Script: "export PATH=" + work + "/bin:$PATH"}, want: "denied"},
		{name: "PATH in Command.Env", cmd: sandbox.Command{Script: "ls", Env: map[string]string{"PATH": work + "/bin:/usr/bin:/bin"}}, want: "hardline"},
		{name: "program on a changed PATH", prep: "export PATH=" + work + "/bin:$PATH", cmd: sandbox.Command{Script: "ls"}, want: "hardline", state: true},
		{name: "BASH_ENV", prep: "export PATH=/usr/local/bin:/usr/bin:/bin BASH_ENV=" + work + "/armed.sh",
			cmd: sandbox.Command{Script: "echo hi", Env: map[string]string{"HERMES_GWS_ARMED": "1"}}, want: "hardline", state: true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if c.prep != "" {
				if res := s.sh(t, raw, c.prep); res.ExitCode != 0 {
					t.Fatalf("prep %q = %d %q", c.prep, res.ExitCode, res.Stderr)
				}
			}
			_, err := gs.Exec(s.ctx(t), c.cmd)
			var re *gate.RefusedError
			switch {
			case !errors.As(err, &re):
				t.Errorf("Exec(%q) error = %v; want a %s refusal", c.cmd.Script, err, c.want)
			case re.Reason != c.want && (stateful || !c.state):
				t.Errorf("Exec(%q) refused for %q (%v); want %s", c.cmd.Script, re.Reason, re, c.want)
			}
			s.untouched(t, raw, target)
			s.sh(t, raw, "unset BASH_ENV; cd "+work)
		})
	}
	if fs, ok := gs.(sandbox.FileSystem); ok && s.b.Capabilities().Files {
		t.Run("write_file of an executable script", func(t *testing.T) {
			err := fs.WriteFile(s.ctx(t), work+"/evil.sh", []byte("#!/bin/sh\n"+payload+"\n"), 0o755)
			var re *gate.RefusedError
			if !errors.As(err, &re) || re.Reason != "hardline" {
				t.Errorf("WriteFile(evil.sh) error = %v; want a hardline refusal", err)
			}
			if res := s.sh(t, raw, "test -e "+work+"/evil.sh"); res.ExitCode == 0 {
				t.Errorf("the refused script was written")
			}
		})
	}
	if fs, ok := gs.(sandbox.FileSystem); ok && s.b.Capabilities().Files {
		// The file calls follow links the gate cannot see in the path's text: a session that
		// resolves paths (sandbox.PathResolver) lets the gate judge the file they open.
		resolves := false
		if r, ok := any(raw).(sandbox.PathResolver); ok {
			_, err := r.ResolvePath(s.ctx(t), work)
			resolves = err == nil // not in a fallback mode without the helper
		}
		for _, c := range []struct{ name, link, target, path string }{
			{"write_file through a link", "innocent", prot + "/config.yaml", "innocent"},
			{"write_file into a linked directory", "settings", prot, "settings/config.yaml"},
		} {
			t.Run(c.name, func(t *testing.T) {
				if !resolves {
					t.Skip("the session does not resolve paths (sandbox.PathResolver)")
				}
				s.sh(t, raw, "cd "+work+" && ln -sfn "+c.target+" "+c.link)
				err := fs.WriteFile(s.ctx(t), c.path, []byte("pwned\n"), 0o644)
				var re *gate.RefusedError
				if !errors.As(err, &re) || re.Reason != "hardline" {
					t.Errorf("WriteFile(%q -> %s) error = %v; want a hardline refusal", c.path, c.target, err)
				}
				s.untouched(t, raw, target)
			})
		}
	}
	// A safe command still runs, in the state the earlier steps left.
	res, err := gs.Exec(s.ctx(t), sandbox.Command{Script: "cat protected/config.yaml", Dir: work})
	if err != nil || res.Stdout != "original\n" {
		t.Errorf("a safe command after the refusals = %v, %v", res, err)
	}
}

// untouched fails the test if the stand-in config was changed.
func (s *suite) untouched(t *testing.T, raw sandbox.Session, target string) {
	t.Helper()
	if res := s.sh(t, raw, "cat "+target); res.Stdout != "original\n" {
		t.Errorf("the stand-in config now holds %q: the command ran", res.Stdout)
	}
}

// oneSession is a backend whose Open returns one session that is already open.
type oneSession struct {
	sandbox.Backend
	sess sandbox.Session
}

func (o oneSession) Open(context.Context, string) (sandbox.Session, error) { return o.sess, nil }
