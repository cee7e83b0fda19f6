//go:build unix

package agent

import (
	"encoding/json"
	"errors"
	"io"
	"os"
	"testing"
	"time"
)

// TestSilentClientIsGone: once a client has sent a heartbeat, a client that then says
// nothing for the heartbeat's timeout is taken to be gone, as if its stream had ended (where
// the stream outlives a killed client, as a provider's PTY session does): its foreground
// commands are killed and the server ends, though the stream is still open.
func TestSilentClientIsGone(t *testing.T) {
	srv, err := NewServer(Options{StateDir: t.TempDir(), Shell: "sh"})
	if err != nil {
		t.Fatal(err)
	}
	inR, inW := io.Pipe() // stays open: the stream outlives the client
	outR, outW := io.Pipe()
	defer inW.Close()
	served := make(chan error, 1)
	silenced := make(chan struct{})
	srv.opts.OnSilence = func() { close(silenced) }
	go func() { served <- srv.Serve(inR, outW) }()
	go io.Copy(io.Discard, outR)

	w := newFrameWriter(inW)
	beat, _ := json.Marshal(Beat{TimeoutMS: 300})
	if err := w.write(tBeat, 0, beat); err != nil {
		t.Fatal(err)
	}
	pidFile := t.TempDir() + "/pid"
	run, _ := json.Marshal(RunRequest{Script: Bytes("echo $$ > " + pidFile + "; exec sleep 30")})
	if err := w.write(tRun, 1, run); err != nil {
		t.Fatal(err)
	}
	var pid string
	for deadline := time.Now().Add(10 * time.Second); pid == ""; time.Sleep(10 * time.Millisecond) {
		if b, err := os.ReadFile(pidFile); err == nil && len(b) > 1 {
			pid = string(b[:len(b)-1])
		}
		if time.Now().After(deadline) {
			t.Fatal("the command did not start")
		}
	}
	// Nothing more from the client.
	select {
	case <-silenced:
	case <-time.After(10 * time.Second):
		t.Fatal("a client silent for 10 s is still taken to be there (timeout 300 ms)")
	}
	if _, err := os.Stat("/proc/" + pid); err == nil {
		if b, _ := os.ReadFile("/proc/" + pid + "/stat"); len(b) > 0 && !zombie(string(b)) {
			t.Errorf("the silent client's command (pid %s) still runs", pid)
		}
	}
	inR.Close() // a pipe's read can be cut short: Serve ends
	select {
	case err := <-served:
		if !errors.Is(err, errSilent) {
			t.Errorf("Serve = %v; want errSilent", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Serve did not end")
	}
}

func zombie(stat string) bool {
	for i := len(stat) - 1; i > 0; i-- {
		if stat[i] == ')' {
			return i+2 < len(stat) && stat[i+2] == 'Z'
		}
	}
	return false
}
