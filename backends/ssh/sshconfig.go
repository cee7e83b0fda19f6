package ssh

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

// hostConfig is what ~/.ssh/config says about one host alias. Empty fields were not set.
type hostConfig struct {
	HostName      string
	User          string
	Port          int
	IdentityFiles []string
	// ProxyJump is the raw ProxyJump value ("" = unset, "none" = explicitly none).
	ProxyJump string
}

// sshConfigEntry is one Host or Match block (or the implicit block before the first one).
type sshConfigEntry struct {
	patterns []string // Host patterns; nil for the leading global section and Match blocks
	criteria []string // Match criteria as written; nil for Host blocks
	options  []sshOption
}

type sshOption struct {
	key  string // lower case
	args []string
	file string
	line int
}

// sshConfig is a parsed ssh_config file with its Includes resolved.
type sshConfig struct {
	entries []sshConfigEntry
}

// maxIncludeDepth bounds Include recursion, as OpenSSH does.
const maxIncludeDepth = 16

// parseSSHConfigFile reads path; a missing file is an empty configuration. home is used to
// resolve relative Include paths (~/.ssh) and ~.
func parseSSHConfigFile(path, home string) (*sshConfig, error) {
	c := &sshConfig{}
	if err := c.include(path, home, 0, true); err != nil {
		return nil, err
	}
	return c, nil
}

func (c *sshConfig) include(path, home string, depth int, top bool) error {
	if depth > maxIncludeDepth {
		return fmt.Errorf("ssh config %s: Include nested too deeply", path)
	}
	f, err := os.Open(path)
	if err != nil {
		if os.IsNotExist(err) {
			return nil
		}
		return fmt.Errorf("read ssh config: %w", err)
	}
	defer f.Close()
	return c.parse(f, path, home, depth, top)
}

// parse reads one file. Options before the first Host line of an included file belong to the
// block that contains the Include, as in OpenSSH.
func (c *sshConfig) parse(r io.Reader, file, home string, depth int, top bool) error {
	if top && len(c.entries) == 0 {
		c.entries = append(c.entries, sshConfigEntry{})
	}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	n := 0
	for sc.Scan() {
		n++
		key, args, err := splitConfigLine(sc.Text())
		if err != nil {
			return fmt.Errorf("ssh config %s:%d: %w", file, n, err)
		}
		if key == "" {
			continue
		}
		switch key {
		case "host":
			if len(args) == 0 {
				return fmt.Errorf("ssh config %s:%d: Host needs at least one pattern", file, n)
			}
			c.entries = append(c.entries, sshConfigEntry{patterns: args})
		case "match":
			args = splitCriteria(args)
			if err := checkCriteria(args); err != nil {
				return fmt.Errorf("ssh config %s:%d: %w", file, n, err)
			}
			c.entries = append(c.entries, sshConfigEntry{criteria: args})
		case "include":
			for _, a := range args {
				p := expandTilde(a, home)
				if !filepath.IsAbs(p) {
					p = filepath.Join(home, ".ssh", p)
				}
				matches, err := filepath.Glob(p)
				if err != nil {
					return fmt.Errorf("ssh config %s:%d: Include %q: %w", file, n, a, err)
				}
				for _, m := range matches {
					if err := c.include(m, home, depth+1, false); err != nil {
						return err
					}
				}
			}
		default:
			last := &c.entries[len(c.entries)-1]
			last.options = append(last.options, sshOption{key: key, args: args, file: file, line: n})
		}
	}
	return sc.Err()
}

// splitConfigLine splits "Keyword args…" or "Keyword=args…" into a lower-case keyword and its
// arguments, honouring double quotes. Comments and blank lines give an empty keyword.
func splitConfigLine(line string) (string, []string, error) {
	line = strings.TrimSpace(line)
	if line == "" || line[0] == '#' {
		return "", nil, nil
	}
	i := strings.IndexAny(line, " \t=")
	if i < 0 {
		return strings.ToLower(line), nil, nil
	}
	key := strings.ToLower(line[:i])
	rest := strings.TrimLeft(line[i:], " \t")
	if strings.HasPrefix(rest, "=") {
		rest = strings.TrimLeft(rest[1:], " \t")
	}
	var args []string
	for rest != "" {
		if rest[0] == '#' {
			break
		}
		if rest[0] == '"' {
			end := strings.IndexByte(rest[1:], '"')
			if end < 0 {
				return "", nil, fmt.Errorf("unterminated quote in %q", line)
			}
			args = append(args, rest[1:1+end])
			rest = strings.TrimLeft(rest[2+end:], " \t")
			continue
		}
		end := strings.IndexAny(rest, " \t")
		if end < 0 {
			end = len(rest)
		}
		args = append(args, rest[:end])
		rest = strings.TrimLeft(rest[end:], " \t")
	}
	return key, args, nil
}

// lookup returns the settings for alias when connecting as localUser: for each keyword the
// first value that applies wins, except IdentityFile, which accumulates (OpenSSH semantics).
// Match blocks are evaluated as `ssh -G` does, in order, against the host name and user as
// set so far; a `Match final` (or `canonical`) block applies in a second pass, as OpenSSH
// makes one when a configuration asks for it.
func (c *sshConfig) lookup(alias, localUser string) hostConfig {
	var hc hostConfig
	seen := map[string]bool{}
	finalPass := false
	for _, e := range c.entries {
		finalPass = finalPass || slices.ContainsFunc(e.criteria, func(w string) bool {
			w = strings.ToLower(strings.TrimPrefix(w, "!"))
			return w == "final" || w == "canonical"
		})
	}
	c.pass(&hc, seen, alias, localUser, false)
	if finalPass {
		c.pass(&hc, seen, alias, localUser, true)
	}
	return hc
}

// pass applies every block that matches, in order.
func (c *sshConfig) pass(hc *hostConfig, seen map[string]bool, alias, localUser string, final bool) {
	for _, e := range c.entries {
		switch {
		case e.criteria != nil:
			host := alias
			if hc.HostName != "" {
				host = strings.NewReplacer("%h", alias, "%%", "%").Replace(hc.HostName)
			}
			user := localUser
			if hc.User != "" {
				user = hc.User
			}
			if !matchCriteria(e.criteria, matchContext{alias: alias, host: host, user: user, localUser: localUser, final: final}) {
				continue
			}
		case e.patterns != nil && !matchHostPatterns(e.patterns, alias):
			continue
		}
		for _, o := range e.options {
			if len(o.args) == 0 {
				continue
			}
			if o.key == "identityfile" {
				if !slices.Contains(hc.IdentityFiles, o.args[0]) {
					hc.IdentityFiles = append(hc.IdentityFiles, o.args[0])
				}
				continue
			}
			if seen[o.key] {
				continue
			}
			switch o.key {
			case "hostname":
				hc.HostName = o.args[0]
			case "user":
				hc.User = o.args[0]
			case "port":
				p, err := strconv.Atoi(o.args[0])
				if err != nil || p < 1 || p > 65535 {
					continue
				}
				hc.Port = p
			case "proxyjump":
				hc.ProxyJump = o.args[0]
			default:
				continue
			}
			seen[o.key] = true
		}
	}
}

// matchContext is what Match criteria are tested against.
type matchContext struct {
	alias, host, user, localUser string
	final                        bool
}

// criteriaArgs says which Match criteria take an argument; exec, localnetwork and tagged are
// recognised but never evaluated here (they would run a command, or read the local network
// and tags), so a block that needs them does not apply.
var criteriaArgs = map[string]bool{"all": false, "canonical": false, "final": false,
	"host": true, "originalhost": true, "user": true, "localuser": true,
	"exec": true, "localnetwork": true, "tagged": true}

// splitCriteria turns OpenSSH's alternative spelling `criterion=argument` into two words.
func splitCriteria(words []string) []string {
	var out []string
	for _, w := range words {
		if k, v, ok := strings.Cut(w, "="); ok && criteriaArgs[strings.ToLower(strings.TrimPrefix(k, "!"))] {
			out = append(out, k, v)
			continue
		}
		out = append(out, w)
	}
	return out
}

// checkCriteria rejects Match lines OpenSSH would reject: unknown criteria, missing arguments.
func checkCriteria(words []string) error {
	if len(words) == 0 {
		return fmt.Errorf("a Match line needs criteria (e.g. Match host NAME, Match all)")
	}
	for i := 0; i < len(words); i++ {
		w := strings.ToLower(strings.TrimPrefix(words[i], "!"))
		takesArg, ok := criteriaArgs[w]
		if !ok {
			return fmt.Errorf("unsupported Match criterion %q", words[i])
		}
		if takesArg {
			if i+1 >= len(words) {
				return fmt.Errorf("a Match line's %s needs an argument", w)
			}
			i++
		}
	}
	return nil
}

// matchCriteria reports whether every criterion of a Match line holds.
func matchCriteria(words []string, m matchContext) bool {
	for i := 0; i < len(words); i++ {
		w := strings.ToLower(words[i])
		neg := strings.HasPrefix(w, "!")
		w = strings.TrimPrefix(w, "!")
		var arg string
		if criteriaArgs[w] {
			i++
			arg = words[i]
		}
		var ok bool
		switch w {
		case "all":
			ok = true
		case "canonical", "final":
			ok = m.final
		case "host":
			ok = matchHostPatterns([]string{arg}, m.host)
		case "originalhost":
			ok = matchHostPatterns([]string{arg}, m.alias)
		case "user":
			ok = matchPatternList(arg, m.user)
		case "localuser":
			ok = matchPatternList(arg, m.localUser)
		default: // exec, localnetwork, tagged: not evaluated
			return false
		}
		if ok == neg {
			return false
		}
	}
	return true
}

// matchPatternList matches s (case-sensitively) against a comma-separated pattern list in
// which a negated pattern that matches vetoes.
func matchPatternList(list, s string) bool {
	matched := false
	for _, p := range strings.Split(list, ",") {
		neg := strings.HasPrefix(p, "!")
		if wildcardMatch(strings.TrimPrefix(p, "!"), s) {
			if neg {
				return false
			}
			matched = true
		}
	}
	return matched
}

// matchHostPatterns applies a Host line: some pattern must match and no negated one may.
func matchHostPatterns(patterns []string, host string) bool {
	matched := false
	for _, p := range patterns {
		for _, sub := range strings.Split(p, ",") {
			neg := strings.HasPrefix(sub, "!")
			if neg {
				sub = sub[1:]
			}
			if wildcardMatch(strings.ToLower(sub), strings.ToLower(host)) {
				if neg {
					return false
				}
				matched = true
			}
		}
	}
	return matched
}

// wildcardMatch matches s against a pattern with * (any run) and ? (any one character).
func wildcardMatch(pat, s string) bool {
	// Iterative matcher with backtracking on the last star.
	pi, si, star, mark := 0, 0, -1, 0
	for si < len(s) {
		switch {
		case pi < len(pat) && (pat[pi] == '?' || pat[pi] == s[si]):
			pi++
			si++
		case pi < len(pat) && pat[pi] == '*':
			star, mark = pi, si
			pi++
		case star >= 0:
			pi = star + 1
			mark++
			si = mark
		default:
			return false
		}
	}
	for pi < len(pat) && pat[pi] == '*' {
		pi++
	}
	return pi == len(pat)
}

// expandTokens replaces OpenSSH's %-tokens (%h host, %p port, %r remote user, %u local
// user, %d local home, %%) and a leading ~ in an IdentityFile or HostName value.
func expandTokens(s string, t tokenValues) string {
	s = expandTilde(s, t.home)
	if !strings.Contains(s, "%") {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] != '%' || i+1 == len(s) {
			b.WriteByte(s[i])
			continue
		}
		i++
		switch s[i] {
		case '%':
			b.WriteByte('%')
		case 'h':
			b.WriteString(t.host)
		case 'p':
			b.WriteString(strconv.Itoa(t.port))
		case 'r':
			b.WriteString(t.user)
		case 'u':
			b.WriteString(t.localUser)
		case 'd':
			b.WriteString(t.home)
		default:
			b.WriteByte('%')
			b.WriteByte(s[i])
		}
	}
	return b.String()
}

type tokenValues struct {
	host, user, localUser, home string
	port                        int
}

// expandTilde replaces a leading ~ or ~/ with home.
func expandTilde(p, home string) string {
	if p == "~" {
		return home
	}
	if strings.HasPrefix(p, "~/") && home != "" {
		return filepath.Join(home, p[2:])
	}
	return p
}

// jumpHop is one host of a ProxyJump list.
type jumpHop struct {
	user string
	host string // an alias, resolved through ssh_config
	port int    // 0 = from ssh_config or 22
}

// parseProxyJump parses "[user@]host[:port][,…]" and ssh://[user@]host[:port] forms.
func parseProxyJump(v string) ([]jumpHop, error) {
	if v == "" || strings.EqualFold(v, "none") {
		return nil, nil
	}
	var hops []jumpHop
	for _, part := range strings.Split(v, ",") {
		part = strings.TrimSpace(part)
		part = strings.TrimPrefix(part, "ssh://")
		var h jumpHop
		if at := strings.LastIndexByte(part, '@'); at >= 0 {
			h.user, part = part[:at], part[at+1:]
		}
		host, port := part, ""
		if strings.HasPrefix(part, "[") {
			end := strings.IndexByte(part, ']')
			if end < 0 {
				return nil, fmt.Errorf("ProxyJump %q: unbalanced [", v)
			}
			host = part[1:end]
			if rest := part[end+1:]; strings.HasPrefix(rest, ":") {
				port = rest[1:]
			}
		} else if i := strings.LastIndexByte(part, ':'); i >= 0 && strings.Count(part, ":") == 1 {
			host, port = part[:i], part[i+1:]
		}
		if host == "" {
			return nil, fmt.Errorf("ProxyJump %q: empty host", v)
		}
		h.host = host
		if port != "" {
			p, err := strconv.Atoi(port)
			if err != nil || p < 1 || p > 65535 {
				return nil, fmt.Errorf("ProxyJump %q: bad port %q", v, port)
			}
			h.port = p
		}
		hops = append(hops, h)
	}
	return hops, nil
}
