package policy

import "strings"

// The sandbox's own settings: a command that would change them is hardline.

var gateEnvPrefixes = [...]string{
	"HERMES_SANDBOX_APPROVALS", "HERMES_SANDBOX_TOOLS", "HERMES_SANDBOX_LOOP", "HERMES_SANDBOX_AUDIT", "HERMES_SANDBOX_CONFIG",
	// Egress: the network mode and the allowlists.
	"HERMES_SANDBOX_DOCKER_NETWORK", "HERMES_SANDBOX_DOCKER_EGRESS_ALLOW", "HERMES_SANDBOX_TERMINAL_EGRESS_ALLOW",
	"HERMES_SANDBOX_KUBERNETES_NETWORK", "HERMES_SANDBOX_KUBERNETES_EGRESS_ALLOW", "HERMES_SANDBOX_MODAL_BLOCK_NETWORK", "HERMES_SANDBOX_MODAL_CIDR_ALLOWLIST",
	"HERMES_SANDBOX_DAYTONA_NETWORK_BLOCK_ALL", "HERMES_SANDBOX_DAYTONA_NETWORK_ALLOW_LIST", "HERMES_SANDBOX_VERCEL_NETWORK_ALLOW",
	// The local backend's kernel confinement: its mode, network, allowlist and deny-read paths.
	"HERMES_SANDBOX_LOCAL",
}

// isEgressKey reports whether a config key (lower case) sets the network egress.
func isEgressKey(key string) bool {
	switch key {
	case "docker.network", "docker.network_enabled", "docker.egress_allow", "terminal.egress_allow", "egress_allow", "network",
		// Every backend's own network switch and allowlist.
		"kubernetes.network", "kubernetes.network_enabled", "kubernetes.egress_allow", "modal.block_network", "modal.cidr_allowlist",
		"daytona.network_block_all", "daytona.network_allow_list", "vercel.network_allow",
		"local.network", "local.egress_allow":
		return true
	}
	return false
}

// isGateEnv reports whether name is an environment override of the gate's
// own settings.
func isGateEnv(name string) bool {
	n := strings.ToUpper(name)
	for _, p := range gateEnvPrefixes {
		if n == p || strings.HasPrefix(n, p+"_") {
			return true
		}
	}
	return false
}

// hasGateEnv reports whether text mentions a gate override variable.
func hasGateEnv(text string) bool {
	up := strings.ToUpper(text)
	for _, p := range gateEnvPrefixes {
		if strings.Contains(up, p) {
			return true
		}
	}
	return false
}

// exportedFunc reports whether name is how bash exports a function through the environment
// (BASH_FUNC_name%% since 2014, BASH_FUNC_name() before).
func exportedFunc(name string) bool {
	return strings.HasPrefix(name, "BASH_FUNC_") && (strings.HasSuffix(name, "%%") || strings.HasSuffix(name, "()"))
}

// hashCmd judges hash -p PATH NAME: later uses of NAME in the shell run PATH. It is read
// like an alias for the rest of the line, and asks when NAME is not PATH's own name.
func (a *analyzer) hashCmd(c *call) {
	for i := 0; i < len(c.args); i++ {
		s := c.args[i].s
		if s == "--" || !strings.HasPrefix(s, "-") || !strings.Contains(s, "p") {
			continue
		}
		p := s[strings.IndexByte(s, 'p')+1:]
		j := i + 1
		if p == "" {
			if j >= len(c.args) {
				return
			}
			p, j = c.args[j].s, j+1
		}
		for _, n := range c.args[j:] {
			if n.dyn || c.args[i].dyn {
				a.add(ruleRebind)
				continue
			}
			if normName(p) != normName(n.s) {
				a.add(ruleRebind)
			}
			if a.aliases == nil {
				a.aliases = map[string]string{}
			}
			a.aliases[n.s] = shellQuote(p)
		}
		return
	}
}

// checkEnv judges setting (hasVal) or exporting/unsetting the variable name.
func (a *analyzer) checkEnv(name string, val field, hasVal bool) {
	if hasVal {
		a.flagSessionVar(name, val)
	}
	if isGateEnv(name) {
		a.add(ruleGateEnv)
		return
	}
	if hasVal && exportedFunc(name) {
		// bash imports BASH_FUNC_name%%='() { body; }' from the environment as the function
		// name: every later "name" in a child bash runs body.
		a.add(ruleRebind)
		if body, ok := strings.CutPrefix(strings.TrimSpace(val.s), "()"); ok {
			a.shellCode(field{s: body, dyn: val.dyn, t: val.t}, desc{}, nil, false)
		}
	}
	if hasVal && agentBypassEnv(name, val.s) {
		a.add(ruleAgentBypass)
	}
	switch name {
	case "HISTFILE":
		if hasVal && (val.s == "" || val.s == "/dev/null") {
			a.add(ruleHistory)
		}
	case "HISTSIZE", "HISTFILESIZE", "SAVEHIST":
		if hasVal && (val.s == "0" || strings.HasPrefix(val.s, "-")) {
			a.add(ruleHistory)
		}
	case "HISTIGNORE":
		if hasVal && (val.s == "*" || val.s == "*:*") {
			a.add(ruleHistory)
		}
	case "LD_PRELOAD", "DYLD_INSERT_LIBRARIES", "LD_AUDIT":
		if hasVal && val.s != "" {
			a.add(ruleLDPreload)
		}
	case "PROMPT_COMMAND", "GIT_SSH_COMMAND", "GIT_EXTERNAL_DIFF", "GIT_ASKPASS", "SSH_ASKPASS", "GIT_PAGER", "GIT_EDITOR", "PAGER", "EDITOR", "VISUAL":
		if hasVal && val.s != "" {
			a.shellCode(val, desc{}, nil, false)
		}
	}
}

func (a *analyzer) unset(c *call) {
	for _, f := range c.args {
		if strings.HasPrefix(f.s, "-") {
			continue
		}
		if f.s == "HISTFILE" {
			a.add(ruleHistory)
		}
		if isGateEnv(f.s) {
			a.add(ruleGateEnv)
		}
	}
}

func (a *analyzer) exportCmd(c *call) {
	args := c.args
	if c.name == "setenv" {
		if len(args) >= 1 {
			v := field{}
			if len(args) > 1 {
				v = args[1]
			}
			a.checkEnv(args[0].s, v, len(args) > 1)
		}
		return
	}
	for _, f := range args {
		if strings.HasPrefix(f.s, "-") {
			continue
		}
		name, val, ok := strings.Cut(f.s, "=")
		v := field{s: val, dyn: f.dyn, t: f.t}
		a.checkEnv(name, v, ok)
		if ok {
			a.setVar(name, value{f: v})
		}
	}
}

func (a *analyzer) printfCmd(c *call) {
	if len(c.args) >= 3 && c.args[0].s == "-v" {
		d := printfOut(c.args[2:])
		a.checkEnv(c.args[1].s, field{s: d.text}, true)
		a.setVar(c.args[1].s, value{f: field{s: d.text, dyn: !d.known, t: d.t}})
	}
}

func (a *analyzer) readCmd(c *call) {
	names := nonOptions(c.args, "dnNptu")
	if len(names) == 0 {
		return
	}
	line, _, _ := strings.Cut(c.in.text, "\n")
	words := strings.Fields(line)
	for i, n := range names {
		a.checkEnv(n.s, field{}, false)
		v := field{s: unkS, dyn: true, t: c.in.t}
		if c.in.known {
			switch {
			case i == len(names)-1 && i < len(words):
				v = field{s: strings.Join(words[i:], " "), t: c.in.t}
			case i < len(words):
				v = field{s: words[i], t: c.in.t}
			default:
				v = field{t: c.in.t}
			}
		}
		a.setVar(n.s, value{f: v})
	}
}

func (a *analyzer) setCmd(c *call) {
	for i := 0; i < len(c.args); i++ {
		f := c.args[i]
		switch {
		case (f.s == "-o" || f.s == "+o") && i+1 < len(c.args):
			if f.s == "+o" && c.args[i+1].s == "history" {
				a.add(ruleHistory)
			}
			i++
		case f.s == "--":
			a.pos = append([]field{lit("bash")}, c.args[i+1:]...)
			a.posSet = true
			return
		case !strings.HasPrefix(f.s, "-") && !strings.HasPrefix(f.s, "+"):
			a.pos = append([]field{lit("bash")}, c.args[i:]...)
			a.posSet = true
			return
		}
	}
}

func (a *analyzer) history(c *call) {
	for _, f := range c.args {
		if strings.HasPrefix(f.s, "-") && strings.ContainsAny(f.s, "cd") {
			a.add(ruleHistory)
		}
	}
}

func (a *analyzer) shopt(c *call) {
	unset := false
	for _, f := range c.args {
		if f.s == "-u" {
			unset = true
		}
		if unset && f.s == "histappend" {
			a.add(ruleHistory)
		}
	}
}

// self handles the sandbox's own CLI.
func (a *analyzer) self(c *call) {
	args := c.args
	i := 0
	for ; i < len(args); i++ {
		s := args[i].s
		switch {
		case s == "--config" || strings.HasPrefix(s, "--config="):
			a.add(ruleGateConfigChange)
			if s == "--config" {
				i++
			}
		case strings.HasPrefix(s, "--approval") || strings.HasPrefix(s, "--yolo") || strings.HasPrefix(s, "--dangerously"):
			a.add(ruleGateConfigChange)
		case s == "--sandbox":
			i++ // its value is not the subcommand
		case strings.HasPrefix(s, "-"):
		default:
			goto sub
		}
	}
	return
sub:
	sub := args[i].s
	rest := args[i+1:]
	for _, f := range rest {
		if strings.HasPrefix(f.s, "--approval") || strings.HasPrefix(f.s, "--yolo") || strings.HasPrefix(f.s, "--dangerously") || f.s == "--config" || strings.HasPrefix(f.s, "--config=") {
			a.add(ruleGateConfigChange)
		}
	}
	switch sub {
	case "config":
		if len(rest) == 0 {
			return
		}
		verb := rest[0].s
		if verb == "import-hermes" {
			// Brings approvals.* and the rest over from a Hermes directory.
			a.add(ruleGateConfigChange)
			return
		}
		keys := nonOptions(rest[1:], "")
		switch verb {
		case "set", "unset", "reset", "edit", "import", "replace", "apply", "delete", "rm", "add", "init":
		default:
			return
		}
		if len(keys) == 0 && verb != "set" && verb != "unset" {
			a.add(ruleGateConfigChange)
			return
		}
		for j, k := range keys {
			if j > 0 && verb == "set" {
				break
			}
			key := strings.ToLower(strings.TrimLeft(k.s, "-"))
			key, _, _ = strings.Cut(key, "=")
			switch {
			case k.dyn:
				a.add(ruleGateConfigChange)
			case isEgressKey(key):
				a.add(ruleEgressChange)
			case key == "approvals" || key == "tools" || key == "loop" || key == "audit" || key == "local" ||
				strings.HasPrefix(key, "approvals.") || strings.HasPrefix(key, "tools.") || strings.HasPrefix(key, "local.") ||
				strings.HasPrefix(key, "loop.") || strings.HasPrefix(key, "audit."):
				a.add(ruleGateConfigChange)
			case key == "sandbox" || key == "terminal.backend" || key == "terminal_backend" || key == "terminal_env" || key == "docker.privileged" || key == "docker.network_enabled" ||
				key == "docker.read_only_rootfs" || key == "docker.security_opt" || key == "docker.user" || key == "docker" || key == "terminal" ||
				key == "kubernetes" || key == "kubernetes.run_as_user" || key == "kubernetes.runtime_class" || key == "kubernetes.kubeconfig" ||
				key == "kubernetes.context" || key == "kubernetes.namespace":
				a.add(ruleGateConfigOther)
			}
		}
	case "sessions", "session":
		// Widening a live session's egress is a person's decision, never the agent's.
		if len(rest) > 0 && (rest[0].s == "network" || rest[0].s == "net") {
			a.add(ruleEgressChange)
		}
	case "audit":
		// A new sealed log (its key printed to whoever ran it) would replace the
		// operator's: only a person starts or rotates the audit log.
		if len(rest) > 0 && rest[0].s == "init" {
			a.add(ruleGateConfigChange)
		}
	case "allow", "approve", "allowlist", "approvals", "trust":
		if len(rest) > 0 {
			switch rest[0].s {
			case "list", "ls", "show", "get", "--help", "-h":
				return
			}
		}
		a.add(ruleGateConfigChange)
	}
}

// goRun handles "go run ./cmd/hermes-sandbox ...".
func (a *analyzer) goRun(c *call) {
	if len(c.args) < 2 || c.args[0].s != "run" {
		return
	}
	for i, f := range c.args[1:] {
		if strings.HasPrefix(f.s, "-") {
			continue
		}
		if strings.Contains(f.s, "hermes-sandbox") {
			a.self(&call{name: "hermes-sandbox", args: c.args[i+2:], in: c.in})
		}
		return
	}
}

// shellQuote quotes s as one shell word.
func shellQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }
