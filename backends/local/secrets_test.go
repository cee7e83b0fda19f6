//go:build !windows

package local_test

import (
	"encoding/base64"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/hermes-sandbox/hermes-sandbox/backends/local"
	"github.com/hermes-sandbox/hermes-sandbox/config"
	"github.com/hermes-sandbox/hermes-sandbox/internal/egress"
	"github.com/hermes-sandbox/hermes-sandbox/internal/egress/egresstest"
	"github.com/hermes-sandbox/hermes-sandbox/internal/testenv"
	"github.com/hermes-sandbox/hermes-sandbox/sandbox"
)

// TestBrokeredSecret runs a local session with local.network allowlist and a brokered secret:
// the session's variable holds a placeholder; python3 urllib's request to the secret's host
// (HTTPS, trusting the session's CA through SSL_CERT_FILE) arrives with the real value; the
// placeholder sent to another allowed host arrives unchanged and is audited; the real value
// is nowhere in the session's environment, files or the audit events; another session's
// placeholder differs.
func TestBrokeredSecret(t *testing.T) {
	egressNetwork(t)
	in := egresstest.New(t)
	ca := egresstest.NewCA(t)
	api := &egresstest.Recorder{}
	apiSrv := ca.Server(t, "api.brokered.test", api)
	ap, pp := egresstest.Port(apiSrv), egresstest.Port(in.Pypi)

	root, err := os.MkdirTemp("/var/tmp", "hermes-local-secret-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(root) })
	work := filepath.Join(root, "work")
	must(t, os.MkdirAll(work, 0o755))
	cfg := config.NewConfig()
	cfg.Terminal.Cwd = work
	cfg.Local.Confine = config.ConfineStrict
	cfg.Local.Network = config.LocalNetworkAllowlist
	cfg.Local.EgressAllow = []string{fmt.Sprintf("api.brokered.test:%d", ap), fmt.Sprintf("pypi.test:%d", pp)}
	real, g := egresstest.BrokerToken(t, cfg, ca, config.BrokerSecret{Hosts: []string{"api.brokered.test"}})
	sec := local.SectionOf(cfg)
	sec.EgressResolver = in.Resolver
	sec.Brokering = g
	b, log := newObserved(t, sec, cfg, root)
	sess := testenv.Open(t, b, "broker")
	run := func(script string) *sandbox.Result { return testenv.Run(t, sess, script) }

	ph := strings.TrimSpace(run(`printf %s "$GITHUB_TOKEN"`).Stdout)
	if !strings.HasPrefix(ph, egress.PlaceholderPrefix) {
		t.Fatalf("$GITHUB_TOKEN in the session = %q; want a placeholder", ph)
	}
	if res := run(`test -r "$SSL_CERT_FILE" && grep -c 'BEGIN CERTIFICATE' "$SSL_CERT_FILE" && ! grep -q 'PRIVATE KEY' "$SSL_CERT_FILE"`); res.ExitCode != 0 {
		t.Errorf("SSL_CERT_FILE is not a readable bundle without a key: %q %q", res.Stdout, res.Stderr)
	}
	py := func(url string) string {
		return fmt.Sprintf(`python3 -c "import os,sys,urllib.request
r=urllib.request.Request('%s',headers={'Authorization':'Bearer '+os.environ['GITHUB_TOKEN']})
try:
    sys.stdout.write(urllib.request.urlopen(r,timeout=10).read().decode())
except Exception as e:
    sys.stderr.write(str(e)); sys.exit(1)"`, url)
	}
	if res := run(py(fmt.Sprintf("https://api.brokered.test:%d/user", ap))); res.ExitCode != 0 || res.Stdout != "ok\n" {
		t.Fatalf("python3 urllib to the brokered host = exit %d %q %q", res.ExitCode, res.Stdout, res.Stderr)
	}
	if seen := api.Seen(); len(seen) != 1 || seen[0].Get("Authorization") != "Bearer "+real {
		t.Errorf("the brokered host saw %v; want Authorization: Bearer <the real value>", seen)
	}
	if ev := log.Wait(t, "api.brokered.test", "allowed"); ev.Method != "GET" || !strings.Contains(ev.Reason, "brokered secret added: GITHUB_TOKEN") {
		t.Errorf("api.brokered.test event = %+v; want the intercepted GET naming the secret added", ev)
	}
	// Another allowed host gets the placeholder unchanged, and the audit says so.
	if res := run(py(fmt.Sprintf("http://pypi.test:%d/simple/", pp))); res.ExitCode != 0 {
		t.Errorf("request to pypi.test = exit %d %q", res.ExitCode, res.Stderr)
	}
	if ev := log.Wait(t, "pypi.test", "allowed"); !strings.Contains(ev.Reason, "possible exfiltration") || !strings.Contains(ev.Reason, "GITHUB_TOKEN") {
		t.Errorf("pypi.test event = %+v; want a possible exfiltration of GITHUB_TOKEN", ev)
	}
	// The real value is in no variable, no file the session can read in its workspace, home,
	// or bundle, and no process's environment or argv. The scripts build
	// it from two halves, so that it never enters the session through a command either.
	find := `p=` + real[:8] + `; p="$p"` + real[8:] + `; `
	if res := run(find + `env | grep -F -e "$p"; grep -rlF -e "$p" . "$HOME" "$SSL_CERT_FILE" 2>/dev/null; true`); strings.TrimSpace(res.Stdout) != "" {
		t.Errorf("the real value is visible in the session: %q", res.Stdout)
	}
	res := run(find + `n=0; for f in /proc/[0-9]*/environ /proc/[0-9]*/cmdline; do n=$((n+1)); c=$(tr '\0' '\n' < "$f" 2>/dev/null); case "$c" in *"$p"*) echo "$f";; esac; done; echo "checked $n"`)
	if !strings.HasPrefix(res.Stdout, "checked ") || res.Stdout == "checked 0\n" {
		t.Errorf("the process check found %q; want no process holding the real value (and some checked)", res.Stdout)
	}
	for _, ev := range log.All() {
		if strings.Contains(fmt.Sprintf("%+v", ev), real) {
			t.Errorf("an egress event holds the real value: %+v", ev)
		}
	}
	// Another session has another placeholder.
	other := testenv.Open(t, b, "broker2")
	if ph2 := strings.TrimSpace(testenv.Run(t, other, `printf %s "$GITHUB_TOKEN"`).Stdout); ph2 == ph || !strings.HasPrefix(ph2, egress.PlaceholderPrefix) {
		t.Errorf("session broker2's placeholder %q; want another placeholder than %q", ph2, ph)
	}
}

// basicOnly answers 401 with a Basic challenge unless the request carries Basic auth, as a
// git server does, and records what it saw.
type basicOnly struct{ egresstest.Recorder }

func (h *basicOnly) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h.Recorder.ServeHTTP(discard{}, r)
	if !strings.HasPrefix(r.Header.Get("Authorization"), "Basic ") {
		w.Header().Set("WWW-Authenticate", `Basic realm="git"`)
		http.Error(w, "auth", http.StatusUnauthorized)
		return
	}
	http.Error(w, "no such repository", http.StatusNotFound)
}

type discard struct{}

func (discard) Header() http.Header         { return http.Header{} }
func (discard) Write(b []byte) (int, error) { return len(b), nil }
func (discard) WriteHeader(int)             {}

// TestBrokeredSecretCurlAndGit: curl (CURL_CA_BUNDLE) and git over HTTPS (GIT_SSL_CAINFO,
// the placeholder as the basic-auth password) reach the brokered host with the real value.
func TestBrokeredSecretCurlAndGit(t *testing.T) {
	egressNetwork(t)
	for _, p := range []string{"curl", "git"} {
		if _, err := exec.LookPath(p); err != nil {
			testenv.Missing(t, p, err.Error())
		}
	}
	in := egresstest.New(t)
	ca := egresstest.NewCA(t)
	gh := &basicOnly{}
	srv := ca.Server(t, "git.brokered.test", gh)
	port := egresstest.Port(srv)
	root, err := os.MkdirTemp("/var/tmp", "hermes-local-secret-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(root) })
	work := filepath.Join(root, "work")
	must(t, os.MkdirAll(work, 0o755))
	cfg := config.NewConfig()
	cfg.Terminal.Cwd = work
	cfg.Local.Confine = config.ConfineStrict
	cfg.Local.Network = config.LocalNetworkAllowlist
	cfg.Local.EgressAllow = []string{fmt.Sprintf("git.brokered.test:%d", port)}
	real, g := egresstest.BrokerToken(t, cfg, ca, config.BrokerSecret{Hosts: []string{"git.brokered.test"}, BasicAuthUser: "x-access-token"})
	sec := local.SectionOf(cfg)
	sec.EgressResolver = in.Resolver
	sec.Brokering = g
	b, _ := newObserved(t, sec, cfg, root)
	sess := testenv.Open(t, b, "git")
	base := fmt.Sprintf("https://git.brokered.test:%d", port)

	res := testenv.Run(t, sess, `curl -sS -o /dev/null -w '%{http_code}' -H "Authorization: Bearer $GITHUB_TOKEN" `+base+`/user`)
	if res.Stdout != "401" {
		t.Errorf("curl = %q %q; want the server's 401 (the request went through)", res.Stdout, res.Stderr)
	}
	want := "Basic " + base64.StdEncoding.EncodeToString([]byte("x-access-token:"+real))
	res = testenv.Run(t, sess, `GIT_TERMINAL_PROMPT=0 git ls-remote "https://agent:$GITHUB_TOKEN@git.brokered.test:`+strconv.Itoa(port)+`/you/private.git"`)
	seen := gh.Seen()
	if len(seen) < 2 || seen[0].Get("Authorization") != "Bearer "+real {
		t.Errorf("curl's request arrived with %v; want Authorization: Bearer <the real value> first", seen)
	}
	found := false
	for _, h := range seen {
		found = found || h.Get("Authorization") == want
	}
	if !found {
		t.Errorf("git's requests arrived with %v; want one with Basic x-access-token:<the real value> (git: %q %q)", seen, res.Stdout, res.Stderr)
	}
	if strings.Contains(res.Stdout+res.Stderr, real) {
		t.Errorf("git printed the real value")
	}
}
