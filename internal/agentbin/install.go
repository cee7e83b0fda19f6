package agentbin

import (
	"context"
	"errors"
	"fmt"
	"io"
	"path"
	"strconv"
	"strings"

	"github.com/hermes-sandbox/hermes-sandbox/sandbox"
)

// Target is a sandbox the helper is installed in, through a backend's own transport.
type Target interface {
	// Write stores what r yields (size bytes) at p, making p's directory when missing.
	Write(ctx context.Context, p string, r io.Reader, size int64) error
	// Run runs script with /bin/sh -c and the given positional arguments ($1 …), and
	// returns its exit status and what it printed.
	Run(ctx context.Context, script string, args ...string) (code int, output string, err error)
}

// Install puts b at final in the sandbox: the bytes go to a name of their own beside it
// (.up-<random>, so concurrent installs never write one file together), are checked there
// by size and by SHA-256 (sha256sum or shasum, else POSIX cksum), and only then are made
// executable (0700) and renamed into place. A short or corrupt upload is removed and
// reported as an *InstallError with Code ExitCorrupt; it is never installed.
func Install(ctx context.Context, t Target, b *Binary, final string) error {
	tmp := path.Join(path.Dir(final), ".up-"+sandbox.RandomHex(6))
	r, err := b.Open()
	if err != nil {
		return err
	}
	defer r.Close()
	c := &cksum{}
	if err := t.Write(ctx, tmp, io.TeeReader(r, c), b.Size); err != nil {
		_, _, _ = t.Run(context.WithoutCancel(ctx), `rm -f "$1"`, tmp)
		return err
	}
	if c.n != b.Size || c.sum() != b.CRC {
		_, _, _ = t.Run(context.WithoutCancel(ctx), `rm -f "$1"`, tmp)
		return fmt.Errorf("helper %s changed while being uploaded; retry", b.Path)
	}
	code, out, err := t.Run(ctx, InstallScript(b), tmp, final)
	if err != nil {
		return err
	}
	if code != 0 {
		return &InstallError{Path: final, Code: code, Output: strings.TrimSpace(out)}
	}
	return nil
}

// InstallScript checks the file $1 against b and renames it to $2, as Install does.
func InstallScript(b *Binary) string { return "t=$1 f=$2\n" + VerifyScript(b) }

// VerifyScript is the shell text that checks the file named by $t against b's size and
// checksums and renames it to $f with mode 0700; it exits ExitCorrupt (removing $t) when
// they differ, ExitSetup when it cannot make the rename.
func VerifyScript(b *Binary) string {
	size, sha, crc := strconv.FormatInt(b.Size, 10), b.SHA256, strconv.FormatUint(uint64(b.CRC), 10)
	return `bad() { rm -f "$t"; echo "the uploaded helper $1 (short or corrupt): removed" >&2; exit ` + strconv.Itoa(ExitCorrupt) + `; }
n=$(wc -c <"$t") || bad "cannot be read"
[ $n = ` + size + ` ] || bad "has $n bytes, want ` + size + `"
if command -v sha256sum >/dev/null 2>&1; then s=$(sha256sum <"$t"); [ "${s%% *}" = ` + sha + ` ] || bad "has SHA-256 ${s%% *}"
elif command -v shasum >/dev/null 2>&1; then s=$(shasum -a 256 <"$t"); [ "${s%% *}" = ` + sha + ` ] || bad "has SHA-256 ${s%% *}"
elif command -v cksum >/dev/null 2>&1; then s=$(cksum <"$t"); [ "${s%% *}" = ` + crc + ` ] || bad "has cksum ${s%% *}"
fi
chmod 700 "$t" && mv -f "$t" "$f" || { rm -f "$t"; exit ` + strconv.Itoa(ExitSetup) + `; }
`
}

// InstallError says the helper was uploaded but not installed: Code is ExitCorrupt for a
// short or damaged upload, ExitSetup when it could not be made executable or renamed.
type InstallError struct {
	Path   string
	Code   int
	Output string
}

func (e *InstallError) Error() string {
	msg := fmt.Sprintf("install the sandbox helper as %s: exit %d (%s)", e.Path, e.Code, Explain(e.Code))
	if e.Output != "" {
		msg += ": " + e.Output
	}
	return msg
}

// CannotRun reports that the helper cannot be installed in this sandbox at all.
func (e *InstallError) CannotRun() bool { return e.Code != ExitCorrupt }

// IsCorrupt reports whether err says an upload arrived short or damaged.
func IsCorrupt(err error) bool {
	var ie *InstallError
	return errors.As(err, &ie) && ie.Code == ExitCorrupt
}
