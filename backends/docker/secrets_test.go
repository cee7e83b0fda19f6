//go:build unix

package docker

import (
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/hermes-sandbox/hermes-sandbox/config"
	"github.com/hermes-sandbox/hermes-sandbox/internal/egress"
	"github.com/hermes-sandbox/hermes-sandbox/internal/egress/egresstest"
	"github.com/hermes-sandbox/hermes-sandbox/sandbox"
)

// TestBrokeredSecret runs a docker session with docker.network allowlist and a brokered
// secret: the container's variable holds a placeholder; a request over HTTPS to the secret's
// host (a Go client trusting the session's CA through SSL_CERT_FILE) arrives with the real
// value; the placeholder sent to another allowed host arrives unchanged and is audited; the
// real value is in no variable, process or file of the container, nor in any egress event.
func TestBrokeredSecret(t *testing.T) {
	in := egresstest.New(t)
	ca := egresstest.NewCA(t)
	api := &egresstest.Recorder{}
	apiSrv := ca.Server(t, "api.brokered.test", api)
	ap, pp := egresstest.Port(apiSrv), egresstest.Port(in.Pypi)
	b, log, _ := newEgressBackend(t, in, []string{fmt.Sprintf("api.brokered.test:%d", ap), fmt.Sprintf("pypi.test:%d", pp)})
	real, g := egresstest.BrokerToken(t, config.NewConfig(), ca, config.BrokerSecret{Hosts: []string{"api.brokered.test"}})
	b.extra.Brokering = g

	sess := open(t, b, "broker")
	getter, err := os.ReadFile(egresstest.Getter(t))
	if err != nil {
		t.Fatal(err)
	}
	if err := sess.(sandbox.FileSystem).WriteFile(ctxT(t, time.Minute), "/tmp/egressget", getter, 0o755); err != nil {
		t.Fatalf("WriteFile(egressget) = %v", err)
	}
	ph := strings.TrimSpace(run(t, sess, `printf %s "$GITHUB_TOKEN"`).Stdout)
	if !strings.HasPrefix(ph, egress.PlaceholderPrefix) {
		t.Fatalf("$GITHUB_TOKEN in the container = %q; want a placeholder", ph)
	}
	res := run(t, sess, fmt.Sprintf(`/tmp/egressget -H "Authorization: Bearer $GITHUB_TOKEN" https://api.brokered.test:%d/user`, ap))
	if res.ExitCode != 0 || res.Stdout != "ok\n" {
		t.Fatalf("egressget to the brokered host = exit %d %q %q", res.ExitCode, res.Stdout, res.Stderr)
	}
	if seen := api.Seen(); len(seen) != 1 || seen[0].Get("Authorization") != "Bearer "+real {
		t.Errorf("the brokered host saw %v; want Authorization: Bearer <the real value>", seen)
	}
	res = run(t, sess, fmt.Sprintf(`/tmp/egressget -H "Authorization: Bearer $GITHUB_TOKEN" http://pypi.test:%d/simple/`, pp))
	if res.ExitCode != 0 {
		t.Errorf("request to pypi.test = exit %d %q", res.ExitCode, res.Stderr)
	}
	if ev := log.Wait(t, "pypi.test", "allowed"); !strings.Contains(ev.Reason, "possible exfiltration") {
		t.Errorf("pypi.test event = %+v; want a possible exfiltration", ev)
	}
	// The value, built from two halves so no command carries it, is in no variable, process
	// or file of the container.
	find := `p=` + real[:8] + `; p="$p"` + real[8:] + `; `
	const fsGrep = `for d in /*; do case $d in /proc|/sys|/dev) ;; *) grep -rlF -e "$p" "$d" 2>/dev/null;; esac; done`
	res = run(t, sess, find+`env | grep -F -e "$p"; for d in /*; do case $d in /proc|/sys|/dev) ;; *) grep -rlF -e "$p" "$d" 2>/dev/null;; esac; done; `+
		`n=0; for f in /proc/[0-9]*/environ /proc/[0-9]*/cmdline; do n=$((n+1)); c=$(tr '\0' '\n' < "$f" 2>/dev/null); case "$c" in *"$p"*) echo "$f";; esac; done; echo "checked $n"`)
	if !strings.HasPrefix(res.Stdout, "checked ") || res.Stdout == "checked 0\n" {
		t.Errorf("the container holds the real value: %q", res.Stdout)
	}
	// Control: the same search finds the placeholder, written to a file.
	res = run(t, sess, `printf %s "$GITHUB_TOKEN" > ph.txt; p="$GITHUB_TOKEN"; `+fsGrep)
	if !strings.Contains(res.Stdout, "ph.txt") {
		t.Errorf("control: the file search did not find the placeholder written to ph.txt: %q %q", res.Stdout, res.Stderr)
	}
	for _, ev := range log.All() {
		if strings.Contains(fmt.Sprintf("%+v", ev), real) {
			t.Errorf("an egress event holds the real value: %+v", ev)
		}
	}
	other := open(t, b, "broker2")
	if ph2 := strings.TrimSpace(run(t, other, `printf %s "$GITHUB_TOKEN"`).Stdout); ph2 == ph || !strings.HasPrefix(ph2, egress.PlaceholderPrefix) {
		t.Errorf("session broker2's placeholder %q; want another than %q", ph2, ph)
	}
}
