//go:build unix

package local_test

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hermes-sandbox/hermes-sandbox/backends/local"
	"github.com/hermes-sandbox/hermes-sandbox/config"
	"github.com/hermes-sandbox/hermes-sandbox/internal/egress"
	"github.com/hermes-sandbox/hermes-sandbox/internal/egress/egresstest"
	"github.com/hermes-sandbox/hermes-sandbox/internal/testenv"
	"github.com/hermes-sandbox/hermes-sandbox/sandbox"
)

// TestLiveConfigChange edits the configuration file while a session runs, as a person does
// with `config set local.egress_allow` and `secrets rm` while an agent keeps working: the
// session's next connection follows the file (the revoked host is refused, the removed
// secret's placeholder goes out unchanged), the proxy records the change for the session,
// and no command or new session was needed for it. The proxy and relay are the ones the
// session started with (a session owner's).
func TestLiveConfigChange(t *testing.T) {
	egressNetwork(t)
	if _, err := exec.LookPath("curl"); err != nil {
		testenv.Missing(t, "curl", err.Error())
	}
	real, second := "ghp_"+sandbox.RandomHex(16), "npm_"+sandbox.RandomHex(16)
	in := egresstest.New(t)
	ca := egresstest.NewCA(t)
	api := &egresstest.Recorder{}
	ap, pp := egresstest.Port(ca.Server(t, "api.brokered.test", api)), egresstest.Port(in.Pypi)
	apiRule, pypiRule := fmt.Sprintf("api.brokered.test:%d", ap), fmt.Sprintf("pypi.test:%d", pp)

	root, err := os.MkdirTemp("/var/tmp", "hermes-local-live-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(root) })
	work := filepath.Join(root, "work")
	must(t, os.MkdirAll(work, 0o755))
	cfgPath := filepath.Join(root, "config", "config.yaml")
	must(t, config.SetMany(cfgPath, []config.KV{
		{Key: "terminal.cwd", Value: work}, {Key: "local.confine", Value: "strict"}, {Key: "local.network", Value: "allowlist"},
		{Key: "local.egress_allow", Value: apiRule + "," + pypiRule},
		{Key: "egress.hosts", Value: "api.brokered.test=127.0.0.1"}, {Key: "egress.allow_private", Value: "127.0.0.0/8"},
	}))
	must(t, config.AddBrokerSecret(cfgPath, config.BrokerSecret{Name: "GITHUB_TOKEN", Hosts: []string{"api.brokered.test"}}, real))
	must(t, config.AddBrokerSecret(cfgPath, config.BrokerSecret{Name: "SECOND", Hosts: []string{"api.brokered.test"}, Header: "X-Second"}, second))
	cfg, err := config.LoadWith(config.Options{Path: cfgPath})
	if err != nil {
		t.Fatal(err)
	}
	g, err := egress.BrokeringOf(cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	g.UpstreamRoots = ca.Pool()
	// As backends/all builds it.
	g.Live = egress.NewLive(cfg, nil, local.Name, func(c *config.Config) []string { return c.Local.EgressAllow }, g.Secrets)
	sec := local.SectionOf(cfg)
	sec.EgressResolver = in.Resolver
	sec.Brokering = g
	b, log := newObserved(t, sec, cfg, root)
	sess := testenv.Open(t, b, "live")
	apiCall := `curl -sS -o /dev/null -w '%{http_code}' -H "Authorization: Bearer $GITHUB_TOKEN" -H "X-Second: $SECOND" ` +
		fmt.Sprintf("https://api.brokered.test:%d/user", ap)
	pypiCall := fmt.Sprintf(`curl -sS -o /dev/null -w '%%{http_code}' http://pypi.test:%d/simple/`, pp)

	ph := testenv.Run(t, sess, `printf %s "$SECOND"`).Stdout
	if !strings.HasPrefix(ph, egress.PlaceholderPrefix) {
		t.Fatalf("$SECOND = %q; want a placeholder", ph)
	}
	if res := testenv.Run(t, sess, apiCall); res.Stdout != "200" {
		t.Fatalf("before the edit: curl to the brokered host = %q %q", res.Stdout, res.Stderr)
	}
	if seen := api.Seen(); len(seen) != 1 || seen[0].Get("Authorization") != "Bearer "+real || seen[0].Get("X-Second") != second {
		t.Fatalf("before the edit: the brokered host saw %v; want both real values", seen)
	}
	if res := testenv.Run(t, sess, pypiCall); res.Stdout != "200" {
		t.Fatalf("before the edit: curl to pypi.test = %q %q", res.Stdout, res.Stderr)
	}

	// The edits, in the file, while the session (its relay and proxy) stays up.
	must(t, config.Set(cfgPath, "local.egress_allow", apiRule))
	if ok, err := config.RemoveBrokerSecret(cfgPath, "SECOND"); !ok || err != nil {
		t.Fatalf("RemoveBrokerSecret(SECOND) = %v, %v", ok, err)
	}
	if res := testenv.Run(t, sess, pypiCall); res.Stdout != "403" {
		t.Errorf("after revoking pypi.test: curl = %q %q; want the proxy's 403", res.Stdout, res.Stderr)
	}
	if res := testenv.Run(t, sess, apiCall); res.Stdout != "200" {
		t.Fatalf("after removing SECOND: curl to the brokered host = %q %q", res.Stdout, res.Stderr)
	}
	seen := api.Seen()
	if last := seen[len(seen)-1]; last.Get("Authorization") != "Bearer "+real || last.Get("X-Second") != ph {
		t.Errorf("after removing SECOND: the brokered host saw %v; want GITHUB_TOKEN's value and SECOND's placeholder unchanged", last)
	}
	var changes []sandbox.EgressEvent
	for _, ev := range log.All() {
		if ev.Change != "" {
			changes = append(changes, ev)
		}
		if strings.Contains(fmt.Sprintf("%+v", ev), second) || strings.Contains(fmt.Sprintf("%+v", ev), real) {
			t.Errorf("an egress event holds a real value: %+v", ev)
		}
	}
	if len(changes) != 1 || changes[0].Session != "live" || changes[0].Backend != local.Name ||
		!strings.Contains(changes[0].Change, "local.egress_allow: removed "+pypiRule) ||
		!strings.Contains(changes[0].Change, "secrets.broker: removed SECOND") {
		t.Errorf("change events %+v; want one for session live naming the revoked host and the removed secret", changes)
	}
	if ev := log.Wait(t, "pypi.test", "denied"); ev.Reason != "not on the allowlist" {
		t.Errorf("pypi.test refusal = %+v; want not on the allowlist", ev)
	}
}
