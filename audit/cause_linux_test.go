package audit

import (
	"context"
	"errors"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/hermes-sandbox/hermes-sandbox/internal/testenv"
)

// TestIntentErrorNamesTheCause fails real writes (a full tmpfs, a read-only one) and checks
// that the error names the log and says why in words.
func TestIntentErrorNamesTheCause(t *testing.T) {
	mnt := testenv.Tmpfs(t, "64k")
	path := mnt + "/audit.log"
	if _, err := Init(path, InitOptions{}); err != nil {
		t.Fatal(err)
	}
	l, err := Open(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	testenv.FillFS(t, mnt)
	var last error
	for i := 0; i < 100 && last == nil; i++ {
		_, last = l.Intent(context.Background(), Record{Tool: ToolExec, Command: strings.Repeat("x", 500), Decision: DecisionAllowed})
	}
	var ie *IntentError
	if !errors.As(last, &ie) || ie.Warn || Cause(ie.Err) != "disk full" || !strings.Contains(last.Error(), path) {
		t.Fatalf("Intent on a full disk = %v; want an IntentError saying disk full and naming %s", last, path)
	}
	l.Close() // a file open for writing keeps the remount busy
	if rep := mustVerify(t, path); !rep.OK {
		t.Errorf("the log on the full disk = %v; want every record whole (a partial write cut off)", rep)
	}
	if err := unix.Mount("", mnt, "", unix.MS_REMOUNT|unix.MS_RDONLY, ""); err != nil {
		t.Skipf("cannot remount the tmpfs read-only: %v", err)
	}
	if _, err := Open(path, Options{}); err == nil || Cause(err) != "read-only file system" {
		t.Errorf("Open on a read-only file system = %v (cause %q); want read-only file system", err, Cause(err))
	}
}
