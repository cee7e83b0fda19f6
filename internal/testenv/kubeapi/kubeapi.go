// Package kubeapi runs a real kube-apiserver, backed by its own etcd, on loopback for the
// kubernetes backend's tests: one per test process, started on first use and stopped by the
// package's TestMain (Main, or Stop after m.Run). There is no controller-manager, scheduler or
// kubelet: pods are admitted (PodSecurity, ServiceAccount, RuntimeClass, ResourceQuota, ... and
// RBAC authorization are real) but never run, and namespaces are finalized by Namespace itself.
//
// The binary comes from HERMES_KUBE_APISERVER, else the cache scripts/kube-apiserver.sh fills
// (${HERMES_KUBE_CACHE:-/var/cache/hermes-sandbox}/kube-apiserver-v1.37.2); etcd is Debian's
// etcd-server. Without either, Start skips the test (fails it when HERMES_SANDBOX_TEST_REQUIRE
// lists kubernetes).
package kubeapi

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	nodev1 "k8s.io/api/node/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/hermes-sandbox/hermes-sandbox/internal/testenv"
)

// Version is the kube-apiserver release scripts/kube-apiserver.sh builds and Start looks for.
const Version = "v1.37.2"

// What is the requirement's name for testenv.Missing and HERMES_SANDBOX_TEST_REQUIRE.
const What = "kubernetes"

// RuntimeClass is the node.k8s.io/v1 RuntimeClass Start creates (handler "runsc").
const RuntimeClass = "gvisor"

// Users of the tokens in Server.
const (
	AdminUser   = "hermes-admin"   // in group system:masters
	LimitedUser = "hermes-limited" // no RBAC bindings; only what system:authenticated gets
)

// startTimeout bounds how long Start waits for etcd and then the apiserver to be ready; the
// apiserver takes about 4 s on an idle machine, much longer beside a parallel -race build.
const startTimeout = 3 * time.Minute

// Server is a kube-apiserver + etcd on loopback, one per test process. Its fields are read-only:
// tests share them (rest.CopyConfig(Admin) before changing a config).
type Server struct {
	URL          string               // https://127.0.0.1:PORT
	CAData       []byte               // PEM that verifies the serving certificate
	AdminToken   string               // user "hermes-admin", group system:masters
	LimitedToken string               // user "hermes-limited", no RBAC bindings at all
	Admin        *rest.Config         // admin config
	Client       kubernetes.Interface // admin clientset
	Dynamic      dynamic.Interface    // admin dynamic client
	Started      time.Duration        // how long starting etcd and the apiserver took

	dir     string
	thread  *lockedThread
	cleaner dynamic.Interface // admin, without deprecation warnings: Namespace's cleanup
	procs   []*process        // etcd first

	crdMu   sync.Mutex
	crdDirs map[string]bool // guarded by crdMu; directories InstallCRDs has installed
}

var current struct {
	sync.Mutex
	srv      *Server // guarded by the embedded Mutex
	err      error   // guarded by the embedded Mutex; a failed start, reported to every later Start
	missing  string  // guarded by the embedded Mutex; why Start skips, when the binary or etcd is missing
	tried    bool    // guarded by the embedded Mutex
	reported bool    // guarded by the embedded Mutex; err, with the logs' tails, has failed a test
}

// Start returns the process's server, starting etcd and kube-apiserver on first use. Without the
// binary or etcd it calls testenv.Missing (skip, or fail with HERMES_SANDBOX_TEST_REQUIRE); a
// server that fails to start fails the test with the tail of its logs, and every later Start of
// the process with the error's first line. Its tests are in the full tier (testenv.NeedFull).
func Start(t testing.TB) *Server {
	t.Helper()
	testenv.NeedFull(t, What, "a test kube-apiserver with etcd")
	current.Lock()
	defer current.Unlock()
	if !current.tried {
		current.tried = true
		apiserver, etcd, why := binaries()
		if why != "" {
			current.missing = why
		} else {
			current.srv, current.err = start(apiserver, etcd)
		}
	}
	switch {
	case current.missing != "":
		testenv.Missing(t, What, current.missing)
	case current.err != nil && current.reported:
		msg, _, _ := strings.Cut(current.err.Error(), "\n")
		t.Fatalf("kubeapi: %s (logs in the first test that failed to start it)", msg)
	case current.err != nil:
		current.reported = true
		t.Fatalf("kubeapi: %v", current.err)
	}
	return current.srv
}

// Stop stops the server Start started, if any: it kills the apiserver and etcd, waits for them
// and removes their temporary directory. A later Start fails. Call it from TestMain after m.Run
// (Main does).
func Stop() error {
	current.Lock()
	defer current.Unlock()
	current.tried = true
	if current.err == nil && current.missing == "" {
		current.err = errors.New("the server was stopped (Stop ran before this Start)")
	}
	s := current.srv
	current.srv = nil
	if s == nil {
		return nil
	}
	return s.stop()
}

// Main runs the tests, stops the server if one was started and exits; a failure to stop fails
// the run. TestMain calls it. testenv.Main exits by itself, so a TestMain that also wants its
// docker leak check calls m.Run, then Stop, then testenv.RemoveLabelled.
func Main(m *testing.M) {
	code := m.Run()
	if err := Stop(); err != nil {
		fmt.Fprintf(os.Stderr, "FAIL: kubeapi: %v\n", err)
		if code == 0 {
			code = 1
		}
	}
	testenv.RemoveBuilt()
	os.Exit(code)
}

// MainWithDocker is Main for packages whose tests also make docker objects labelled
// label=value (the fake node's pods): after the tests and the server's stop, it removes any
// such object left and fails the run, as testenv.Main does.
func MainWithDocker(m *testing.M, label, value string) {
	testenv.ReportSwept(label)
	code := m.Run()
	if err := Stop(); err != nil {
		fmt.Fprintf(os.Stderr, "FAIL: kubeapi: %v\n", err)
		code = max(code, 1)
	}
	if leaked := testenv.RemoveLabelled(label, value); leaked != "" {
		fmt.Fprintf(os.Stderr, "FAIL: the tests left docker objects behind (now removed): %s\n", leaked)
		code = max(code, 1)
	}
	testenv.RemoveBuilt()
	os.Exit(code)
}

// binaries finds kube-apiserver and etcd, or says why the tests cannot have them.
func binaries() (apiserver, etcd, why string) {
	apiserver = os.Getenv("HERMES_KUBE_APISERVER")
	if apiserver == "" {
		cache := os.Getenv("HERMES_KUBE_CACHE")
		if cache == "" {
			cache = "/var/cache/hermes-sandbox"
		}
		apiserver = filepath.Join(cache, "kube-apiserver-"+Version)
	}
	if fi, err := os.Stat(apiserver); err != nil || fi.IsDir() || fi.Mode()&0o111 == 0 {
		return "", "", fmt.Sprintf("no kube-apiserver binary at %s: build it with scripts/kube-apiserver.sh (about 9 minutes, cached per machine) or point HERMES_KUBE_APISERVER at one", apiserver)
	}
	etcd, err := exec.LookPath("etcd")
	if err != nil {
		etcd = "/usr/bin/etcd"
		if _, err := os.Stat(etcd); err != nil {
			return "", "", "no etcd: apt-get install etcd-server (scripts/test-deps.sh does)"
		}
	}
	return apiserver, etcd, ""
}

// start runs etcd and the apiserver in a new temporary directory and waits until both answer.
func start(apiserver, etcd string) (_ *Server, err error) {
	began := time.Now()
	removeStale()
	dir, err := os.MkdirTemp("", "hermes-kubeapi-")
	if err != nil {
		return nil, fmt.Errorf("create the server's directory: %w", err)
	}
	s := &Server{dir: dir, thread: newLockedThread()}
	defer func() {
		if err != nil {
			err = fmt.Errorf("%w%s", err, s.logTails())
			s.stop()
		}
	}()
	if err := os.WriteFile(filepath.Join(dir, "pid"), []byte(strconv.Itoa(os.Getpid())), 0o600); err != nil {
		return nil, err
	}
	files, err := writeCredentials(dir)
	if err != nil {
		return nil, fmt.Errorf("write certificates and keys: %w", err)
	}
	s.CAData, s.AdminToken, s.LimitedToken = files.caPEM, files.adminToken, files.limitedToken
	ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
	defer cancel()

	ports, err := freePorts(3)
	if err != nil {
		return nil, err
	}
	etcdURL := "http://127.0.0.1:" + strconv.Itoa(ports[0])
	peerURL := "http://127.0.0.1:" + strconv.Itoa(ports[1])
	if err := s.run("etcd", etcd,
		"--name=hermes-test",
		"--data-dir="+filepath.Join(dir, "etcd"),
		"--listen-client-urls="+etcdURL,
		"--advertise-client-urls="+etcdURL,
		"--listen-peer-urls="+peerURL,
		"--initial-advertise-peer-urls="+peerURL,
		"--initial-cluster=hermes-test="+peerURL,
		"--initial-cluster-state=new",
	); err != nil {
		return nil, err
	}
	if err := s.waitReady(ctx, s.procs[0], http.DefaultClient, etcdURL+"/health"); err != nil {
		return nil, fmt.Errorf("etcd at %s: %w", etcdURL, err)
	}

	s.URL = "https://127.0.0.1:" + strconv.Itoa(ports[2])
	if err := s.run("kube-apiserver", apiserver,
		"--etcd-servers="+etcdURL,
		"--bind-address=127.0.0.1",
		"--secure-port="+strconv.Itoa(ports[2]),
		"--cert-dir="+filepath.Join(dir, "certs"),
		"--tls-cert-file="+files.serverCert,
		"--tls-private-key-file="+files.serverKey,
		"--service-account-issuer=https://kubernetes.default.svc",
		"--service-account-key-file="+files.saPub,
		"--service-account-signing-key-file="+files.saKey,
		"--token-auth-file="+files.tokens,
		"--authorization-mode=RBAC",
		// As in real clusters (kubeadm's default): privileged pods are the PodSecurity
		// admission's to refuse, not the apiserver's (whose default, false, refuses them all).
		"--allow-privileged=true",
		"--service-cluster-ip-range=10.96.0.0/24",
		"--profiling=false",
	); err != nil {
		return nil, err
	}
	s.Admin = &rest.Config{
		Host:            s.URL,
		BearerToken:     s.AdminToken,
		TLSClientConfig: rest.TLSClientConfig{CAData: s.CAData},
		QPS:             200,
		Burst:           400,
		Timeout:         time.Minute,
	}
	hc, err := rest.HTTPClientFor(s.Admin)
	if err != nil {
		return nil, err
	}
	if err := s.waitReady(ctx, s.procs[1], hc, s.URL+"/readyz"); err != nil {
		return nil, fmt.Errorf("kube-apiserver at %s: %w", s.URL, err)
	}
	if s.Client, err = kubernetes.NewForConfig(s.Admin); err != nil {
		return nil, err
	}
	if s.Dynamic, err = dynamic.NewForConfig(s.Admin); err != nil {
		return nil, err
	}
	quiet := rest.CopyConfig(s.Admin)
	quiet.WarningHandler = rest.NoWarnings{}
	if s.cleaner, err = dynamic.NewForConfig(quiet); err != nil {
		return nil, err
	}
	rc := &nodev1.RuntimeClass{ObjectMeta: metav1.ObjectMeta{Name: RuntimeClass}, Handler: "runsc"}
	if _, err := s.Client.NodeV1().RuntimeClasses().Create(ctx, rc, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return nil, fmt.Errorf("create RuntimeClass %s: %w", RuntimeClass, err)
	}
	s.Started = time.Since(began)
	return s, nil
}

// process is etcd or the apiserver, with its log file.
type process struct {
	name string
	cmd  *exec.Cmd
	log  string
	done chan struct{} // closed when it has exited; err is set then
	err  error
}

// run starts a process whose output goes to DIR/NAME.log. It is started from the locked thread
// and gets SIGKILL when that thread (so the test process) dies, however hard.
func (s *Server) run(name, bin string, args ...string) error {
	p := &process{name: name, log: filepath.Join(s.dir, name+".log"), done: make(chan struct{})}
	f, err := os.OpenFile(p.log, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return err
	}
	defer f.Close()
	p.cmd = exec.Command(bin, args...)
	p.cmd.Dir = s.dir
	p.cmd.Stdout, p.cmd.Stderr = f, f
	p.cmd.SysProcAttr = procAttr()
	s.thread.do(func() { err = p.cmd.Start() })
	if err != nil {
		return fmt.Errorf("start %s: %w", name, err)
	}
	s.procs = append(s.procs, p)
	go func() {
		p.err = p.cmd.Wait()
		close(p.done)
	}()
	return nil
}

// waitReady polls url until it answers 200, p exits or ctx ends.
func (s *Server) waitReady(ctx context.Context, p *process, hc *http.Client, url string) error {
	var last string
	for {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			return err
		}
		if resp, err := hc.Do(req); err != nil {
			last = err.Error()
		} else {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
			last = resp.Status
		}
		select {
		case <-p.done:
			return fmt.Errorf("%s exited before it was ready: %v", p.name, p.err)
		case <-ctx.Done():
			return fmt.Errorf("not ready after %v (last answer: %s)", startTimeout, last)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// stop kills the processes (apiserver first), waits for them and removes the directory.
func (s *Server) stop() error {
	var errs []error
	for i := len(s.procs) - 1; i >= 0; i-- {
		p := s.procs[i]
		killGroup(p.cmd.Process)
		select {
		case <-p.done:
		case <-time.After(30 * time.Second):
			errs = append(errs, fmt.Errorf("%s (pid %d) did not exit 30 s after SIGKILL", p.name, p.cmd.Process.Pid))
		}
	}
	s.procs = nil
	s.thread.stop()
	if err := os.RemoveAll(s.dir); err != nil {
		errs = append(errs, fmt.Errorf("remove the server's directory: %w", err))
	}
	return errors.Join(errs...)
}

// logTails returns the last lines of each process's log, for an error message.
func (s *Server) logTails() string {
	var b strings.Builder
	for _, p := range s.procs {
		data, err := os.ReadFile(p.log)
		if err != nil {
			continue
		}
		const max = 3000
		if len(data) > max {
			data = data[len(data)-max:]
			if i := strings.IndexByte(string(data), '\n'); i >= 0 {
				data = data[i+1:]
			}
		}
		fmt.Fprintf(&b, "\n--- tail of %s ---\n%s", p.log, strings.TrimRight(string(data), "\n"))
	}
	return b.String()
}

// removeStale removes the directories of earlier test processes that died without Stop (their
// etcd and apiserver died with them, through Pdeathsig).
func removeStale() {
	dirs, _ := filepath.Glob(filepath.Join(os.TempDir(), "hermes-kubeapi-*"))
	for _, d := range dirs {
		data, err := os.ReadFile(filepath.Join(d, "pid"))
		if err != nil {
			continue
		}
		pid, err := strconv.Atoi(strings.TrimSpace(string(data)))
		if err != nil || pid <= 0 {
			continue
		}
		if processGone(pid) {
			os.RemoveAll(d)
		}
	}
}

// freePorts returns n distinct loopback ports that were free a moment ago.
func freePorts(n int) ([]int, error) {
	var ports []int
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, fmt.Errorf("find a free loopback port: %w", err)
		}
		defer l.Close()
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}

// randomToken returns 32 random bytes in hex.
func randomToken() string {
	b := make([]byte, 32)
	rand.Read(b)
	return hex.EncodeToString(b)
}

// lockedThread runs functions on one OS thread that stays locked until stop. Pdeathsig fires
// when the thread that forked the child exits, and Go retires threads (one whose goroutine
// exits while locked); forking from a thread that lives until Stop keeps the children alive
// exactly as long as the test process, or the server.
type lockedThread struct {
	fns  chan func()
	done chan struct{}
}

func newLockedThread() *lockedThread {
	lt := &lockedThread{fns: make(chan func()), done: make(chan struct{})}
	go func() {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		defer close(lt.done)
		for fn := range lt.fns {
			fn()
		}
	}()
	return lt
}

// do runs fn on the thread and returns when it has.
func (lt *lockedThread) do(fn func()) {
	ran := make(chan struct{})
	lt.fns <- func() { fn(); close(ran) }
	<-ran
}

// stop ends the thread's goroutine, after its children have been killed.
func (lt *lockedThread) stop() {
	close(lt.fns)
	<-lt.done
}
