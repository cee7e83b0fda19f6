package kubernetes

import (
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/hermes-sandbox/hermes-sandbox/config"
	"github.com/hermes-sandbox/hermes-sandbox/internal/egress"
	"github.com/hermes-sandbox/hermes-sandbox/internal/egress/egresstest"
	"github.com/hermes-sandbox/hermes-sandbox/internal/testenv"
	"github.com/hermes-sandbox/hermes-sandbox/sandbox"
)

// TestBrokeredSecret runs a pod with kubernetes.network allowlist and a brokered secret: the
// pod's variable holds a placeholder; its CA variables point at a bundle in the pod holding
// the session's CA certificate and no key; a request over HTTPS to the secret's host (a Go
// client trusting SSL_CERT_FILE) goes through the relay exec to this process's proxy and
// arrives with the real value; the placeholder sent to another allowed host arrives unchanged
// and is reported; the real value is in no variable, process or file of the pod, nor in any
// egress event; another session has another placeholder.
func TestBrokeredSecret(t *testing.T) {
	in := egresstest.New(t)
	ca := egresstest.NewCA(t)
	api := &egresstest.Recorder{}
	ap, pp := egresstest.Port(ca.Server(t, "api.brokered.test", api)), egresstest.Port(in.Pypi)
	real, g := egresstest.BrokerToken(t, config.NewConfig(), ca, config.BrokerSecret{Hosts: []string{"api.brokered.test"}})
	c := newCluster(t)
	b := c.backendWith(t, "", func(cfg *config.Config) {
		cfg.Kubernetes.Network = config.NetworkAllowlist
		cfg.Kubernetes.EgressAllow = []string{fmt.Sprintf("api.brokered.test:%d", ap), fmt.Sprintf("pypi.test:%d", pp)}
	}, Options{EgressResolver: in.Resolver, EgressAllowLoopback: true, Egress: g})
	if ok, say := b.BrokersSecrets(); !ok || !strings.Contains(say, "GITHUB_TOKEN") {
		t.Errorf("BrokersSecrets() = %v, %q; want brokered, naming GITHUB_TOKEN", ok, say)
	}
	log := &egresstest.Log{}
	b.ObserveEgress(log.Add)
	ctx := testenv.Ctx(t, 3*time.Minute)
	sess := testenv.Open(t, b, "broker")
	getter, err := os.ReadFile(egresstest.Getter(t))
	if err != nil {
		t.Fatal(err)
	}
	const get = hermesDir + "/egressget"
	if err := sess.(sandbox.FileSystem).WriteFile(ctx, get, getter, 0o755); err != nil {
		t.Fatalf("WriteFile(egressget) = %v", err)
	}
	ph := strings.TrimSpace(testenv.Run(t, sess, `printf %s "$GITHUB_TOKEN"`).Stdout)
	if !strings.HasPrefix(ph, egress.PlaceholderPrefix) {
		t.Fatalf("$GITHUB_TOKEN in the pod = %q; want a placeholder", ph)
	}
	r := testenv.Run(t, sess, `for v in SSL_CERT_FILE REQUESTS_CA_BUNDLE NODE_EXTRA_CA_CERTS GIT_SSL_CAINFO CURL_CA_BUNDLE; do eval "echo \$$v"; done | sort -u; `+
		`grep -c 'BEGIN CERTIFICATE' "$SSL_CERT_FILE"; grep -c 'PRIVATE KEY' "$SSL_CERT_FILE"`)
	lines := strings.Split(strings.TrimSpace(r.Stdout), "\n")
	if len(lines) != 3 || !strings.HasPrefix(lines[0], hermesDir+"/ca-") || lines[1] == "0" || lines[2] != "0" {
		t.Errorf("the CA variables and bundle: %q %q; want one bundle in %s with certificates and no key", r.Stdout, r.Stderr, hermesDir)
	}
	r = testenv.Run(t, sess, fmt.Sprintf(`%s -H "Authorization: Bearer $GITHUB_TOKEN" https://api.brokered.test:%d/user`, get, ap))
	if r.ExitCode != 0 || r.Stdout != "ok\n" {
		t.Fatalf("egressget to the brokered host = exit %d %q %q", r.ExitCode, r.Stdout, r.Stderr)
	}
	if seen := api.Seen(); len(seen) != 1 || seen[0].Get("Authorization") != "Bearer "+real {
		t.Errorf("the brokered host saw %v; want Authorization: Bearer <the real value>", seen)
	}
	if ev := log.Wait(t, "api.brokered.test", "allowed"); ev.Method != "GET" || !strings.Contains(ev.Reason, "brokered secret added: GITHUB_TOKEN") {
		t.Errorf("api.brokered.test event = %+v; want the intercepted GET naming the secret added", ev)
	}
	r = testenv.Run(t, sess, fmt.Sprintf(`%s -H "Authorization: Bearer $GITHUB_TOKEN" http://pypi.test:%d/simple/`, get, pp))
	if r.ExitCode != 0 {
		t.Errorf("request to pypi.test = exit %d %q", r.ExitCode, r.Stderr)
	}
	if ev := log.Wait(t, "pypi.test", "allowed"); !strings.Contains(ev.Reason, "possible exfiltration") || !strings.Contains(ev.Reason, "GITHUB_TOKEN") {
		t.Errorf("pypi.test event = %+v; want a possible exfiltration of GITHUB_TOKEN", ev)
	}
	// The value, built from two halves so no command carries it, is in no variable, process
	// or file of the pod; the same search finds the placeholder written to a file.
	find := `p=` + real[:8] + `; p="$p"` + real[8:] + `; `
	const fsGrep = `for d in /*; do case $d in /proc|/sys|/dev) ;; *) grep -rlF -e "$p" "$d" 2>/dev/null;; esac; done; `
	r = testenv.Run(t, sess, find+`env | grep -F -e "$p"; `+fsGrep+
		`n=0; for f in /proc/[0-9]*/environ /proc/[0-9]*/cmdline; do n=$((n+1)); c=$(tr '\0' '\n' < "$f" 2>/dev/null); case "$c" in *"$p"*) echo "$f";; esac; done; echo "checked $n"`)
	if !strings.HasPrefix(r.Stdout, "checked ") || r.Stdout == "checked 0\n" {
		t.Errorf("the pod holds the real value: %q", r.Stdout)
	}
	r = testenv.Run(t, sess, `printf %s "$GITHUB_TOKEN" > ph.txt; p="$GITHUB_TOKEN"; `+fsGrep)
	if !strings.Contains(r.Stdout, "ph.txt") {
		t.Errorf("control: the file search did not find the placeholder written to ph.txt: %q %q", r.Stdout, r.Stderr)
	}
	for _, ev := range log.All() {
		if strings.Contains(fmt.Sprintf("%+v", ev), real) {
			t.Errorf("an egress event holds the real value: %+v", ev)
		}
	}
	other := testenv.Open(t, b, "broker2")
	if ph2 := strings.TrimSpace(testenv.Run(t, other, `printf %s "$GITHUB_TOKEN"`).Stdout); ph2 == ph || !strings.HasPrefix(ph2, egress.PlaceholderPrefix) {
		t.Errorf("session broker2's placeholder %q; want another than %q", ph2, ph)
	}
}
