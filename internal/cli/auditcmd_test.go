//go:build unix

package cli_test

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/hermes-sandbox/hermes-sandbox/audit"
	"github.com/hermes-sandbox/hermes-sandbox/internal/testenv"
)

// auditLog is where the default config keeps the log of env e.
func (e *env) auditLog() string {
	return filepath.Join(e.dir, ".local", "state", "hermes-sandbox", "audit.log")
}

// initAudit runs `audit init` and returns the key from its last line.
func (e *env) initAudit(args ...string) string {
	e.t.Helper()
	out := e.mustRun(append([]string{"audit", "init"}, args...)...)
	ls := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	key := ls[len(ls)-1]
	if _, err := audit.ParseKey(key); err != nil {
		e.t.Fatalf("the last line of `audit init` is %q, not a key: %v\n%s", key, err, out)
	}
	if !strings.Contains(out, "shown ONCE") {
		e.t.Errorf("audit init does not say the key is shown once:\n%s", out)
	}
	return key
}

func TestAuditInitKeyIsNeverWrittenToDisk(t *testing.T) {
	e := newEnv(t)
	e.mustRun("config", "set", "sandbox", "local")
	key := e.initAudit()
	e.mustRun("exec", "-c", "echo sealed")
	raw, _ := audit.ParseKey(key)
	hexKey := hex.EncodeToString(raw)
	// Nothing under the user's home, config and state holds the key, in any form.
	err := filepath.WalkDir(e.dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() {
			return err
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		if bytes.Contains(b, raw) || bytes.Contains(bytes.ToLower(b), []byte(hexKey)) {
			t.Errorf("%s holds the verification key", p)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if out := e.mustRun("audit", "verify", "--key", key); !strings.Contains(out, "every MAC and the seal") {
		t.Errorf("audit verify --key = %q", out)
	}
	e.environ = append(e.environ, "HERMES_SANDBOX_AUDIT_KEY="+key)
	if out := e.mustRun("audit", "verify"); !strings.Contains(out, "every MAC and the seal") {
		t.Errorf("audit verify with HERMES_SANDBOX_AUDIT_KEY = %q", out)
	}
	if out := e.mustRun("audit", "show", "--session", "default"); !strings.Contains(out, "echo sealed") || !strings.Contains(out, "exit=0") {
		t.Errorf("audit show = %q; want the call with its result", out)
	}
}

func TestAuditInitRefusesOverwriteAndRotates(t *testing.T) {
	e := newEnv(t)
	e.mustRun("config", "set", "sandbox", "local")
	key := e.initAudit()
	e.mustRun("exec", "-c", "echo one")
	code, _, errOut := e.run("", "audit", "init")
	if code == 0 || !strings.Contains(errOut, "--rotate") {
		t.Fatalf("audit init over a log = %d %q; want a refusal naming --rotate", code, errOut)
	}
	if out := e.mustRun("audit", "verify", "--key", key); !strings.Contains(out, "3 records") {
		t.Fatalf("the refused init changed the log: %q", out)
	}
	key2 := e.initAudit("--rotate")
	archives, _ := filepath.Glob(e.auditLog() + ".2*")
	var archive string
	for _, a := range archives {
		if !strings.HasSuffix(a, ".seal") {
			archive = a
		}
	}
	if key2 == key || archive == "" {
		t.Fatalf("rotation: new key %v, archives %v", key2 != key, archives)
	}
	if out := e.mustRun("audit", "verify", "--key", key, "--file", archive); !strings.Contains(out, "4 records") {
		t.Errorf("archived log = %q; want its 3 records and the closing one, sealed", out)
	}
	e.mustRun("audit", "verify", "--key", key2)
	if code, _, _ := e.run("", "audit", "verify", "--key", key); code != 1 {
		t.Errorf("the new log verifies under the old key (exit %d)", code)
	}
}

// The "done means": truncation with a deleted checkpoint, a re-chained edit and a
// whole-log replacement all fail `audit verify --key`.
func TestAuditVerifyKeyCatchesForgeries(t *testing.T) {
	for _, tt := range []struct {
		name   string
		forge  func(t *testing.T, e *env)
		expect string
	}{
		{"truncation with the checkpoint deleted", func(t *testing.T, e *env) {
			b, _ := os.ReadFile(e.auditLog())
			ls := bytes.SplitAfter(b, []byte{'\n'})
			os.WriteFile(e.auditLog(), bytes.Join(ls[:3], nil), 0o600)
			os.Remove(e.auditLog() + ".seal")
		}, "sealing state (.seal beside the log) is missing"},
		{"re-chained edit", func(t *testing.T, e *env) {
			// Edit record 2 and re-hash the chain after it as the package doc describes,
			// keeping each record's MAC: only the key can tell.
			rs, _ := audit.ReadAll(e.auditLog())
			rs[1].Command = "echo innocent"
			var out []byte
			prev := rs[0].Hash
			out = append(out, mustJSON(t, rs[0])...)
			for _, r := range rs[1:] {
				r.PrevHash = prev
				mac := r.MAC
				r.MAC, r.Hash = "", ""
				sum := sha256.Sum256(bytes.TrimSuffix(mustJSON(t, r), []byte{'\n'}))
				r.MAC, r.Hash = mac, hex.EncodeToString(sum[:])
				out = append(out, mustJSON(t, r)...)
				prev = r.Hash
			}
			os.WriteFile(e.auditLog(), out, 0o600)
			rewriteSealHash(t, e.auditLog()+".seal", prev)
			if code, vout, _ := e.run("", "audit", "verify"); code != 0 {
				t.Fatalf("the re-chained log should pass without the key (that is the point): %s", vout)
			}
		}, "line 2 (seq 2): MAC does not verify under the key"},
		{"whole-log replacement", func(t *testing.T, e *env) {
			other := newEnv(t)
			other.mustRun("config", "set", "sandbox", "local")
			other.initAudit()
			other.mustRun("exec", "-c", "echo one")
			other.mustRun("exec", "-c", "echo two")
			for _, ext := range []string{"", ".seal"} {
				b, _ := os.ReadFile(other.auditLog() + ext)
				os.WriteFile(e.auditLog()+ext, b, 0o600)
			}
		}, "the key is for log"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t)
			e.mustRun("config", "set", "sandbox", "local")
			key := e.initAudit()
			e.mustRun("exec", "-c", "echo one")
			e.mustRun("exec", "-c", "echo two")
			e.mustRun("audit", "verify", "--key", key)
			tt.forge(t, e)
			code, out, _ := e.run("", "audit", "verify", "--key", key)
			if code != 1 || !strings.Contains(out, "FAILED") || !strings.Contains(out, tt.expect) {
				t.Errorf("audit verify --key after %s = %d %q; want a failure mentioning %q", tt.name, code, out, tt.expect)
			}
		})
	}
}

// rewriteSealHash points the sealing state at a new last hash, with a valid checksum, as an
// attacker who read the format would: only the seal, which needs the key, stays wrong.
func rewriteSealHash(t *testing.T, path, lastHash string) {
	var st struct {
		V        int    `json:"v"`
		Log      string `json:"log"`
		Count    int64  `json:"count"`
		LastHash string `json:"last_hash"`
		Key      string `json:"key,omitempty"`
		Seal     string `json:"seal"`
		Closed   bool   `json:"closed,omitempty"`
		Sum      string `json:"sum"`
	}
	b, _ := os.ReadFile(path)
	if err := json.Unmarshal(bytes.TrimRight(b, " \n"), &st); err != nil {
		t.Fatal(err)
	}
	st.LastHash, st.Sum = lastHash, ""
	plain, _ := json.Marshal(st)
	sum := sha256.Sum256(plain)
	st.Sum = hex.EncodeToString(sum[:])
	b, _ = json.Marshal(st)
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
}

func mustJSON(t *testing.T, r audit.Record) []byte {
	b, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	return append(b, '\n')
}

func TestPolicyCheckNeverOpensTheAuditLog(t *testing.T) {
	e := newEnv(t)
	log := filepath.Join(e.dir, "never", "audit.log")
	e.mustRun("config", "set", "audit.log_destination", log)
	e.mustRun("policy", "check", "ls")
	if code, _, _ := e.run("ls\nrm -rf /\n", "policy", "check"); code != 0 {
		t.Errorf("policy check batch exit %d", code)
	}
	if _, err := os.Stat(filepath.Dir(log)); !os.IsNotExist(err) {
		t.Errorf("policy check created the audit log's directory (stat: %v)", err)
	}
}

// TestDiskFullRefusesTheCommand puts the log on a real 64 KiB tmpfs, fills it, and runs
// commands until one is refused: that one must not have run, and the log must stay whole.
func TestDiskFullRefusesTheCommand(t *testing.T) {
	mnt := testenv.Tmpfs(t, "64k")
	e := newEnv(t)
	log := filepath.Join(mnt, "audit.log")
	e.mustRun("config", "set", "sandbox", "local")
	e.mustRun("config", "set", "audit.log_destination", log)
	key := e.initAudit()
	testenv.FillFS(t, mnt)
	marks := t.TempDir()
	for i := 0; ; i++ {
		if i > 50 {
			t.Fatal("50 commands ran on a full disk; want a refusal once the log's last block is full")
		}
		mark := filepath.Join(marks, fmt.Sprint(i))
		code, _, errOut := e.run("", "exec", "--", "touch", mark)
		_, statErr := os.Stat(mark)
		if code == 0 {
			if statErr != nil {
				t.Fatalf("command %d exited 0 but did not run: %v", i, statErr)
			}
			continue
		}
		if code != 126 {
			t.Fatalf("command %d exited %d: %s; want 126", i, code, errOut)
		}
		if statErr == nil {
			t.Fatalf("command %d ran although its intent could not be recorded", i)
		}
		for _, want := range []string{log, "disk full", "did not run"} {
			if !strings.Contains(errOut, want) {
				t.Errorf("refusal %q does not say %q", errOut, want)
			}
		}
		t.Logf("command %d refused: %s", i, errOut)
		break
	}
	if out := e.mustRun("audit", "verify", "--key", key, "--file", log); !strings.Contains(out, "ok:") {
		t.Errorf("the log on the full disk does not verify: %q", out)
	}
	// audit.on_failure warn runs the command and says so.
	e.mustRun("config", "set", "audit.on_failure", "warn")
	mark := filepath.Join(marks, "warned")
	code, _, errOut := e.run("", "exec", "--", "touch", mark)
	if _, err := os.Stat(mark); code != 0 || err != nil || !strings.Contains(errOut, "WARNING") || !strings.Contains(errOut, "disk full") {
		t.Errorf("on_failure warn: exit %d, stat %v, stderr %q; want the command run with a loud warning", code, err, errOut)
	}
}

// TestKilledCallerLeavesAnIntent kills the CLI with SIGKILL while its command runs: the intent
// is in the log, shown without a result, and verify warns about it without failing.
// TestKilledCallerLeavesAnIntent: an exec that runs in its own process (terminal.keep_alive
// 0; an owner records the end itself, see TestOwnerKilledCallerKillsCommand) and is killed
// mid-call leaves its intent without a result.
func TestKilledCallerLeavesAnIntent(t *testing.T) {
	e := newEnv(t)
	e.mustRun("config", "set", "sandbox", "local")
	e.mustRun("config", "set", "terminal.keep_alive", "0")
	key := e.initAudit()
	cmd := e.command(t, "exec", "-c", "sleep 3; echo late")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		rs, _ := audit.ReadAll(e.auditLog())
		if len(rs) > 0 && strings.Contains(rs[len(rs)-1].Command, "sleep 3") {
			break
		}
		if time.Now().After(deadline) {
			cmd.Process.Kill()
			t.Fatal("no intent record appeared while the command ran")
		}
		time.Sleep(5 * time.Millisecond)
	}
	cmd.Process.Signal(syscall.SIGKILL)
	cmd.Wait()
	out := e.mustRun("audit", "verify", "--key", key)
	if !strings.Contains(out, "ok:") || !strings.Contains(out, "intent without a result") {
		t.Errorf("audit verify = %q; want ok with a warning about the intent", out)
	}
	if out := e.mustRun("audit", "show", "--session", "default"); !strings.Contains(out, "sleep 3") || !strings.Contains(out, "NO RESULT") {
		t.Errorf("audit show = %q; want the intent shown without a result", out)
	}
}

// TestAuditWitnessFromConfig sends the records to a syslog socket this test made, then
// cross-checks the log against what it received, before and after the log is deleted.
func TestAuditWitnessFromConfig(t *testing.T) {
	dir, err := os.MkdirTemp("", "hs-cli-witness-") // socket paths must stay short
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	sock := filepath.Join(dir, "log")
	conn, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: sock, Net: "unixgram"})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	e := newEnv(t)
	e.mustRun("config", "set", "sandbox", "local")
	missing := filepath.Join(dir, "missing")
	e.mustRun("config", "set", "audit.witness", "syslog")
	e.mustRun("config", "set", "audit.witness_socket", missing)
	if code, _, errOut := e.run("", "exec", "-c", "true"); code != 126 || !strings.Contains(errOut, "witness unavailable") {
		t.Fatalf("exec with an unreachable witness = %d %q; want 126 saying the witness is unavailable", code, errOut)
	}
	e.mustRun("config", "set", "audit.witness_socket", sock)
	key := e.initAudit()
	e.mustRun("exec", "-c", "echo one")
	e.mustRun("exec", "-c", "echo two")
	// The log now holds the init record and two calls: 4 witnessed records after it.
	var received bytes.Buffer
	buf := make([]byte, 8192)
	conn.SetReadDeadline(time.Now().Add(10 * time.Second))
	for range 4 {
		n, _, err := conn.ReadFromUnix(buf)
		if err != nil {
			t.Fatalf("the witness socket received %q, then %v", received.String(), err)
		}
		received.Write(buf[:n])
		received.WriteByte('\n')
	}
	witness := filepath.Join(t.TempDir(), "auth.log")
	os.WriteFile(witness, received.Bytes(), 0o600)
	if out := e.mustRun("audit", "verify", "--key", key, "--witness", witness); !strings.Contains(out, "4 witness entries agree") {
		t.Errorf("audit verify --witness = %q", out)
	}
	// Someone removes the log and its state: the witness still tells, even without the key.
	os.Remove(e.auditLog())
	os.Remove(e.auditLog() + ".seal")
	os.WriteFile(e.auditLog(), nil, 0o600)
	code, out, _ := e.run("", "audit", "verify", "--witness", witness)
	if code != 1 || !strings.Contains(out, "the log was replaced") {
		t.Errorf("audit verify --witness after the log was deleted = %d %q; want a failure", code, out)
	}
}

// TestSealedLogDeletedFailsClosed: deleting both the sealed log and its sealing state does not
// start an unsealed log: calls are refused, verify fails, and a new `audit init` records the
// loss in the new log's first record.
func TestSealedLogDeletedFailsClosed(t *testing.T) {
	e := newEnv(t)
	e.mustRun("config", "set", "sandbox", "local")
	e.initAudit()
	if got := strings.TrimSpace(e.mustRun("config", "get", "audit.sealed")); got != "true" {
		t.Fatalf("audit.sealed after audit init = %q; want true", got)
	}
	e.mustRun("exec", "-c", "true")
	for _, p := range []string{e.auditLog(), e.auditLog() + ".seal", e.auditLog() + ".checkpoint"} {
		if err := os.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
			t.Fatal(err)
		}
	}
	marker := filepath.Join(e.dir, "ran")
	code, _, errOut := e.run("", "exec", "-c", "touch "+marker)
	if code != 126 || !strings.Contains(errOut, "sealing state") {
		t.Errorf("exec with the sealed log deleted: exit %d, %q; want 126 naming the sealing state", code, errOut)
	}
	if _, err := os.Stat(marker); err == nil {
		t.Error("the command ran although its intent could not be recorded in a sealed log")
	}
	if b, err := os.ReadFile(e.auditLog()); err == nil && len(b) > 0 {
		t.Errorf("an unsealed log was started: %q", b)
	}
	// Replaced by an unsealed log: verify without the key fails instead of calling it old.
	if err := os.WriteFile(e.auditLog(), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if code, out, _ := e.run("", "audit", "verify"); code != 1 || !strings.Contains(out, "must be sealed (audit.sealed)") {
		t.Errorf("audit verify of an unsealed log in a sealed installation: exit %d, %q; want 1", code, out)
	}
	os.Remove(e.auditLog())
	code, _, errOut = e.run("", "audit", "init")
	if code != 0 || !strings.Contains(errOut, "WARNING") {
		t.Errorf("audit init after the loss: exit %d, %q; want it made with a warning", code, errOut)
	}
	if b, _ := os.ReadFile(e.auditLog()); !strings.Contains(string(b), "after a loss") {
		t.Errorf("the new log's first record does not record the loss: %s", b)
	}
	e.mustRun("exec", "-c", "true")
}
