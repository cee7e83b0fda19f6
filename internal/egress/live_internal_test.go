//go:build unix

package egress

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hermes-sandbox/hermes-sandbox/config"
)

// TestLiveConfigReachesRunningProxy edits the configuration file under a running proxy, as a
// person does with `config set` and `secrets rm` while a session owner serves the session:
// the next connection follows the edit (a revoked host is refused, a removed secret's
// placeholder is no longer replaced), and the proxy records the change once, naming the
// setting and the secret, before the first decision made under it. A configuration that no
// longer loads allows nothing until it is fixed. Without the re-read (Live.Get returning the
// first settings) the revoked host stays open and the removed secret is still added.
func TestLiveConfigReachesRunningProxy(t *testing.T) {
	upstream, err := NewBroker("", "upstream-ca", nil)
	if err != nil {
		t.Fatal(err)
	}
	api := echoServer(t, upstream, "api.brokered.test")
	other := echoServer(t, upstream, "other.test")
	apiRule := fmt.Sprintf("api.brokered.test:%d", serverPort(api))
	otherRule := fmt.Sprintf("other.test:%d", serverPort(other))

	dir := t.TempDir()
	cfgPath := filepath.Join(dir, "config.yaml")
	if err := config.SetMany(cfgPath, []config.KV{{Key: "docker.network", Value: "allowlist"},
		{Key: "docker.egress_allow", Value: apiRule + "," + otherRule}}); err != nil {
		t.Fatal(err)
	}
	if err := config.AddBrokerSecret(cfgPath, config.BrokerSecret{Name: "TOKEN", Hosts: []string{"api.brokered.test"}}, realToken); err != nil {
		t.Fatal(err)
	}
	second := realToken + "-second"
	if err := config.AddBrokerSecret(cfgPath, config.BrokerSecret{Name: "SECOND", Hosts: []string{"api.brokered.test"}, Header: "X-Second"}, second); err != nil {
		t.Fatal(err)
	}
	c, err := config.LoadWith(config.Options{Path: cfgPath})
	if err != nil {
		t.Fatal(err)
	}
	g, err := BrokeringOf(c, nil)
	if err != nil {
		t.Fatal(err)
	}
	g.Live = NewLive(c, nil, "docker", func(c *config.Config) []string { return c.Docker.EgressAllow }, g.Secrets)
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(upstream.CACertPEM())
	lo := netip.MustParseAddr("127.0.0.1")
	g.UpstreamRoots, g.AllowPrivate = roots, []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}
	g.Hosts = map[string]netip.Addr{"api.brokered.test": lo, "other.test": lo}

	evs := &brokerEvents{}
	ov := Overrides{Dir: filepath.Join(dir, "egress"), ConfigKey: "docker.egress_allow", Live: g.Live}
	opts := Options{Session: "s1", Allow: ov.AllowFunc("s1"), ConfigKey: ov.ConfigKey, Record: evs.record, Resolver: noResolver{}}
	brokerDir := filepath.Join(dir, "broker")
	if err := g.ApplySession(&opts, brokerDir); err != nil {
		t.Fatal(err)
	}
	p := New(opts)
	pu := serveProxy(t, p)

	br, err := g.SessionBroker(brokerDir, "s1")
	if err != nil || br == nil {
		t.Fatalf("SessionBroker = %v, %v", br, err)
	}
	ph := br.Env()
	trust := x509.NewCertPool()
	trust.AppendCertsFromPEM(br.CACertPEM())
	trust.AppendCertsFromPEM(upstream.CACertPEM())
	// A new connection for every request, as separate tool runs in a sandbox make.
	client := &http.Client{Timeout: 20 * time.Second, Transport: &http.Transport{Proxy: http.ProxyURL(pu), DisableKeepAlives: true,
		TLSClientConfig: &tls.Config{RootCAs: trust}}}
	get := func(u string) (http.Header, error) {
		req, _ := http.NewRequest(http.MethodGet, u, nil)
		req.Header.Set("Authorization", "Bearer "+ph["TOKEN"])
		req.Header.Set("X-Second", ph["SECOND"])
		resp, err := client.Do(req)
		if err != nil {
			return nil, err
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		var got struct{ Header http.Header }
		if err := json.Unmarshal(body, &got); err != nil {
			return nil, fmt.Errorf("status %d, body %q", resp.StatusCode, body)
		}
		return got.Header, nil
	}
	apiURL := fmt.Sprintf("https://api.brokered.test:%d/", serverPort(api))
	otherURL := fmt.Sprintf("https://other.test:%d/", serverPort(other))

	// Before: both hosts open, both secrets added.
	h, err := get(apiURL)
	if err != nil || h.Get("Authorization") != "Bearer "+realToken || h.Get("X-Second") != second {
		t.Fatalf("before the edit: api.brokered.test got %v, %v; want both real values", h, err)
	}
	if _, err := get(otherURL); err != nil {
		t.Fatalf("before the edit: other.test: %v", err)
	}

	// A person revokes other.test and removes SECOND, with the process still running.
	if err := config.Set(cfgPath, "docker.egress_allow", apiRule); err != nil {
		t.Fatal(err)
	}
	if ok, err := config.RemoveBrokerSecret(cfgPath, "SECOND"); !ok || err != nil {
		t.Fatalf("RemoveBrokerSecret(SECOND) = %v, %v", ok, err)
	}
	if _, err := get(otherURL); err == nil || !strings.Contains(err.Error(), "Forbidden") {
		t.Errorf("after revoking other.test: GET = %v; want the CONNECT refused (403 Forbidden)", err)
	}
	h, err = get(apiURL)
	if err != nil {
		t.Fatalf("after removing SECOND: api.brokered.test: %v", err)
	}
	if got := h.Get("Authorization"); got != "Bearer "+realToken {
		t.Errorf("after removing SECOND: Authorization = %q; want TOKEN still added", got)
	}
	if got := h.Get("X-Second"); got != ph["SECOND"] || strings.Contains(got, second) {
		t.Errorf("after removing SECOND: X-Second = %q; want its placeholder unchanged, not the value", got)
	}
	evs.mu.Lock()
	var changes []Event
	denied, changeAt := -1, -1
	for i, ev := range evs.evs {
		if ev.Change != "" {
			changes = append(changes, ev)
			changeAt = i
		}
		if ev.Host == "other.test" && ev.Decision == Denied && denied < 0 {
			denied = i
		}
	}
	evs.mu.Unlock()
	if len(changes) != 1 || !strings.Contains(changes[0].Change, "docker.egress_allow: removed "+otherRule) ||
		!strings.Contains(changes[0].Change, "secrets.broker: removed SECOND") || strings.Contains(changes[0].Change, second) ||
		changes[0].Session != "s1" {
		t.Errorf("change events %+v; want one for s1 naming the revoked host and the removed secret, no value", changes)
	}
	if denied < 0 || changeAt > denied {
		t.Errorf("the change event (at %d) must come before the refusal it caused (at %d)", changeAt, denied)
	}
	if ev := evs.last(t, "api.brokered.test", 2); !strings.Contains(ev.Reason, "SECOND (no longer brokered") {
		t.Errorf("the request after the edit: event %+v; want the removed secret's placeholder reported by name", ev)
	}

	// A configuration that no longer loads allows nothing (and says why) until it is fixed.
	if err := os.WriteFile(cfgPath, []byte("docker: {egress_allow: [\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := get(apiURL); err == nil || !strings.Contains(err.Error(), "Forbidden") {
		t.Errorf("with a broken configuration: GET = %v; want refused", err)
	}
	if err := os.Remove(cfgPath); err != nil {
		t.Fatal(err)
	}
	if err := config.SetMany(cfgPath, []config.KV{{Key: "docker.network", Value: "allowlist"}, {Key: "docker.egress_allow", Value: apiRule}}); err != nil {
		t.Fatal(err)
	}
	if err := config.AddBrokerSecret(cfgPath, config.BrokerSecret{Name: "TOKEN", Hosts: []string{"api.brokered.test"}}, realToken); err != nil {
		t.Fatal(err)
	}
	h, err = get(apiURL)
	if err != nil || h.Get("Authorization") != "Bearer "+realToken {
		t.Errorf("after fixing the configuration: %v, %v; want api.brokered.test reachable with TOKEN", h, err)
	}
	evs.mu.Lock()
	var broken bool
	for _, ev := range evs.evs {
		broken = broken || (ev.Change != "" && ev.Decision == Denied && strings.Contains(ev.Change, "cannot be read again"))
	}
	evs.mu.Unlock()
	if !broken {
		t.Error("no denied change event for the broken configuration")
	}
}
