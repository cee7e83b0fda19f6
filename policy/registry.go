package policy

import (
	"strings"
	"sync"
)

// cliRule flags a command by its subcommand words and options. It is the
// short way to add a rule for a command-line tool: one row in cliRules.
//
//   - cmd: command names, space-separated, as normName returns them
//     (lower-case; ".exe" is dropped for Windows tools);
//   - sub: words that must appear in this order among the first positional
//     arguments, each a "|"-separated list of alternatives; a word ending
//     in "*" matches by prefix;
//   - opt: groups separated by "&", each a "|"-separated list; every group
//     must match some argument. A pattern matches an argument equal to it,
//     starting with it when it ends in "*", or containing it when it starts
//     with "~". "--opt=value" also matches "--opt value" given as two words;
//   - not: "|"-separated patterns that exempt the command (--dry-run, --help).
//
// Arguments are compared in lower case.
type cliRule struct {
	cmd, sub, opt, not string
	rule               ruleID
}

var (
	cliOnce  sync.Once
	cliIndex map[string][]*cliRule
)

func cliRulesFor(name string) []*cliRule {
	cliOnce.Do(func() {
		cliIndex = map[string][]*cliRule{}
		for i := range cliRules {
			r := &cliRules[i]
			for _, n := range strings.Fields(r.cmd) {
				cliIndex[n] = append(cliIndex[n], r)
			}
		}
	})
	return cliIndex[name]
}

// cliMatch applies the table rows of name to args.
func (a *analyzer) cliMatch(name string, args []field) {
	name = strings.TrimSuffix(strings.ToLower(name), ".exe")
	switch name {
	case "npx", "bunx", "pnpx", "uvx":
		// These run the package named by their first positional argument.
		for i, f := range args {
			if !strings.HasPrefix(f.s, "-") {
				a.cliMatch(normName(f.s), args[i+1:])
				break
			}
		}
	}
	rules := cliRulesFor(name)
	if wild := cliRulesFor("*"); len(wild) > 0 && hasLongOrC(args) {
		rules = append(rules[:len(rules):len(rules)], wild...)
	}
	if len(rules) == 0 {
		return
	}
	low := make([]string, len(args))
	var pos []string
	for i, f := range args {
		low[i] = strings.ToLower(f.s)
		if !strings.HasPrefix(low[i], "-") {
			pos = append(pos, low[i])
		}
	}
	for _, r := range rules {
		if r.matches(low, pos) {
			a.add(r.rule)
		}
	}
}

func (r *cliRule) matches(args, pos []string) bool {
	if r.sub != "" {
		words := strings.Fields(r.sub)
		j := 0
		limit := len(words) + 3
		for i := 0; i < len(pos) && i < limit && j < len(words); i++ {
			if patAny(words[j], pos[i]) {
				j++
			}
		}
		if j < len(words) {
			return false
		}
	}
	if r.not != "" && argsMatch(r.not, args) {
		return false
	}
	if r.opt == "" {
		return true
	}
	for _, group := range strings.Split(r.opt, "&") {
		if !argsMatch(group, args) {
			return false
		}
	}
	return true
}

// argsMatch reports whether some argument, or "opt=value" made of two
// adjacent arguments, matches one of the "|"-separated patterns.
func argsMatch(pats string, args []string) bool {
	for i, s := range args {
		if patAny(pats, s) {
			return true
		}
		if i+1 < len(args) && strings.HasPrefix(s, "-") && !strings.Contains(s, "=") && patAny(pats, s+"="+args[i+1]) {
			return true
		}
	}
	return false
}

func patAny(pats, s string) bool {
	for _, p := range strings.Split(pats, "|") {
		switch {
		case strings.HasPrefix(p, "~"):
			if strings.Contains(s, p[1:]) {
				return true
			}
		case strings.HasSuffix(p, "*"):
			if strings.HasPrefix(s, p[:len(p)-1]) {
				return true
			}
		case p == s:
			return true
		}
	}
	return false
}

// cliRules is the table of subcommand and option rules.
var cliRules = []cliRule{
	// Other agents' bypass switches (any command: agent CLIs are many and new).
	{cmd: "*", opt: "--dangerously-skip-permissions|--dangerously-bypass-approvals-and-sandbox|" +
		"--dangerously-allow-all|--allow-dangerously-skip-permissions|" +
		"--permission-mode=bypasspermissions|--yolo|--approval-mode=yolo|--ask-for-approval=never|" +
		"--sandbox=danger-full-access|-c=approval_policy=never|-c=~danger-full-access|" +
		"--config=approval_policy=never", rule: ruleAgentBypass},
	{cmd: "codex", opt: "-a=never|-s=danger-full-access|~danger-full-access|~approval_policy=never|~approval_policy=\"never\"", rule: ruleAgentBypass},
	{cmd: "gemini qwen", opt: "-y", rule: ruleAgentBypass},
	{cmd: "aider", opt: "--yes-always|--yes", rule: ruleAgentBypass},
	{cmd: "cursor-agent", opt: "--force|-f", rule: ruleAgentBypass},
	{cmd: "hermes", sub: "config set|config", opt: "~approval|~yolo|~allow|~permission", rule: ruleAgentBypass},
	{cmd: "claude", sub: "config set", opt: "~allowedtools|~permission|~bypass", rule: ruleAgentBypass},

	// Secrets printed by CLIs and secret managers.
	{cmd: "aws", sub: "secretsmanager get-secret-value|batch-get-secret-value", rule: ruleCloudSecret},
	{cmd: "aws", sub: "ssm get-parameter|get-parameters|get-parameters-by-path|get-parameter-history", opt: "--with-decryption", rule: ruleCloudSecret},
	{cmd: "aws", sub: "ecr|ecr-public get-login-password", rule: ruleCloudSecret},
	{cmd: "aws", sub: "sts get-session-token|assume-role", rule: ruleCloudSecret},
	{cmd: "aws", sub: "configure get", opt: "~secret|~access_key|~session_token", rule: ruleCloudSecret},
	{cmd: "aws", sub: "configure export-credentials", rule: ruleCloudSecret},
	{cmd: "gcloud", sub: "secrets versions access", rule: ruleCloudSecret},
	{cmd: "gcloud", sub: "auth print-access-token|print-identity-token|print-refresh-token", rule: ruleCloudSecret},
	{cmd: "gcloud", sub: "auth application-default print-access-token", rule: ruleCloudSecret},
	{cmd: "gcloud", sub: "iam service-accounts keys create", rule: ruleIAM},
	{cmd: "az", sub: "keyvault secret show|download", rule: ruleCloudSecret},
	{cmd: "az", sub: "account get-access-token", rule: ruleCloudSecret},
	{cmd: "az", sub: "storage account keys|show-connection-string", rule: ruleCloudSecret},
	{cmd: "vault", sub: "kv get|read|patch", rule: ruleCloudSecret},
	{cmd: "vault", sub: "read|print", rule: ruleCloudSecret},
	{cmd: "kubectl oc", sub: "get secret|secrets|secret/*|secrets/*", opt: "-o*|--output*|--template*", not: "-oname|-o=name|--output=name|-owide|-o=wide|--output=wide", rule: ruleCloudSecret},
	{cmd: "kubectl oc", sub: "config view", opt: "--raw|--flatten", rule: ruleCloudSecret},
	{cmd: "kubectl oc", sub: "create token", rule: ruleCloudSecret},
	{cmd: "gh", sub: "auth token", rule: ruleCloudSecret},
	{cmd: "gh", sub: "auth status", opt: "--show-token|-t", rule: ruleCloudSecret},
	{cmd: "glab", sub: "auth status", opt: "--show-token|-t", rule: ruleCloudSecret},
	{cmd: "op", sub: "read|inject", rule: ruleCloudSecret},
	{cmd: "op", sub: "item|document get", rule: ruleCloudSecret},
	{cmd: "pass gopass", sub: "show|cat|otp", rule: ruleCloudSecret},
	{cmd: "bw", sub: "get|export", rule: ruleCloudSecret},
	{cmd: "lpass", sub: "show|export", rule: ruleCloudSecret},
	{cmd: "heroku", sub: "auth:token", rule: ruleCloudSecret},
	{cmd: "doppler", sub: "secrets download|get", rule: ruleCloudSecret},
	{cmd: "doppler", sub: "secrets", not: "--only-names", opt: "--raw|--json|--plain", rule: ruleCloudSecret},
	{cmd: "security", sub: "find-generic-password|find-internet-password", opt: "-w*|-g*", rule: ruleCloudSecret},
	{cmd: "security", sub: "dump-keychain|export", rule: ruleCloudSecret},
	{cmd: "security", sub: "delete-keychain|delete-generic-password|delete-internet-password", rule: ruleDeleteSensitive},
	{cmd: "secret-tool", sub: "lookup", rule: ruleCloudSecret},
	{cmd: "kwallet-query", opt: "-r|--read-password", rule: ruleCloudSecret},
	{cmd: "sops", opt: "-d|--decrypt", rule: ruleCloudSecret},
	{cmd: "age", opt: "-d|--decrypt", rule: ruleCloudSecret},
	{cmd: "locate plocate mlocate", opt: "~id_rsa|~id_ed25519|~id_ecdsa|~id_dsa|~.pem|~.key|~credentials|~.kdbx|~.ppk|~.pfx|~.p12", rule: ruleKeyHunt},

	// Exposure and tunnels.
	{cmd: "ngrok", sub: "http|tcp|tls|start|tunnel", rule: ruleExposure},
	{cmd: "cloudflared", sub: "tunnel|access", not: "list|info|--help|-h", rule: ruleExposure},
	{cmd: "lt localtunnel bore ttyd gotty tmate serveo upterm sshx frpc chisel pinggy", not: "--help|-h|--version|-v|-V|version", rule: ruleExposure},
	{cmd: "tailscale", sub: "funnel|serve", not: "status|--help|reset|off", rule: ruleExposure},
	{cmd: "jupyter jupyter-notebook jupyter-lab", opt: "--notebookapp.token=|--serverapp.token=|--identityprovider.token=|--notebookapp.password=|--serverapp.password=", rule: ruleExposure},
	{cmd: "gcloud", sub: "compute firewall-rules create|update", opt: "~0.0.0.0/0", rule: ruleExposure},
	{cmd: "aws", sub: "ec2 authorize-security-group-ingress", opt: "~0.0.0.0/0|~::/0", rule: ruleExposure},
	{cmd: "aws", sub: "s3api put-bucket-acl|put-object-acl", opt: "~public-read", rule: ruleExposure},
	{cmd: "aws", sub: "s3api delete-public-access-block|put-bucket-policy", rule: ruleExposure},
	{cmd: "aws", sub: "s3 cp|sync", opt: "--acl=public-read*", rule: ruleExposure},
	{cmd: "gsutil", sub: "iam|acl ch|set", opt: "~allusers|~allauthenticatedusers|~public-read", rule: ruleExposure},
	{cmd: "az", sub: "storage container set-permission|create", opt: "--public-access=blob|--public-access=container", rule: ruleExposure},

	// Publishing and repository settings.
	{cmd: "npm pnpm yarn bun", sub: "publish|unpublish|deprecate|dist-tag", not: "--dry-run|ls|list", rule: rulePublish},
	{cmd: "npm", sub: "owner|access|token", not: "ls|list|get", rule: rulePublish},
	{cmd: "cargo", sub: "publish|yank|owner", not: "--dry-run|-n|--list|-l", rule: rulePublish},
	{cmd: "twine flit", sub: "upload|publish", rule: rulePublish},
	{cmd: "poetry hatch uv pdm", sub: "publish", not: "--dry-run", rule: rulePublish},
	{cmd: "gem", sub: "push|yank|owner", rule: rulePublish},
	{cmd: "dotnet", sub: "nuget push|delete", rule: rulePublish},
	{cmd: "mvn", sub: "deploy", rule: rulePublish},
	{cmd: "docker", sub: "push", not: "~localhost|~127.0.0.1", rule: rulePublish},
	{cmd: "helm", sub: "push", rule: rulePublish},
	{cmd: "gh", sub: "release delete|delete-asset", rule: rulePublish},
	{cmd: "gh", sub: "repo delete|archive|rename|transfer", rule: rulePublish},
	{cmd: "gh", sub: "repo edit", opt: "--visibility*", rule: rulePublish},
	{cmd: "gh", sub: "secret|variable set|delete|remove", rule: rulePublish},
	{cmd: "gh", sub: "workflow run", opt: "~deploy|~release|~prod|~publish", rule: rulePublish},
	{cmd: "gh", sub: "workflow disable", rule: rulePublish},
	{cmd: "gh", sub: "api", opt: "-x=delete|--method=delete|-xdelete", rule: rulePublish},
	{cmd: "gh", sub: "ssh-key|gpg-key add|delete", rule: rulePublish},
	{cmd: "glab", sub: "repo delete|archive", rule: rulePublish},

	// Package and name lookups sent elsewhere.
	{cmd: "npm pnpm yarn", sub: "config set", opt: "~registry", rule: ruleRegistryRedirect},
	{cmd: "pip pip3", sub: "config set", opt: "~index-url|~trusted-host", rule: ruleRegistryRedirect},
	{cmd: "pip pip3", sub: "install", opt: "--trusted-host*", rule: ruleRegistryRedirect},
	// An extra index lets any package name resolve there first (dependency confusion); a plain
	// http index can be answered by anyone on the path.
	{cmd: "pip pip3", sub: "install|download", opt: "--extra-index-url*|--index-url=http:*|-i=http:*", rule: ruleRegistryRedirect},
	{cmd: "go", sub: "env", opt: "-w&~goproxy=|~gonosumdb|~gonosumcheck|~goflags=|~goinsecure|~gosumdb=off", rule: ruleRegistryRedirect},

	// Offensive tools.
	{cmd: "hydra medusa ncrack masscan zmap sqlmap nikto msfconsole msfvenom crackmapexec netexec " +
		"nxc responder john hashcat hping3 wpscan gobuster feroxbuster ffuf dirb kerbrute " +
		"impacket-secretsdump mimikatz", not: "--help|-h|--version|-v|-V", rule: ruleOffensive},
	{cmd: "nmap", opt: "~/8|~/9|~/10|~/11|~/12|~/13|~/14|~/15|~/16|~0.0.0.0|-ss|-su|-sn|-a|-o|--script*|-iR", rule: ruleOffensive},

	// Administrator access.
	{cmd: "aws", sub: "iam create-access-key|attach-user-policy|attach-role-policy|attach-group-policy|" +
		"put-user-policy|put-role-policy|create-login-profile|update-login-profile|" +
		"update-assume-role-policy|add-user-to-group|create-user", rule: ruleIAM},
	{cmd: "gcloud", sub: "projects|organizations|folders add-iam-policy-binding|set-iam-policy", rule: ruleIAM},
	{cmd: "az", sub: "role assignment create", rule: ruleIAM},
	{cmd: "az", sub: "ad sp|app credential reset", rule: ruleIAM},
	{cmd: "kubectl oc", sub: "create clusterrolebinding|rolebinding", opt: "~cluster-admin|~admin", rule: ruleIAM},

	// Databases and infrastructure by other doors.
	{cmd: "etcdctl", sub: "del|delete", opt: "--prefix*|--from-key*", rule: ruleDatabase},
	{cmd: "consul", sub: "kv delete", rule: ruleDatabase},
	{cmd: "nomad", sub: "job stop", opt: "-purge", rule: ruleCloud},
	{cmd: "nomad", sub: "system gc", rule: ruleCloud},
	{cmd: "kafka-topics kafka-topics.sh", opt: "--delete", rule: ruleDatabase},
	{cmd: "kafka-delete-records kafka-delete-records.sh", rule: ruleDatabase},
	{cmd: "rabbitmqctl", sub: "purge_queue|delete_queue|delete_vhost|reset|force_reset|delete_user", rule: ruleDatabase},
	{cmd: "rabbitmqadmin", sub: "purge|delete", rule: ruleDatabase},
	{cmd: "influx", sub: "delete", rule: ruleDatabase},
	{cmd: "influx", sub: "bucket|org drop|delete", rule: ruleDatabase},
	{cmd: "firebase", sub: "firestore:delete|database:remove|database:set|projects:delete|hosting:disable|functions:delete", rule: ruleDatabase},
	{cmd: "supabase", sub: "db reset", opt: "--linked|--db-url*", rule: ruleDatabase},
	{cmd: "supabase", sub: "projects delete", rule: ruleCloud},
	{cmd: "kubectl oc", sub: "scale", opt: "--all|-a&--replicas=0", rule: ruleCloud},
	{cmd: "kubectl oc", sub: "scale", opt: "-a&--replicas=0", rule: ruleCloud},
	{cmd: "kubectl oc", sub: "patch", opt: "~\"replicas\":0|~replicas: 0", rule: ruleCloud},
	{cmd: "kubectl oc", sub: "delete", opt: "--all|-a|--all-namespaces|-A", rule: ruleCloud},
	{cmd: "kubectl oc", sub: "debug node/*", rule: ruleContainerEscape},
	{cmd: "kubectl oc", sub: "run|create|apply", opt: "~hostpid\":true|~hostnetwork\":true|~privileged\":true|~hostipc\":true|~hostpath", rule: ruleContainerEscape},
	{cmd: "kubectl oc", sub: "apply|create|replace", opt: "-f=http*|--filename=http*|-f=ftp*", rule: ruleRemoteExec},
	{cmd: "ctr nerdctl crictl", sub: "run|create|container", opt: "--privileged|~src=/,|~source=/,|--net-host|--pid-host|~src=/:|--mount=type=bind,src=/,*", rule: ruleContainerEscape},
	{cmd: "aws", sub: "cloudtrail stop-logging|delete-trail|update-trail", rule: ruleLogs},
	{cmd: "aws", sub: "logs delete-log-group|delete-log-stream", rule: ruleLogs},
	{cmd: "aws", sub: "guardduty delete-detector|disable-organization-admin-account", rule: ruleSecurity},
	{cmd: "aws", sub: "dynamodb delete-table|delete-backup", rule: ruleCloud},
	{cmd: "aws", sub: "lambda delete-function", rule: ruleCloud},
	{cmd: "aws", sub: "cloudformation delete-stack", rule: ruleCloud},
	{cmd: "aws", sub: "kms schedule-key-deletion|disable-key", rule: ruleCloud},
	{cmd: "aws", sub: "s3api delete-bucket|delete-objects", rule: ruleCloud},
	{cmd: "aws", sub: "route53 delete-hosted-zone", rule: ruleCloud},
	{cmd: "aws", sub: "ecr delete-repository", rule: ruleCloud},
	{cmd: "aws", sub: "eks delete-cluster|delete-nodegroup", rule: ruleCloud},
	{cmd: "aws", sub: "secretsmanager delete-secret", rule: ruleCloud},

	// Windows.
	{cmd: "format-volume clear-disk initialize-disk remove-partition", rule: ruleDiskWipe},
	{cmd: "diskpart", rule: ruleDiskPartition},
	{cmd: "powershell pwsh", opt: "-file=\\*|-file=http*|-f=\\*|-file=//*", rule: ruleRemoteExec},
	{cmd: "ansible", opt: "-m=shell|-m=command|-m=raw|-m=script|--module-name=shell|--module-name=command|-m=ansible.builtin.shell|-m=ansible.builtin.command", rule: ruleRemoteExec},
	{cmd: "pssh parallel-ssh pdsh clush", rule: ruleRemoteExec},
	{cmd: "git", sub: "credential fill|approve", rule: ruleCloudSecret},
	{cmd: "git", sub: "credential-cache|credential-store get", rule: ruleCloudSecret},
	{cmd: "icacls cacls", opt: "~/grant|~/setowner|~/reset&~everyone|~*s-1-1-0|~users|~authenticated users", rule: ruleChmodWorld},
	{cmd: "takeown", rule: ruleChmodSystem},
	{cmd: "netsh", sub: "advfirewall|firewall set", opt: "off|disable", rule: ruleSecurity},
	{cmd: "netsh", sub: "advfirewall reset", rule: ruleSecurity},
	{cmd: "set-netfirewallprofile", opt: "-enabled=false|-enabled=0|-enabled=$false", rule: ruleSecurity},
	{cmd: "set-mppreference", opt: "-disable*|-exclusion*", rule: ruleSecurity},
	{cmd: "add-mppreference", opt: "-exclusion*", rule: ruleSecurity},
	{cmd: "wevtutil", sub: "cl|clear-log|um", rule: ruleLogs},
	{cmd: "clear-eventlog remove-eventlog limit-eventlog", rule: ruleLogs},
	{cmd: "vssadmin", sub: "delete|resize", rule: ruleSecurity},
	{cmd: "wbadmin", sub: "delete", rule: ruleSecurity},
	{cmd: "bcdedit", opt: "/set|/delete|/deletevalue", rule: ruleSecurity},
	{cmd: "reg", sub: "delete|add|import|restore|load", rule: ruleWriteSystem},
	{cmd: "remove-itemproperty set-itemproperty new-itemproperty", opt: "~hklm:|~hkcu:|~registry::", rule: ruleWriteSystem},
	{cmd: "set-executionpolicy", opt: "unrestricted|bypass|-executionpolicy=unrestricted|-executionpolicy=bypass", not: "-scope=process|process", rule: ruleSecurity},
	{cmd: "stop-computer restart-computer", rule: ruleShutdown},
	{cmd: "sc", sub: "stop|delete|config|failure", rule: ruleServiceStop},
	{cmd: "stop-service set-service remove-service", rule: ruleServiceStop},
	{cmd: "schtasks", opt: "/create|/change", rule: ruleCron},
	{cmd: "register-scheduledtask new-scheduledtask", rule: ruleCron},
	{cmd: "mshta wscript cscript regsvr32 rundll32 installutil regasm msbuild", not: "/?", rule: ruleRemoteExec},
	{cmd: "certutil", opt: "-urlcache|-decode|-decodehex|-verifyctl|/urlcache", rule: ruleDownloadExec},
	{cmd: "bitsadmin", opt: "/transfer|/addfile", rule: ruleDownloadExec},
	{cmd: "net", sub: "user|localgroup|group", opt: "/add|/delete|/active:yes", rule: ruleUsers},
	{cmd: "net", sub: "stop", rule: ruleServiceStop},
	{cmd: "new-localuser remove-localuser add-localgroupmember", rule: ruleUsers},
	{cmd: "cipher", opt: "/w*", rule: ruleDiskPartition},
	{cmd: "fsutil", sub: "file|usn setzerodata|deletejournal", rule: ruleTruncate},
	{cmd: "clear-content", rule: ruleTruncate},

	// macOS.
	{cmd: "tmutil", sub: "delete|disable|deletelocalsnapshots|thinlocalsnapshots|removedestination", rule: ruleSecurity},
	{cmd: "xattr", opt: "-d*|-c*|-r*&~com.apple.quarantine", rule: ruleSecurity},
	{cmd: "xattr", opt: "-cr|-rc", rule: ruleSecurity},
	{cmd: "osascript", opt: "~shut down|~restart|~log out", rule: ruleShutdown},
	{cmd: "osascript", opt: "~empty trash", rule: ruleDeleteOutside},
	{cmd: "csrutil", sub: "disable|clear", rule: ruleSecurity},
	{cmd: "nvram", opt: "-c|~boot-args", rule: ruleSecurity},
	{cmd: "pmset", opt: "~disablesleep", rule: ruleSecurity},
	// Gatekeeper's quarantine, the firewall and the login window are security switches too.
	{cmd: "defaults", sub: "write", opt: "~lsquarantine&false|0|no", rule: ruleSecurity},
	{cmd: "defaults", sub: "write", opt: "~com.apple.alf&globalstate&0", rule: ruleSecurity},
	{cmd: "defaults", sub: "delete", opt: "~lsquarantine|~com.apple.alf", rule: ruleSecurity},
}

// extraRules runs the rule families that look at every command whatever its
// handler: supervisor kills, Windows spellings, secrets printed by name.
func (a *analyzer) extraRules(c *call) {
	lc := *c
	lc.name = strings.TrimSuffix(strings.ToLower(c.name), ".exe")
	a.killSupervisor(&lc)
	a.windows(&lc)
	a.printSecret(&lc)
	a.destroyRules(&lc)
	a.netRules(&lc)
	a.selfByShape(&lc)
}

// ownConfigTools are programs with a config subcommand of their own.
var ownConfigTools = map[string]bool{
	"hermes-sandbox": true, "hermes": true, "git": true, "npm": true, "pnpm": true, "yarn": true, "pip": true,
	"pip3": true, "poetry": true, "conda": true, "gh": true, "glab": true, "gcloud": true, "az": true, "aws": true,
	"kubectl": true, "oc": true, "docker": true, "podman": true, "helm": true, "composer": true, "bundle": true,
	"cargo": true, "rustup": true, "go": true, "heroku": true, "fly": true, "flyctl": true, "firebase": true,
	"dvc": true, "uv": true, "pipx": true, "bun": true, "deno": true, "nx": true, "lerna": true, "pulumi": true,
	"vault": true, "doctl": true, "rclone": true, "git-lfs": true, "codex": true, "claude": true, "gemini": true,
	"auditctl": true, "ausearch": true, "aureport": true, "npx": true, "sudo": true,
}

// selfByShape recognises this tool's own CLI under any file name (a copy or
// link of the binary) by its subcommands: "config set approvals.mode off",
// "config import-hermes", "audit init".
func (a *analyzer) selfByShape(c *call) {
	if ownConfigTools[c.name] || handlers[c.name] != nil || wrapSpecFor(c.name) != nil || len(c.args) < 2 {
		return
	}
	pos := nonOptions(c.args, "")
	if len(pos) < 2 {
		return
	}
	sub, verb := pos[0].s, pos[1].s
	switch {
	case sub == "config" && (verb == "import-hermes" || verb == "set" || verb == "unset" || verb == "edit" || verb == "reset"):
	case sub == "audit" && verb == "init":
	case sub == "sessions" && verb == "network":
	default:
		return
	}
	a.self(&call{name: "hermes-sandbox", argv0: c.argv0, args: c.args, in: c.in})
}

// printSecret flags printing a credential variable by name (printenv
// GITHUB_TOKEN, echo $OPENAI_API_KEY) to the terminal, where the agent reads it.
func (a *analyzer) printSecret(c *call) {
	switch c.name {
	case "printenv":
		for _, f := range c.args {
			if isSecretName(f.s) {
				a.add(ruleCloudSecret)
			}
		}
	case "echo", "printf":
		if a.piping > 0 {
			return // fed to another program (docker login --password-stdin)
		}
		for _, f := range c.args {
			if f.t&tSecret != 0 && f.dyn {
				a.add(ruleCloudSecret)
			}
		}
	}
}

// hasLongOrC reports whether args hold a long option or -c, the only
// shapes the rows that apply to every command look at.
func hasLongOrC(args []field) bool {
	for _, f := range args {
		if strings.HasPrefix(f.s, "--") || f.s == "-c" {
			return true
		}
	}
	return false
}
