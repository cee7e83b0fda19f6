package ssh

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net"
	"os"
	"os/user"
	"path/filepath"
	"strconv"
	"time"

	"github.com/hermes-sandbox/hermes-sandbox/config"
	"github.com/hermes-sandbox/hermes-sandbox/sandbox"
)

// endpoint is one host to connect to (the target or a jump host), fully resolved.
type endpoint struct {
	alias string // what the user wrote (ssh.host or a ProxyJump entry)
	host  string // the real host name or address (HostName)
	port  int
	user  string
	keys  []keyFile
}

// addr is host:port for dialing and for known_hosts.
func (e endpoint) addr() string { return net.JoinHostPort(e.host, strconv.Itoa(e.port)) }

// String is user@host:port, for messages.
func (e endpoint) String() string { return e.user + "@" + e.addr() }

// keyFile is a private key to offer.
type keyFile struct {
	path string
	// explicit is true when the user named this key (ssh.key set, or IdentityFile): a missing
	// explicit key is reported; a missing default key is skipped quietly.
	explicit bool
}

// settings is everything a connection needs, resolved once from the configuration,
// ~/.ssh/config and the caller's environment.
type settings struct {
	target         endpoint
	jumps          []endpoint
	knownHosts     string
	policy         config.HostKeyPolicy
	connectTimeout time.Duration
	keepalive      time.Duration
	passwordAuth   bool
	password       config.Secret
	passphrase     config.Secret
	authSock       string
	remoteCwd      string
	shell          string
}

// poolKey identifies a connection that sessions may share: the same account on the same
// host, reached the same way, trusted through the same known_hosts and authenticated with
// the same credentials. (Secrets enter only as a hash.)
func (s *settings) poolKey() string {
	h := sha256.New()
	fmt.Fprintf(h, "%q %q %d %d %v %q %q\n", s.knownHosts, s.policy, s.connectTimeout, s.keepalive, s.passwordAuth, s.authSock,
		sha256.Sum256([]byte(s.password.Reveal()+"\x00"+s.passphrase.Reveal())))
	for _, e := range append([]endpoint{s.target}, s.jumps...) {
		fmt.Fprintf(h, "%s %v\n", e.String(), e.keys)
	}
	return s.target.String() + " " + hex.EncodeToString(h.Sum(nil))[:16]
}

// defaultIdentities are the keys OpenSSH tries when nothing names one.
var defaultIdentities = []string{"~/.ssh/id_ed25519", "~/.ssh/id_ecdsa", "~/.ssh/id_rsa"}

// resolveSettings combines the ssh config section with ~/.ssh/config. Precedence: a value set
// in hermes-sandbox's configuration wins, then ~/.ssh/config, then OpenSSH's defaults.
func resolveSettings(sc config.SSHConfig, fo sandbox.FactoryOptions, o Options) (*settings, error) {
	if sc.Host == "" {
		return nil, fmt.Errorf("ssh.host is not set: run `hermes-sandbox setup ssh` or `hermes-sandbox config set ssh.host HOST`: %w", sandbox.ErrInvalidConfig)
	}
	home := localHome(fo)
	localUser := localUserName(fo)
	sshConfigPath := o.SSHConfig
	if sshConfigPath == "" {
		sshConfigPath = filepath.Join(home, ".ssh", "config")
	}
	var sshCfg *sshConfig
	if sshConfigPath == "none" {
		sshCfg = &sshConfig{}
	} else {
		var err error
		if sshCfg, err = parseSSHConfigFile(sshConfigPath, home); err != nil {
			return nil, fmt.Errorf("%w: %w", err, sandbox.ErrInvalidConfig)
		}
	}
	portSet := fo.IsExplicit("ssh.port") || sc.Port != 22
	keySet := fo.IsExplicit("ssh.key") || sc.Key != config.NewConfig().SSH.Key

	resolve := func(alias, user string, port int, portExplicit bool, key string, keyExplicit bool) endpoint {
		hc := sshCfg.lookup(alias, localUser)
		e := endpoint{alias: alias, host: alias, port: 22, user: localUser}
		if hc.Port != 0 {
			e.port = hc.Port
		}
		if portExplicit || (port != 0 && hc.Port == 0) {
			e.port = port
		}
		if hc.User != "" {
			e.user = hc.User
		}
		if user != "" {
			e.user = user
		}
		if hc.HostName != "" {
			e.host = expandTokens(hc.HostName, tokenValues{host: alias, port: e.port, user: e.user, localUser: localUser, home: home})
		}
		tv := tokenValues{host: e.host, port: e.port, user: e.user, localUser: localUser, home: home}
		seen := map[string]bool{}
		add := func(p string, explicit bool) {
			p = expandTokens(p, tv)
			if p == "" || seen[p] {
				return
			}
			seen[p] = true
			e.keys = append(e.keys, keyFile{path: p, explicit: explicit})
		}
		if key != "" {
			add(key, keyExplicit)
		}
		for _, f := range hc.IdentityFiles {
			add(f, true)
		}
		if len(hc.IdentityFiles) == 0 && !keyExplicit {
			for _, f := range defaultIdentities {
				add(f, false)
			}
		}
		return e
	}

	s := &settings{
		policy:         sc.StrictHostKeyChecking,
		connectTimeout: sc.ConnectTimeout,
		keepalive:      sc.Keepalive,
		passwordAuth:   sc.PasswordAuth,
		password:       sc.Password,
		passphrase:     sc.KeyPassphrase,
		remoteCwd:      sc.Cwd,
		shell:          fo.Shell,
	}
	if s.policy == "" {
		s.policy = config.HostKeyAcceptNew
	}
	if s.connectTimeout <= 0 {
		s.connectTimeout = 10 * time.Second
	}
	if s.remoteCwd == "" {
		s.remoteCwd = "~"
	}
	kh := sc.KnownHosts
	if kh == "" {
		kh = "~/.ssh/known_hosts"
	}
	s.knownHosts = expandTilde(kh, home)
	if sock, ok := fo.Getenv("SSH_AUTH_SOCK"); ok {
		s.authSock = sock
	}
	s.target = resolve(sc.Host, sc.User, sc.Port, portSet, sc.Key, keySet)
	hc := sshCfg.lookup(sc.Host, localUser)
	hops, err := parseProxyJump(hc.ProxyJump)
	if err != nil {
		return nil, fmt.Errorf("ssh config %s: host %s: %w: %w", sshConfigPath, sc.Host, err, sandbox.ErrInvalidConfig)
	}
	for _, h := range hops {
		// Jump hosts get their settings from ~/.ssh/config only; ssh.key is offered too,
		// since a bastion commonly takes the same key.
		j := resolve(h.host, h.user, h.port, h.port != 0, sc.Key, false)
		s.jumps = append(s.jumps, j)
	}
	return s, nil
}

// localHome is the caller's home directory: HOME from the caller's environment, else the
// process's.
func localHome(fo sandbox.FactoryOptions) string {
	if h, ok := fo.Getenv("HOME"); ok && h != "" {
		return h
	}
	h, _ := os.UserHomeDir()
	return h
}

func localUserName(fo sandbox.FactoryOptions) string {
	for _, k := range []string{"USER", "LOGNAME"} {
		if v, ok := fo.Getenv(k); ok && v != "" {
			return v
		}
	}
	if u, err := user.Current(); err == nil {
		return u.Username
	}
	return "root"
}
