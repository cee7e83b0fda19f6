package policy

import "strings"

// Other agents and the supervisor: agents' permission settings files, and
// the processes a command must not kill (the agent, this tool, its helper
// and the shell's parent).

// agentSettingsFiles are files, relative to a home or project directory,
// that hold an agent's permission or approval settings.
var agentSettingsFiles = [...]string{
	".claude/settings.json", ".claude/settings.local.json", ".claude.json",
	".codex/config.toml", ".codex/config.json",
	".gemini/settings.json", ".qwen/settings.json",
	".hermes/config.yaml", ".hermes/config.yml", ".hermes/.env",
	".cursor/cli-config.json", ".cursor/cli.json", ".cursor/permissions.json",
	".config/opencode/opencode.json", "opencode.json", ".config/amp/settings.json",
	".aider.conf.yml", ".continue/config.json", ".config/goose/config.yaml",
	".config/crush/crush.json", ".factory/settings.json",
}

// isAgentSettings reports whether p is an agent's permission settings file.
func isAgentSettings(p string) bool {
	for _, f := range agentSettingsFiles {
		if p == f || strings.HasSuffix(p, "/"+f) {
			return true
		}
	}
	return false
}

// supervisorProcs are the processes that supervise this command: the agents
// that may run it, this tool and its in-sandbox helper.
var supervisorProcs = [...]string{
	"hermes", "hermes-sandbox", "sandbox-agent", "hermes-agent", "claude", "claude-code", "codex", "gemini",
	"aider", "cursor-agent", "cursor", "amp", "opencode", "goose", "qwen", "crush", "droid", "node", "node.exe",
}

// namesSupervisor reports whether a process pattern or name matches a
// supervising process.
func namesSupervisor(s string) bool {
	s = strings.ToLower(strings.Trim(s, "^$\"'"))
	if s == "" {
		return false
	}
	for _, p := range supervisorProcs {
		if s == p || strings.TrimSuffix(s, ".exe") == p {
			return true
		}
		// pkill and pgrep match their pattern anywhere in the name or
		// command line: "agent" matches sandbox-agent.
		if len(s) >= 4 && strings.Contains(p, s) {
			return true
		}
		// pkill -f matches the whole command line: a word of it suffices.
		for _, w := range strings.FieldsFunc(s, func(r rune) bool { return r == ' ' || r == '/' || r == '.' || r == '*' }) {
			if w == p && p != "node" {
				return true
			}
		}
	}
	return false
}

// killSupervisor flags kill, pkill, killall and their Windows spellings
// aimed at the parent shell, the agent or this tool.
func (a *analyzer) killSupervisor(c *call) {
	switch c.name {
	case "kill":
		p := optSpecs["kill"].parse(c.args)
		if v, ok := p.value("-s", "--signal", "-n"); ok && harmlessSignal(v.s) {
			return
		}
		if len(c.args) > 0 && strings.HasPrefix(c.args[0].s, "-") && harmlessSignal(c.args[0].s) {
			return // kill -HUP, kill -0
		}
		for _, f := range p.pos {
			if f.t&tSupervisor != 0 {
				a.add(ruleKillSupervisor)
			}
			if f.subst && f.dyn && f.t&(tSupervisor|tCritical) == 0 {
				// Process ids computed at run time from a listing: which
				// processes is unknown (kill $(ps aux | awk '{print $2}')).
				if f.t&tPidList != 0 {
					a.add(ruleKillCritical)
				}
			}
		}
	case "pkill", "killall", "pgrep":
		if c.name == "pgrep" {
			return
		}
		for i, f := range c.args {
			if f.t&tSupervisor != 0 || !strings.HasPrefix(f.s, "-") && namesSupervisor(f.s) {
				a.add(ruleKillSupervisor)
			}
			if f.s == "-P" && i+1 < len(c.args) && c.args[i+1].t&tSupervisor != 0 {
				a.add(ruleKillSupervisor)
			}
		}
	case "taskkill":
		for i, f := range c.args {
			s := strings.ToLower(f.s)
			if (s == "/im" || s == "-im") && i+1 < len(c.args) && namesSupervisor(c.args[i+1].s) {
				a.add(ruleKillSupervisor)
			}
		}
	case "stop-process", "spps":
		named := false
		for i, f := range c.args {
			s := strings.ToLower(f.s)
			if (s == "-name" || s == "-processname") && i+1 < len(c.args) {
				named = true
				if namesSupervisor(c.args[i+1].s) {
					a.add(ruleKillSupervisor)
				}
			}
			if s == "-id" {
				named = true
			}
		}
		if !named && len(c.args) > 0 && !c.in.known {
			// Get-Process | Stop-Process: every process listed.
			a.add(ruleKillCritical)
		}
	case "systemctl", "service":
		for _, f := range c.args {
			if strings.HasPrefix(f.s, "hermes") || strings.HasPrefix(f.s, "sandbox-agent") {
				for _, v := range c.args {
					switch v.s {
					case "stop", "kill", "disable", "mask", "restart":
						a.add(ruleKillSupervisor)
					}
				}
			}
		}
	}
}

// secretNameParts mark environment variables that hold credentials.
var secretNameParts = [...]string{"TOKEN", "SECRET", "PASSWORD", "PASSWD", "API_KEY", "APIKEY", "ACCESS_KEY", "PRIVATE_KEY", "CREDENTIAL", "AUTH", "_PAT", "SESSION_KEY", "CLIENT_KEY"}

// isSecretName reports whether an environment variable's name says it holds
// a credential (GITHUB_TOKEN, AWS_SECRET_ACCESS_KEY, OPENAI_API_KEY).
func isSecretName(name string) bool {
	if name == "" || name[0] < 'A' || name[0] > 'Z' {
		return false
	}
	for _, p := range secretNameParts {
		if strings.Contains(name, p) {
			return true
		}
	}
	return false
}

// agentBypassEnv reports whether setting an environment variable turns an
// agent's approvals or sandbox off (HERMES_YOLO_MODE=1,
// CODEX_APPROVAL_POLICY=never, CLAUDE_CODE_SKIP_PERMISSIONS=true).
func agentBypassEnv(name, val string) bool {
	n, v := strings.ToUpper(name), strings.ToLower(strings.TrimSpace(val))
	on := v == "1" || v == "true" || v == "yes" || v == "on"
	switch {
	case strings.Contains(n, "YOLO") || strings.Contains(n, "DANGEROUSLY") || strings.Contains(n, "SKIP_PERMISSION") ||
		strings.Contains(n, "BYPASS") || strings.Contains(n, "AUTO_APPROVE") || strings.Contains(n, "AUTOAPPROVE"):
		return on || v == "bypasspermissions"
	case strings.Contains(n, "APPROVAL") || strings.Contains(n, "PERMISSION_MODE") || strings.Contains(n, "SANDBOX_MODE"):
		return v == "off" || v == "never" || v == "none" || v == "yolo" || v == "danger-full-access" || v == "bypasspermissions" || v == "false" || v == "0"
	}
	return false
}
