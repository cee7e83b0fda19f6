//go:build unix

package ssh

import (
	"strings"
	"testing"
	"time"
)

// A hardened server without the sftp subsystem still gets the helper: through sftp-server on
// an exec channel when the program exists, else through cat, checked by hash.
func TestServerWithoutSFTPSubsystem(t *testing.T) {
	for _, c := range []struct {
		name    string
		servers []string
		want    string
	}{
		{"sftp-server over exec", sftpServers, "installing the sandbox helper on"},
		{"no sftp-server at all", nil, "over an exec channel (no SFTP)"},
	} {
		t.Run(c.name, func(t *testing.T) {
			saved := sftpServers
			sftpServers = c.servers
			defer func() { sftpServers = saved }()
			d := newTestSSHD(t, noSFTP)
			var progress syncBuffer
			b := d.backendWith(t, d.config(), &progress, Options{})
			sess, err := b.Open(testCtx(t, 90*time.Second), "nosftp")
			if err != nil {
				t.Fatalf("Open on a server without SFTP = %v", err)
			}
			defer sess.Close()
			if _, ok := sess.(*shellSession); ok {
				t.Fatalf("fell back to the plain shell; want the helper (progress: %s)", progress.String())
			}
			if res := mustExec(t, sess, "cd /tmp && export NOSFTP=1"); res.ExitCode != 0 {
				t.Fatalf("exec = %+v", res)
			}
			if res := mustExec(t, sess, `echo "$PWD $NOSFTP"`); res.Stdout != "/tmp 1\n" {
				t.Errorf("state did not persist: %q", res.Stdout)
			}
			if !strings.Contains(progress.String(), c.want) {
				t.Errorf("progress = %q; want %q", progress.String(), c.want)
			}
			if viaSFTP := c.servers != nil; viaSFTP == strings.Contains(progress.String(), "no SFTP") {
				t.Errorf("progress = %q; the upload took the wrong path", progress.String())
			}
		})
	}
}
