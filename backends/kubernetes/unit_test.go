package kubernetes

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/hermes-sandbox/hermes-sandbox/config"
	"github.com/hermes-sandbox/hermes-sandbox/internal/agentbin"
	"github.com/hermes-sandbox/hermes-sandbox/sandbox"
)

// offline is a backend whose kubeconfig points at a closed loopback port: enough for what
// contacts nobody.
func offline(t *testing.T, mut func(*config.Config)) *Backend {
	t.Helper()
	home := t.TempDir()
	kc := filepath.Join(home, ".kube", "config")
	os.MkdirAll(filepath.Dir(kc), 0o700)
	os.WriteFile(kc, []byte(`apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "https://127.0.0.1:1"}}]
users: [{name: u, user: {token: t}}]
contexts: [{name: ctx, context: {cluster: c, user: u, namespace: team-a}}, {name: other, context: {cluster: c, user: u}}]
current-context: ctx
`), 0o600)
	cfg := config.NewConfig()
	if mut != nil {
		mut(cfg)
	}
	b, err := NewWith(cfg.Kubernetes, cfg.BackendOptions(sandbox.FactoryOptions{StateDir: t.TempDir(), Environ: []string{"HOME=" + home}}), Options{})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestPodHardened: the pod spec carries every setting of the restricted profile and the
// configured extras; TestAdmission proves a real API server accepts it.
func TestPodHardened(t *testing.T) {
	b := offline(t, func(c *config.Config) {
		c.Kubernetes.RunAsUser = 4242
		c.Kubernetes.RuntimeClass = "gvisor"
		c.Kubernetes.CPU, c.Kubernetes.Memory = 0.5, 256*config.Mebibyte
		c.Kubernetes.NodeSelector = map[string]string{"pool": "agents"}
		c.Kubernetes.Tolerations = []string{"dedicated=agents:NoSchedule"}
		c.Kubernetes.MaxLifetime = 2 * time.Hour
	})
	if b.namespace() != "team-a" {
		t.Errorf("namespace = %q, want the context's team-a", b.namespace())
	}
	p := b.Pod("my.session_1", b.podName("my.session_1"))
	s := p.Spec
	c := s.Containers[0].SecurityContext
	switch {
	case *s.SecurityContext.RunAsNonRoot != true || *s.SecurityContext.RunAsUser != 4242 || *c.RunAsUser != 4242:
		t.Error("not non-root 4242")
	case !*c.ReadOnlyRootFilesystem || *c.AllowPrivilegeEscalation || *c.Privileged:
		t.Error("root filesystem writable or escalation allowed")
	case len(c.Capabilities.Drop) != 1 || c.Capabilities.Drop[0] != "ALL" || len(c.Capabilities.Add) != 0:
		t.Errorf("capabilities = %+v", c.Capabilities)
	case c.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault:
		t.Error("seccomp")
	case *s.AutomountServiceAccountToken || *s.EnableServiceLinks:
		t.Error("service account token or service links")
	case *s.ActiveDeadlineSeconds != 7200 || s.RestartPolicy != corev1.RestartPolicyNever:
		t.Errorf("lifetime %d restart %s", *s.ActiveDeadlineSeconds, s.RestartPolicy)
	case *s.RuntimeClassName != "gvisor" || s.NodeSelector["pool"] != "agents":
		t.Error("runtime class or node selector")
	case len(s.Tolerations) != 1 || s.Tolerations[0].Key != "dedicated" || s.Tolerations[0].Operator != "Equal" || s.Tolerations[0].Effect != "NoSchedule":
		t.Errorf("tolerations = %+v", s.Tolerations)
	}
	for _, v := range s.Volumes {
		if v.EmptyDir == nil || v.EmptyDir.SizeLimit == nil || v.EmptyDir.SizeLimit.IsZero() {
			t.Errorf("volume %s is not a size-limited emptyDir", v.Name)
		}
	}
	lim := s.Containers[0].Resources.Limits
	if lim.Cpu().MilliValue() != 500 || lim.Memory().Value() != 256<<20 {
		t.Errorf("limits = %v", lim)
	}
	if p.Labels[labelOurs] != "1" || p.Labels[labelSession] == "" || p.Labels[labelOwner] == "" || p.Annotations[annoSession] != "my.session_1" {
		t.Errorf("labels %v annotations %v", p.Labels, p.Annotations)
	}
	if p.Labels[labelEgress] != "deny" {
		t.Error("a pod without network must be selected by the deny-all policy")
	}
	np := b.NetworkPolicy()
	if len(np.Spec.PolicyTypes) != 1 || np.Spec.PolicyTypes[0] != "Egress" || len(np.Spec.Egress) != 0 {
		t.Errorf("policy = %+v", np.Spec)
	}
	for k, v := range np.Spec.PodSelector.MatchLabels {
		if p.Labels[k] != v {
			t.Errorf("the policy's selector %s=%s does not select the pod", k, v)
		}
	}
}

func TestPodNames(t *testing.T) {
	b := offline(t, nil)
	dns := regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`)
	seen := map[string]string{}
	for _, s := range []string{"a", "A", "my.session_1", "x-", strings.Repeat("Long", 15), "9_9", "x.", "x_"} {
		n := b.podName(s)
		if !dns.MatchString(n) || len(n) > 63 {
			t.Errorf("podName(%q) = %q: not a DNS label", s, n)
		}
		if other, dup := seen[n]; dup {
			t.Errorf("podName(%q) = podName(%q) = %q", s, other, n)
		}
		seen[n] = s
	}
}

// TestKubeconfigErrors: a missing cluster configuration or context is a clear error at first
// use, never a silent fallback.
func TestKubeconfigErrors(t *testing.T) {
	cfg := config.NewConfig()
	b, err := NewWith(cfg.Kubernetes, cfg.BackendOptions(sandbox.FactoryOptions{StateDir: t.TempDir(), Environ: []string{"HOME=" + t.TempDir()}}), Options{})
	if err != nil {
		t.Fatal(err)
	}
	_, err = b.Open(t.Context(), "s")
	if !errors.Is(err, sandbox.ErrInvalidConfig) || !strings.Contains(err.Error(), "no cluster configured") {
		t.Errorf("no kubeconfig: Open = %v", err)
	}
	if err := b.Check(t.Context()); err == nil || !strings.Contains(err.Error(), "kubernetes.kubeconfig") {
		t.Errorf("no kubeconfig: Check = %v", err)
	}

	b = offline(t, func(c *config.Config) { c.Kubernetes.Context = "nope" })
	if _, err := b.Open(t.Context(), "s"); !errors.Is(err, sandbox.ErrInvalidConfig) || !strings.Contains(err.Error(), `kubernetes.context "nope"`) {
		t.Errorf("unknown context: Open = %v", err)
	}
	b = offline(t, func(c *config.Config) { c.Kubernetes.Context, c.Kubernetes.Namespace = "other", "" })
	if b.namespace() != "default" {
		t.Errorf("a context without a namespace: namespace = %q, want default", b.namespace())
	}
	b = offline(t, func(c *config.Config) { c.Kubernetes.Kubeconfig = "/nonexistent/kubeconfig" })
	if _, err := b.Open(t.Context(), "s"); !errors.Is(err, sandbox.ErrInvalidConfig) || !strings.Contains(err.Error(), "/nonexistent/kubeconfig") {
		t.Errorf("missing kubeconfig file: Open = %v", err)
	}
	// Unreachable: Check says so, naming the server.
	b = offline(t, nil)
	if err := b.Check(t.Context()); !errors.Is(err, sandbox.ErrUnavailable) || !strings.Contains(err.Error(), "127.0.0.1:1") {
		t.Errorf("unreachable: Check = %v", err)
	}
}

// TestStartScript runs the start script with /bin/sh here: on a pod without the helper it
// asks for it, stores exactly its size in bytes and runs it with the arguments; a short or
// damaged upload is refused (exit 95) and never installed; without head it exits 97 (the
// backend then uploads with cat); with the helper present it just runs it.
func TestStartScript(t *testing.T) {
	b := offline(t, nil)
	b.cwd = t.TempDir()
	helper := []byte("#!/bin/sh\necho \"ran $*\"\n")
	bin := agentbin.FromBytes(helper, nil)
	target := filepath.Join(t.TempDir(), "sub", "agent-x")
	run := func(path string, stdin []byte) (string, int) {
		cmd := exec.Command("/bin/sh", "-c", b.startScript(bin), target, "serve", "--x")
		cmd.Env = []string{"PATH=" + path}
		cmd.Stdin = bytes.NewReader(append(stdin, "protocol bytes after it"...))
		out, err := cmd.Output()
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			return string(out), ee.ExitCode()
		}
		if err != nil {
			t.Fatal(err)
		}
		return string(out), 0
	}
	if out, code := run(t.TempDir(), nil); code != agentbin.ExitMissing || out != "" {
		t.Errorf("without head: exit %d %q; want %d", code, out, agentbin.ExitMissing)
	}
	short := helper[:len(helper)-3]
	cmd := exec.Command("/bin/sh", "-c", b.startScript(bin), target, "serve")
	cmd.Env = []string{"PATH=/usr/bin:/bin"}
	cmd.Stdin = bytes.NewReader(short) // the stream ends early
	if err := cmd.Run(); cmd.ProcessState.ExitCode() != agentbin.ExitCorrupt {
		t.Errorf("short upload: %v; want exit %d", err, agentbin.ExitCorrupt)
	}
	damaged := bytes.Replace(helper, []byte("ran"), []byte("RAN"), 1)
	if out, code := run("/usr/bin:/bin", damaged); code != agentbin.ExitCorrupt || out != sendHelper {
		t.Errorf("damaged upload: exit %d %q; want %d", code, out, agentbin.ExitCorrupt)
	}
	if entries, _ := os.ReadDir(filepath.Dir(target)); len(entries) != 0 {
		t.Errorf("after refused uploads the helper directory holds %v; want nothing", entries)
	}
	if out, code := run("/usr/bin:/bin", helper); code != 0 || out != sendHelper+"ran serve --x\n" {
		t.Errorf("first start: exit %d %q", code, out)
	}
	if data, err := os.ReadFile(target); err != nil || !bytes.Equal(data, helper) {
		t.Errorf("stored helper = %q, %v", data, err)
	}
	if out, code := run("/usr/bin:/bin", nil); code != 0 || out != "ran serve --x\n" {
		t.Errorf("second start: exit %d %q; want the helper run without asking", code, out)
	}
}

func TestAskWatcher(t *testing.T) {
	for _, chunks := range [][]string{{sendHelper + "x"}, {"HERMES-", "SANDBOX-SEND", "-HELPER\n", "rest"}, {"banner\n", sendHelper}} {
		var out bytes.Buffer
		asked := 0
		w := &askWatcher{w: &out, onAsk: func() { asked++ }}
		for _, c := range chunks {
			w.Write([]byte(c))
		}
		want := 1
		if chunks[0] == "banner\n" {
			want = 0 // only at the very start
		}
		if asked != want || out.String() != strings.Join(chunks, "") {
			t.Errorf("%q: asked %d times, passed %q", chunks, asked, out.String())
		}
	}
}

// TestNetworkModes: none and allowlist pods are selected by the deny-all-egress policy and
// open ones are not; only allowlist pods carry the proxy variables (so a warm pod of one mode
// is never handed to a session of another), the relay is told no unix socket, and Egress()
// names the key in force and, for allowlist, the CNI caveat.
func TestNetworkModes(t *testing.T) {
	env := func(p *corev1.Pod) map[string]string {
		m := map[string]string{}
		for _, e := range p.Spec.Containers[0].Env {
			m[e.Name] = e.Value
		}
		return m
	}
	none := offline(t, nil)
	allow := offline(t, func(c *config.Config) {
		c.Kubernetes.Network, c.Kubernetes.EgressAllow = config.NetworkAllowlist, []string{"pypi.org"}
	})
	open := offline(t, func(c *config.Config) { c.Kubernetes.NetworkEnabled = true })
	for _, tt := range []struct {
		b        *Backend
		deny     bool
		proxy    string
		status   string
		network  bool
		policies bool
	}{
		{none, true, "", sandbox.EgressNone, false, true},
		{allow, true, "http://127.0.0.1:3128", sandbox.EgressEnforced, true, true},
		{open, false, "", sandbox.EgressOpen, true, false},
	} {
		p := tt.b.Pod("s", "p")
		mode := tt.b.network()
		if got := p.Labels[labelEgress] == "deny"; got != tt.deny {
			t.Errorf("%s: selected by the deny-all policy = %v; want %v", mode, got, tt.deny)
		}
		if got := env(p)["HTTPS_PROXY"]; got != tt.proxy {
			t.Errorf("%s: HTTPS_PROXY = %q; want %q", mode, got, tt.proxy)
		}
		if got := tt.b.Egress().Status; got != tt.status {
			t.Errorf("%s: Egress().Status = %q; want %q", mode, got, tt.status)
		}
		if got := tt.b.Capabilities().Network; got != tt.network {
			t.Errorf("%s: Capabilities().Network = %v; want %v", mode, got, tt.network)
		}
		needs := slices.ContainsFunc(tt.b.permissions(), func(p permission) bool { return p.resource == "networkpolicies" })
		if needs != tt.policies {
			t.Errorf("%s: needs networkpolicies = %v; want %v", mode, needs, tt.policies)
		}
	}
	if none.specHash() == allow.specHash() {
		t.Error("none and allowlist pods have the same spec hash: a warm pod without the proxy variables could serve an allowlist session")
	}
	rep := allow.Egress()
	if !strings.Contains(rep.Detail, "kubernetes.egress_allow") || !strings.Contains(rep.Detail, "NOT blocked") || rep.AppliesShared || !slices.Equal(rep.Allow, []string{"pypi.org"}) {
		t.Errorf("allowlist Egress() = %+v", rep)
	}
	shared := offline(t, func(c *config.Config) {
		c.Kubernetes.Network, c.Terminal.EgressAllow = config.NetworkAllowlist, []string{"files.example.org"}
	})
	if rep := shared.Egress(); !rep.AppliesShared || !strings.Contains(rep.Detail, "terminal.egress_allow") || !slices.Equal(rep.Allow, []string{"files.example.org"}) {
		t.Errorf("allowlist from terminal.egress_allow: Egress() = %+v", rep)
	}
	if got := strings.Join(relayArgs(agentbin.FromBytes(nil, nil)), " "); got != hermesDir+"/agent-e3b0c44298fc relay --listen 127.0.0.1:3128" {
		t.Errorf("relayArgs = %q", got)
	}
	if w := strings.Join(open.Warnings(), "; "); !strings.Contains(w, "kubernetes.network_enabled is true") {
		t.Errorf("open Warnings() = %q", w)
	}
}
