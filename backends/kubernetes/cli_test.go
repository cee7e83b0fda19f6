package kubernetes_test

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/hermes-sandbox/hermes-sandbox/backends/kubernetes/kubetest"
	"github.com/hermes-sandbox/hermes-sandbox/internal/agentbin"
	"github.com/hermes-sandbox/hermes-sandbox/internal/cli"
	"github.com/hermes-sandbox/hermes-sandbox/internal/testenv"
	"github.com/hermes-sandbox/hermes-sandbox/internal/testenv/dockerimage"
	"github.com/hermes-sandbox/hermes-sandbox/internal/testenv/kubeapi"
)

// cliLabel is the docker label key the package's TestMain checks; cliRun is this file's own
// value, checked here (TestMain checks only the internal tests' value).
const cliLabel = "hermes-sandbox.test"

var cliRun = fmt.Sprintf("k8s-cli-%d-%d", os.Getpid(), time.Now().UnixNano()%1_000_000)

// TestCLI: `hermes-sandbox --sandbox kubernetes …` as a user runs it, each call a separate CLI
// run with its own backend, against the real kube-apiserver and the fake docker-backed node,
// in a namespace that enforces the restricted Pod Security profile. Exit codes, streams and
// shell state across CLI runs, the pod's uid, a timeout killing the tree, sessions list and
// rm (the pod is gone afterwards), and doctor with full and with no permissions.
func TestCLI(t *testing.T) {
	// Registered first, so it runs after the node's cleanup: nothing of ours may be left.
	t.Cleanup(func() {
		if leaked := testenv.RemoveLabelled(cliLabel, cliRun); leaked != "" {
			t.Errorf("the CLI test left docker objects behind (now removed): %s", leaked)
		}
	})
	api := kubeapi.Start(t)
	image := dockerimage.Busybox(t, "the kubernetes CLI test's fake node", testenv.DefaultRootfs)
	helper := testenv.AgentBinary(t)
	node := kubetest.StartNode(t, api, kubetest.Options{Label: cliLabel, Value: cliRun})
	ns := api.Namespace(t, map[string]string{"pod-security.kubernetes.io/enforce": "restricted"})
	admin := node.Kubeconfig(t, api.AdminToken, ns)
	limited := node.Kubeconfig(t, api.LimitedToken, ns)

	dir := t.TempDir()
	environ := func(kubeconfig string) []string {
		return []string{"HOME=" + dir, "PATH=/usr/bin:/bin",
			"XDG_CONFIG_HOME=" + filepath.Join(dir, "config"), "XDG_STATE_HOME=" + filepath.Join(dir, "state"),
			agentbin.EnvVar + "=" + helper,
			"KUBECONFIG=" + kubeconfig,
			"HERMES_SANDBOX_KUBERNETES_IMAGE=" + image,
			"HERMES_SANDBOX_KUBERNETES_WORKSPACE_SIZE=256m",
			"HERMES_SANDBOX_KUBERNETES_START_TIMEOUT=1m",
			// doctor checks every backend: keep the hosted ones on loopback, whatever they do
			// without credentials.
			"HERMES_SANDBOX_MODAL_SERVER_URL=http://127.0.0.1:9",
			"HERMES_SANDBOX_DAYTONA_API_URL=http://127.0.0.1:9",
			"HERMES_SANDBOX_VERCEL_API_URL=http://127.0.0.1:9",
		}
	}
	runWith := func(kubeconfig string, args ...string) (int, string, string) {
		t.Helper()
		ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
		defer cancel()
		var out, errb bytes.Buffer
		code := cli.RunWith(ctx, append([]string{"--sandbox", "kubernetes"}, args...), strings.NewReader(""), &out, &errb, environ(kubeconfig))
		return code, out.String(), errb.String()
	}
	run := func(args ...string) (int, string, string) {
		t.Helper()
		return runWith(admin, args...)
	}
	ourPods := func() []string {
		t.Helper()
		ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
		defer cancel()
		list, err := api.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "hermes-sandbox=1"})
		if err != nil {
			t.Fatalf("list pods in %s: %v", ns, err)
		}
		var names []string
		for _, p := range list.Items {
			names = append(names, p.Name)
		}
		return names
	}

	if code, out, errOut := run("exec", "--", "echo", "hi"); code != 0 || out != "hi\n" {
		t.Fatalf("exec -- echo hi = %d %q %q; want 0 %q", code, out, errOut, "hi\n")
	}
	if code, _, errOut := run("exec", "-c", "mkdir -p /tmp/w && cd /tmp/w && export HERMES_X=1; exit 3"); code != 3 {
		t.Errorf("exec 'cd, export; exit 3' = %d (%q); want 3", code, errOut)
	}
	if code, out, errOut := run("exec", "-c", `pwd; echo "$HERMES_X"; echo err >&2`); code != 0 || out != "/tmp/w\n1\n" || errOut != "err\n" {
		t.Errorf("state across CLI runs: %d %q %q; want 0 %q %q", code, out, errOut, "/tmp/w\n1\n", "err\n")
	}
	if code, out, errOut := run("exec", "-c", "id -u"); code != 0 || out != "1000\n" {
		t.Errorf("exec 'id -u' = %d %q %q; want 0 %q", code, out, errOut, "1000\n")
	}
	if pods := ourPods(); len(pods) != 1 {
		t.Errorf("pods after four CLI runs of one session = %v; want one", pods)
	}

	// A timeout kills the command's whole tree, well before the sleep would end.
	start := time.Now()
	code, out, errOut := run("exec", "--timeout", "2s", "-c", "sleep 617 & sleep 617")
	took := time.Since(start)
	t.Logf("exec --timeout 2s: exit %d after %s", code, took.Round(time.Millisecond))
	if code != 124 || took > 30*time.Second {
		t.Errorf("exec --timeout 2s 'sleep 617 & sleep 617' = %d after %s (%q %q); want 124 within 30s", code, took.Round(time.Millisecond), out, errOut)
	}
	if !strings.Contains(errOut, "timed out after 2s") {
		t.Errorf("exec --timeout 2s: stderr %q does not say it timed out", errOut)
	}
	// ps sees processes (its own line), and neither sleep is among them.
	if code, out, errOut := run("exec", "-c", "ps -o pid,args"); code != 0 || !strings.Contains(out, "ps -o pid,args") || strings.Contains(out, "sleep 617") {
		t.Errorf("after the timeout, ps = %d %q %q; want its own line and no sleep 617", code, out, errOut)
	}

	if code, out, errOut := run("sessions", "list"); code != 0 || !strings.Contains(out, "default") {
		t.Errorf("sessions list = %d %q %q; want default listed", code, out, errOut)
	}
	code, out, errOut = run("doctor")
	t.Logf("doctor (exit %d):\n%s", code, out)
	if code != 0 || !strings.Contains(out, "* ok   kubernetes") {
		t.Errorf("doctor = %d: kubernetes is not selected and usable:\n%s\n%s", code, out, errOut)
	}
	if !strings.Contains(out, "namespace "+ns) || !strings.Contains(out, "NetworkPolicy") {
		t.Errorf("doctor does not name the namespace %s and the NetworkPolicy:\n%s", ns, out)
	}

	if code, out, errOut := run("sessions", "rm", "default"); code != 0 || out != "removed default\n" {
		t.Errorf("sessions rm default = %d %q %q; want 0 %q", code, out, errOut, "removed default\n")
	}
	if pods := ourPods(); len(pods) != 0 {
		t.Errorf("pods after sessions rm default = %v; want none", pods)
	}

	// Credentials without RBAC bindings: doctor names what is missing and fails.
	code, out, errOut = runWith(limited, "doctor")
	t.Logf("doctor with no permissions (exit %d):\n%s", code, out)
	if code == 0 || !strings.Contains(out, "FAIL kubernetes") || !strings.Contains(out, "create pods") {
		t.Errorf("doctor with no permissions = %d; want non-zero and a FAIL naming \"create pods\":\n%s\n%s", code, out, errOut)
	}

	// setup writes the settings (kubernetes.kubeconfig now wins over $KUBECONFIG, so it comes
	// last) and proves them with a real command in a pod.
	code, out, errOut = run("setup", "kubernetes", "--non-interactive", "--set", "kubernetes.kubeconfig="+admin)
	if code != 0 || !strings.Contains(out, "OK: kubernetes works (uid 1000, cwd /workspace") {
		t.Errorf("setup kubernetes = %d:\n%s\n%s", code, out, errOut)
	}
	if code, out, _ := run("config", "get", "kubernetes.kubeconfig"); code != 0 || strings.TrimSpace(out) != admin {
		t.Errorf("config get kubernetes.kubeconfig after setup = %d %q; want %s", code, out, admin)
	}
	if pods := ourPods(); len(pods) != 0 {
		t.Errorf("pods after setup's test = %v; want none (its session is removed)", pods)
	}
}
