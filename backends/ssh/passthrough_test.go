//go:build unix

package ssh

import (
	"testing"
	"time"
)

// TestEnvPassthroughReachesRemote: names in terminal.env_passthrough reach the remote session
// through the helper protocol (not the command line), also for a session that already
// existed when the name was added. The plain-shell fallback gets them too, over its stdin.
func TestEnvPassthroughReachesRemote(t *testing.T) {
	for _, force := range []bool{false, true} {
		t.Run(map[bool]string{false: "helper", true: "plain-shell"}[force], func(t *testing.T) { testEnvPassthrough(t, force) })
	}
}

func testEnvPassthrough(t *testing.T, forceShell bool) {
	d := newTestSSHD(t)
	cfg := d.config()
	fo := d.factory(t, cfg, nil)
	fo.Environ = append(fo.Environ, "HERMES_PT_TOKEN=tok-value-1234", "HERMES_NOT_LISTED=nope")
	b, err := NewWithOptions(cfg.SSH, fo, Options{SSHConfig: "none", ForceShell: forceShell})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	sess, err := b.Open(testCtx(t, 30*time.Second), "pt")
	if err != nil {
		t.Fatal(err)
	}
	if res := mustExec(t, sess, `echo "${HERMES_PT_TOKEN-unset} ${HERMES_NOT_LISTED-unset}"`); res.Stdout != "unset unset\n" {
		t.Errorf("before listing: %q", res.Stdout)
	}
	sess.Close()
	b.Close()

	cfg.Terminal.EnvPassthrough = []string{"HERMES_PT_TOKEN"}
	fo.EnvPassthrough = cfg.Terminal.EnvPassthrough
	b2, err := NewWithOptions(cfg.SSH, fo, Options{SSHConfig: "none", ForceShell: forceShell})
	if err != nil {
		t.Fatal(err)
	}
	defer b2.Close()
	sess2, err := b2.Open(testCtx(t, 30*time.Second), "pt")
	if err != nil {
		t.Fatal(err)
	}
	defer sess2.Close()
	res := mustExec(t, sess2, `echo "${HERMES_PT_TOKEN-unset} ${HERMES_NOT_LISTED-unset}"; for p in /proc/[0-9]*; do tr '\0' ' ' < $p/cmdline 2>/dev/null; echo; done | grep -c 'tok-value-123[4]' || true`)
	if res.Stdout != "tok-value-1234 unset\n0\n" {
		t.Errorf("after listing HERMES_PT_TOKEN: %q; want the value, the unlisted name unset, and the value on no command line", res.Stdout)
	}
}
