package ssh

import (
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strings"
	"sync"

	gossh "golang.org/x/crypto/ssh"
	sshagent "golang.org/x/crypto/ssh/agent"
	"golang.org/x/term"
)

// PromptFunc asks a person for a secret (a key passphrase or a password) and returns it.
// It returns an error when nobody can be asked.
type PromptFunc func(prompt string) (string, error)

// ErrNoTerminal says a secret was needed but there is no terminal to ask on.
var ErrNoTerminal = errors.New("no terminal to ask on")

// terminalPrompt asks on the controlling terminal (/dev/tty), without echo.
func terminalPrompt(prompt string) (string, error) {
	tty, err := os.OpenFile("/dev/tty", os.O_RDWR, 0)
	if err != nil {
		return "", ErrNoTerminal
	}
	defer tty.Close()
	if !term.IsTerminal(int(tty.Fd())) {
		return "", ErrNoTerminal
	}
	fmt.Fprint(tty, prompt)
	b, err := term.ReadPassword(int(tty.Fd()))
	fmt.Fprintln(tty)
	if err != nil {
		return "", fmt.Errorf("read from terminal: %w", err)
	}
	return string(b), nil
}

// authState runs authentication for one hop and remembers what it tried, so a failure can
// say what to do.
type authState struct {
	ep       endpoint
	s        *settings
	prompt   PromptFunc
	keys     *keyCache
	tried    []string
	problems []string
	step     int
	closers  []io.Closer // ssh-agent connections, closed after the handshake
	// local runs local work (key decryption, passphrase prompts) off the connect timeout.
	local func(func())
}

// offClock runs f through a.local when there is one.
func (a *authState) offClock(f func()) {
	if a.local == nil {
		f()
		return
	}
	a.local(f)
}

// close releases what authentication opened.
func (a *authState) close() {
	for _, c := range a.closers {
		c.Close()
	}
}

// keyCache keeps decrypted keys for the life of a backend, so a reconnect does not ask for a
// passphrase again.
type keyCache struct {
	mu      sync.Mutex
	signers map[string]gossh.Signer // guarded by mu
}

func (kc *keyCache) get(path string) gossh.Signer {
	kc.mu.Lock()
	defer kc.mu.Unlock()
	return kc.signers[path]
}

func (kc *keyCache) put(path string, s gossh.Signer) {
	kc.mu.Lock()
	defer kc.mu.Unlock()
	if kc.signers == nil {
		kc.signers = map[string]gossh.Signer{}
	}
	kc.signers[path] = s
}

// next is the ClientConfig.AuthCallback: ssh-agent keys first, then key files (an encrypted
// key is decrypted only if the server would accept it), then a password if allowed.
func (a *authState) next(ctx *gossh.ClientAuthContext) (gossh.AuthMethod, error) {
	allowed := func(m string) bool {
		for _, x := range ctx.AllowedMethods {
			if x == m {
				return true
			}
		}
		return false
	}
	for {
		a.step++
		switch a.step {
		case 1:
			if !allowed("publickey") || a.s.authSock == "" {
				continue
			}
			signers := a.agentSigners()
			if len(signers) == 0 {
				continue
			}
			return gossh.PublicKeys(signers...), nil
		case 2:
			if !allowed("publickey") {
				continue
			}
			signers := a.fileSigners()
			if len(signers) == 0 {
				continue
			}
			return gossh.PublicKeys(signers...), nil
		case 3:
			if !a.s.passwordAuth {
				continue
			}
			if allowed("password") {
				a.tried = append(a.tried, "password")
				return gossh.PasswordCallback(a.password), nil
			}
			if allowed("keyboard-interactive") {
				a.tried = append(a.tried, "password (keyboard-interactive)")
				return gossh.KeyboardInteractive(a.keyboardInteractive), nil
			}
		default:
			return nil, nil
		}
	}
}

func (a *authState) agentSigners() []gossh.Signer {
	conn, err := net.Dial("unix", a.s.authSock)
	if err != nil {
		a.problems = append(a.problems, fmt.Sprintf("ssh-agent at %s is not reachable (%v)", a.s.authSock, err))
		return nil
	}
	// The agent connection must stay open while its signers are used: until the handshake
	// ends.
	a.closers = append(a.closers, conn)
	signers, err := sshagent.NewClient(conn).Signers()
	if err != nil {
		a.problems = append(a.problems, fmt.Sprintf("ssh-agent at %s: %v", a.s.authSock, err))
		return nil
	}
	a.tried = append(a.tried, fmt.Sprintf("ssh-agent (%d key(s))", len(signers)))
	if len(signers) == 0 {
		return nil
	}
	return signers
}

func (a *authState) fileSigners() []gossh.Signer {
	var out []gossh.Signer
	for _, k := range a.ep.keys {
		if s := a.keys.get(k.path); s != nil {
			a.tried = append(a.tried, "key "+k.path)
			out = append(out, s)
			continue
		}
		s, err := a.loadKey(k)
		if err != nil {
			a.problems = append(a.problems, err.Error())
			continue
		}
		if s != nil {
			a.tried = append(a.tried, "key "+k.path)
			out = append(out, s)
		}
	}
	return out
}

// KeyFileError is a private key file that cannot be used.
type KeyFileError struct {
	Path string
	Err  error
}

func (e *KeyFileError) Error() string { return "key " + e.Path + ": " + e.Err.Error() }
func (e *KeyFileError) Unwrap() error { return e.Err }

// errKeyPermissions is why a key readable by others is refused.
var errKeyPermissions = errors.New("permissions are too open")

// loadKey reads one key file. A missing default key gives (nil, nil).
func (a *authState) loadKey(k keyFile) (gossh.Signer, error) {
	fi, err := os.Stat(k.path)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) && !k.explicit {
			return nil, nil
		}
		if errors.Is(err, os.ErrNotExist) {
			return nil, &KeyFileError{k.path, fmt.Errorf("no such file (check ssh.key or IdentityFile in ~/.ssh/config)")}
		}
		return nil, &KeyFileError{k.path, err}
	}
	if perm := fi.Mode().Perm(); perm&0o077 != 0 {
		return nil, &KeyFileError{k.path, fmt.Errorf("%w: mode %04o lets other users read it, so it is ignored (as OpenSSH does); run `chmod 600 %s`", errKeyPermissions, perm, k.path)}
	}
	pem, err := os.ReadFile(k.path)
	if err != nil {
		return nil, &KeyFileError{k.path, err}
	}
	s, err := gossh.ParsePrivateKey(pem)
	if err == nil {
		a.keys.put(k.path, s)
		return s, nil
	}
	var pm *gossh.PassphraseMissingError
	if !errors.As(err, &pm) {
		return nil, &KeyFileError{k.path, fmt.Errorf("not a usable private key: %w", err)}
	}
	if a.s.passphrase != "" {
		var s gossh.Signer
		var err error
		a.offClock(func() { s, err = gossh.ParsePrivateKeyWithPassphrase(pem, []byte(a.s.passphrase.Reveal())) })
		if err != nil {
			if errors.Is(err, x509.IncorrectPasswordError) {
				return nil, &KeyFileError{k.path, errors.New("ssh.key_passphrase does not decrypt it: fix it with `hermes-sandbox config set ssh.key_passphrase …`")}
			}
			return nil, &KeyFileError{k.path, err}
		}
		a.keys.put(k.path, s)
		return s, nil
	}
	pub := pm.PublicKey
	if pub == nil {
		if b, err := os.ReadFile(k.path + ".pub"); err == nil {
			pub, _, _, _, _ = gossh.ParseAuthorizedKey(b)
		}
	}
	ls := &lazySigner{path: k.path, pem: pem, pub: pub, prompt: a.prompt, cache: a.keys, local: a.offClock}
	if pub == nil {
		// The public half is unknown, so the server cannot be asked first: decrypt now.
		if err := ls.decrypt(); err != nil {
			return nil, err
		}
		return ls.signer, nil
	}
	return ls, nil
}

// lazySigner is an encrypted key whose passphrase is asked for only when the server has
// accepted its public half and a signature is needed.
type lazySigner struct {
	path   string
	pem    []byte
	pub    gossh.PublicKey
	prompt PromptFunc
	cache  *keyCache
	local  func(func()) // runs the prompt and the decryption off the connect timeout

	mu     sync.Mutex
	signer gossh.Signer // guarded by mu
}

func (l *lazySigner) decrypt() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.signer != nil {
		return nil
	}
	prompt := l.prompt
	if prompt == nil {
		prompt = terminalPrompt
	}
	local := l.local
	if local == nil {
		local = func(f func()) { f() }
	}
	for attempt := 0; attempt < 3; attempt++ {
		var pass string
		var err error
		local(func() { pass, err = prompt(fmt.Sprintf("Enter passphrase for key '%s': ", l.path)) })
		if err != nil {
			return &KeyFileError{l.path, fmt.Errorf("it is encrypted and the passphrase cannot be asked for (%w): set it with `hermes-sandbox "+
				"config set ssh.key_passphrase …` (stored in secrets.yaml), or add the key to ssh-agent", err)}
		}
		var s gossh.Signer
		local(func() { s, err = gossh.ParsePrivateKeyWithPassphrase(l.pem, []byte(pass)) })
		if errors.Is(err, x509.IncorrectPasswordError) {
			continue
		}
		if err != nil {
			return &KeyFileError{l.path, err}
		}
		l.signer = s
		l.cache.put(l.path, s)
		return nil
	}
	return &KeyFileError{l.path, errors.New("wrong passphrase (3 attempts)")}
}

func (l *lazySigner) PublicKey() gossh.PublicKey { return l.pub }

func (l *lazySigner) Sign(rand io.Reader, data []byte) (*gossh.Signature, error) {
	if err := l.decrypt(); err != nil {
		return nil, err
	}
	return l.signer.Sign(rand, data)
}

func (l *lazySigner) SignWithAlgorithm(rand io.Reader, data []byte, algorithm string) (*gossh.Signature, error) {
	if err := l.decrypt(); err != nil {
		return nil, err
	}
	if as, ok := l.signer.(gossh.AlgorithmSigner); ok {
		return as.SignWithAlgorithm(rand, data, algorithm)
	}
	return l.signer.Sign(rand, data)
}

func (l *lazySigner) Algorithms() []string { return algorithmsForKeyType(l.pub.Type()) }

func (a *authState) password() (string, error) {
	if a.s.password != "" {
		return a.s.password.Reveal(), nil
	}
	prompt := a.prompt
	if prompt == nil {
		prompt = terminalPrompt
	}
	p, err := prompt(fmt.Sprintf("%s's password: ", a.ep.user+"@"+a.ep.host))
	if err != nil {
		a.problems = append(a.problems, fmt.Sprintf("password: %v: set it with `hermes-sandbox config set ssh.password …`", err))
		return "", err
	}
	return p, nil
}

func (a *authState) keyboardInteractive(_, _ string, questions []string, echos []bool) ([]string, error) {
	answers := make([]string, len(questions))
	for i, q := range questions {
		if echos[i] || !strings.Contains(strings.ToLower(q), "password") {
			return nil, fmt.Errorf("keyboard-interactive question %q is not a password prompt", q)
		}
		p, err := a.password()
		if err != nil {
			return nil, err
		}
		answers[i] = p
	}
	return answers, nil
}

// AuthError says the server accepted none of the credentials offered.
type AuthError struct {
	Endpoint string
	Tried    []string
	Problems []string
	Err      error
}

func (e *AuthError) Error() string {
	var b strings.Builder
	b.WriteString("authentication failed")
	if len(e.Problems) > 0 {
		b.WriteString(": " + strings.Join(e.Problems, "; "))
	}
	if len(e.Tried) > 0 {
		fmt.Fprintf(&b, "; offered: %s", strings.Join(e.Tried, ", "))
	} else {
		b.WriteString("; there were no usable credentials to offer")
	}
	b.WriteString(" (put your public key in ~/.ssh/authorized_keys on the server with ssh-copy-id, set ssh.key, load the key into ssh-agent, or check ssh.user)")
	return b.String()
}

func (e *AuthError) Unwrap() error { return e.Err }
