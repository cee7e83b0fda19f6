package policy

import (
	"strings"
)

var criticalProcs = map[string]bool{
	"init": true, "systemd": true, "sshd": true, "dockerd": true, "containerd": true, "kubelet": true,
	"systemd-journald": true, "journald": true, "dbus-daemon": true, "dbus": true, "Xorg": true, "X": true,
	"gdm": true, "gdm3": true, "lightdm": true, "sddm": true, "NetworkManager": true, "systemd-networkd": true,
	"systemd-logind": true, "systemd-resolved": true, "cron": true, "crond": true, "rsyslogd": true, "syslogd": true,
	"auditd": true, "polkitd": true, "login": true, "getty": true, "agetty": true, "launchd": true,
	"WindowServer": true, "loginwindow": true, "bash": true, "sh": true, "zsh": true, "sudo": true,
	"containerd-shim": true, "kube-apiserver": true, "etcd": true, "firewalld": true, "falcon-sensor": true,
	"osqueryd": true, "wazuh-agent": true, "fail2ban-server": true, "sshd-session": true,
}

// harmlessSignal reports whether a kill signal only asks a process to
// reload or report (HUP, USR1, USR2, CONT, WINCH, 0).
func harmlessSignal(sig string) bool {
	s := strings.ToUpper(strings.TrimPrefix(strings.TrimLeft(sig, "-"), "SIG"))
	switch s {
	case "HUP", "1", "USR1", "10", "USR2", "12", "CONT", "18", "WINCH", "28", "0":
		return true
	}
	return false
}

func (a *analyzer) kill(c *call) {
	switch c.name {
	case "killall5":
		a.add(ruleKillAll)
		return
	case "killall":
		for _, f := range c.args {
			if f.s == "-l" || f.s == "--list" || f.s == "-V" || f.s == "--version" || f.s == "-0" {
				return
			}
		}
		a.add(ruleKillCritical)
		return
	case "pkill", "skill":
		var pats []field
		for i := 0; i < len(c.args); i++ {
			s := c.args[i].s
			if i == 0 && len(s) > 1 && s[0] == '-' && harmlessSignal(s) || (s == "--signal" || s == "-s") && i+1 < len(c.args) && harmlessSignal(c.args[i+1].s) {
				return
			}
			switch {
			case s == "-u" || s == "-U" || s == "-g" || s == "-G" || s == "-P" || s == "-s" || s == "-t" || s == "--signal" || s == "-F" || s == "--euid" || s == "--uid":
				if s == "-u" || s == "-U" || s == "--euid" || s == "--uid" {
					a.add(ruleKillCritical) // every process of a user
				}
				i++
			case strings.HasPrefix(s, "-"):
			default:
				pats = append(pats, c.args[i])
			}
		}
		for _, p := range pats {
			name := strings.Trim(p.s, "^$")
			switch {
			case p.s == "." || p.s == ".*" || p.s == "":
				if len(pats) == 1 {
					a.add(ruleKillAll) // matches every process
				} else {
					a.add(ruleKillCritical)
				}
			case criticalProcs[name]:
				a.add(ruleKillCritical)
			}
		}
		return
	}
	args := c.args
	if len(args) == 1 && args[0].s == "-1" {
		a.add(ruleKillAll)
		return
	}
	i := 0
	sig := ""
	for i < len(args) {
		s := args[i].s
		switch {
		case s == "-l" || s == "-L" || s == "--list" || s == "--table":
			return
		case s == "--":
			i++
			goto pids
		case s == "-s" || s == "-n" || s == "--signal":
			if i+1 < len(args) {
				sig = args[i+1].s
			}
			i += 2
			continue
		case strings.HasPrefix(s, "-") && i == 0 && len(s) > 1:
			sig = s
			i++
			continue
		}
		break
	}
pids:
	if harmlessSignal(sig) {
		for _, f := range args[min(i, len(args)):] {
			if f.s == "-1" {
				a.add(ruleKillAll)
			}
		}
		return
	}
	for _, f := range args[min(i, len(args)):] {
		if f.t&tCritical != 0 {
			a.add(ruleKillCritical)
		}
		switch f.s {
		case "-1":
			a.add(ruleKillAll)
		case "1":
			a.add(ruleKillCritical)
		}
	}
}

func firstVerb(args []field, valued string) (int, string) {
	for i := 0; i < len(args); i++ {
		s := args[i].s
		if strings.HasPrefix(s, "-") {
			if len(s) == 2 && strings.IndexByte(valued, s[1]) >= 0 {
				i++
			}
			continue
		}
		return i, s
	}
	return len(args), ""
}

func (a *analyzer) system(c *call) {
	for _, f := range c.args {
		if f.s == "--help" || f.s == "--version" {
			return
		}
	}
	switch c.name {
	case "shutdown":
		for _, f := range c.args {
			if f.s == "-c" || f.s == "-k" || f.s == "--show" {
				return
			}
		}
		a.add(ruleShutdown)
	case "reboot", "poweroff", "halt":
		for _, f := range c.args {
			if f.s == "-w" || f.s == "--wtmp-only" {
				return
			}
		}
		a.add(ruleShutdown)
	case "init", "telinit":
		if len(c.args) > 0 {
			switch c.args[0].s {
			case "0", "6":
				a.add(ruleShutdown)
			case "1", "s", "S", "single":
				a.add(ruleServiceStop)
			}
		}
	case "loginctl":
		if _, v := firstVerb(c.args, "HMp"); v == "poweroff" || v == "reboot" || v == "halt" {
			a.add(ruleShutdown)
		}
	case "systemctl":
		i, verb := firstVerb(c.args, "HMtpsno")
		units := c.args[min(i+1, len(c.args)):]
		switch verb {
		case "poweroff", "reboot", "halt", "kexec", "soft-reboot":
			a.add(ruleShutdown)
		case "rescue", "emergency":
			a.add(ruleServiceStop)
		case "isolate", "start":
			for _, u := range units {
				switch strings.TrimSuffix(u.s, ".target") {
				case "poweroff", "reboot", "halt", "kexec":
					a.add(ruleShutdown)
				case "rescue", "emergency":
					a.add(ruleServiceStop)
				}
			}
		case "enable", "link", "reenable", "set-default", "edit", "add-wants", "add-requires", "preset":
			a.add(ruleService)
		case "stop", "disable", "mask", "kill":
			for _, u := range units {
				a.stopService(u.s)
			}
		}
	case "service", "rc-service":
		if len(c.args) >= 2 {
			switch c.args[1].s {
			case "stop", "disable":
				a.stopService(c.args[0].s)
			}
		}
	case "launchctl":
		_, verb := firstVerb(c.args, "")
		switch verb {
		case "load", "bootstrap", "submit", "enable":
			a.add(ruleService)
		case "unload", "bootout", "disable", "remove":
			a.add(ruleServiceStop)
		}
	case "update-rc.d", "chkconfig", "rc-update":
		for _, f := range c.args {
			switch f.s {
			case "defaults", "enable", "on", "add", "--add", "start":
				a.add(ruleService)
			}
		}
	}
}

func (a *analyzer) stopService(unit string) {
	u := strings.TrimSuffix(unit, ".service")
	switch u {
	case "firewalld", "ufw", "nftables", "iptables", "ip6tables", "apparmor", "fail2ban", "selinux", "falcon-sensor",
		"osqueryd", "wazuh-agent", "clamav-daemon", "crowdstrike", "sentinelone", "auditd":
		a.add(ruleSecurity)
	case "rsyslog", "syslog", "syslog-ng", "systemd-journald", "journald":
		a.add(ruleLogs)
	case "ssh", "sshd", "docker", "containerd", "networking", "NetworkManager", "network", "systemd-networkd",
		"systemd-resolved", "cron", "crond", "dbus", "kubelet", "systemd-logind", "getty@tty1", "polkit":
		a.add(ruleServiceStop)
	}
}

func (a *analyzer) crontab(c *call) {
	for i := 0; i < len(c.args); i++ {
		s := c.args[i].s
		switch {
		case s == "-l" || s == "--list" || s == "-V":
			return
		case s == "-u":
			i++
		}
	}
	a.add(ruleCron)
}

func (a *analyzer) firewall(c *call) {
	has := func(opts ...string) bool {
		for _, f := range c.args {
			for _, o := range opts {
				if f.s == o {
					return true
				}
			}
		}
		return false
	}
	switch c.name {
	case "iptables":
		if has("-F", "--flush", "-X", "--delete-chain") {
			a.add(ruleSecurity)
		}
		for i, f := range c.args {
			if (f.s == "-P" || f.s == "--policy") && i+2 < len(c.args) && strings.EqualFold(c.args[i+2].s, "ACCEPT") {
				a.add(ruleSecurity)
			}
		}
	case "ufw":
		if has("disable", "reset") {
			a.add(ruleSecurity)
		}
	case "nft":
		if has("flush") || has("delete") && has("table") {
			a.add(ruleSecurity)
		}
	case "firewall-cmd":
		if has("--panic-off") || has("--set-default-zone=trusted") {
			a.add(ruleSecurity)
		}
	case "setenforce":
		if has("0", "Permissive", "permissive") {
			a.add(ruleSecurity)
		}
	case "aa-teardown", "aa-disable", "aa-complain":
		a.add(ruleSecurity)
	case "auditctl":
		if has("-D") || has("-e") && has("0") {
			a.add(ruleSecurity)
		}
	case "pfctl":
		if has("-d", "-F") {
			a.add(ruleSecurity)
		}
	case "csrutil", "spctl":
		if has("disable", "--master-disable", "--global-disable") {
			a.add(ruleSecurity)
		}
	}
}

func (a *analyzer) kernel(c *call) {
	switch c.name {
	case "sysctl":
		for _, f := range c.args {
			if f.s == "-w" || f.s == "--write" || f.s == "-p" || f.s == "--load" || f.s == "--system" || !strings.HasPrefix(f.s, "-") && strings.Contains(f.s, "=") {
				a.add(ruleKernel)
				if strings.Contains(f.s, "randomize_va_space") || strings.Contains(f.s, "ptrace_scope") {
					a.add(ruleSecurity)
				}
				return
			}
		}
	case "modprobe":
		for _, f := range c.args {
			switch f.s {
			case "-n", "--dry-run", "-c", "--showconfig", "--show-depends", "-V", "--version", "--help":
				return
			}
		}
		if len(nonOptions(c.args, "CdS")) > 0 {
			a.add(ruleKernel)
		}
	default:
		if len(c.args) > 0 {
			a.add(ruleKernel)
		}
	}
}

func (a *analyzer) users(c *call) {
	for _, f := range c.args {
		if f.s == "--help" || f.s == "-h" && c.name != "dscl" {
			return
		}
	}
	switch c.name {
	case "passwd":
		for _, f := range c.args {
			if f.s == "-S" || f.s == "--status" {
				return
			}
		}
	case "dscl":
		found := false
		for _, f := range c.args {
			switch strings.TrimPrefix(f.s, "-") {
			case "create", "passwd", "append", "delete", "merge", "change":
				found = true
			}
		}
		if !found {
			return
		}
	}
	a.add(ruleUsers)
}

func (a *analyzer) mount(c *call) {
	switch c.name {
	case "mount":
		for _, f := range c.args {
			switch f.s {
			case "-a", "--all", "--bind", "--rbind", "--move", "-B", "-R", "-M", "--make-shared", "--make-rshared":
				a.add(ruleMount)
				return
			}
		}
		if len(nonOptions(c.args, "tOoLUTN")) > 0 {
			a.add(ruleMount)
		}
	case "losetup":
		if len(nonOptions(c.args, "")) > 0 {
			a.add(ruleMount)
		}
	default:
		if len(c.args) > 0 || c.name == "swapoff" {
			a.add(ruleMount)
		}
	}
}

func (a *analyzer) journalctl(c *call) {
	for _, f := range c.args {
		if strings.HasPrefix(f.s, "--vacuum") || f.s == "--rotate" && len(c.args) == 1 {
			a.add(ruleLogs)
		}
	}
}

func (a *analyzer) network(c *call) {
	words := make([]string, 0, len(c.args))
	for _, f := range c.args {
		words = append(words, f.s)
	}
	text := " " + strings.Join(words, " ") + " "
	switch c.name {
	case "ip":
		if strings.Contains(text, " link ") && (strings.Contains(text, " down ") || strings.Contains(text, " delete ") || strings.Contains(text, " del ")) ||
			strings.Contains(text, " flush ") || strings.Contains(text, " route del default") || strings.Contains(text, " route delete default") {
			a.add(ruleNetworkDown)
		}
	case "ifconfig":
		if strings.Contains(text, " down ") {
			a.add(ruleNetworkDown)
		}
	case "nmcli":
		if strings.Contains(text, " networking off ") || strings.Contains(text, " radio all off ") ||
			strings.Contains(text, " down ") || strings.Contains(text, " disconnect ") {
			a.add(ruleNetworkDown)
		}
	case "ifdown":
		a.add(ruleNetworkDown)
	case "networksetup":
		if strings.Contains(text, " off ") {
			a.add(ruleNetworkDown)
		}
	}
}

func (a *analyzer) namespace(c *call) {
	switch c.name {
	case "nsenter":
		a.add(ruleContainerEscape)
		a.exec(peelOptions(c.args, "tSGnmuipUCrw", "target setuid setgid "), c.in)
	case "unshare":
		a.exec(peelOptions(c.args, "", "propagation setgroups map-user map-group "), c.in)
	case "chroot", "systemd-nspawn":
		a.add(ruleMount)
		rest := peelOptions(c.args, "DMu", "userspec groups directory machine ")
		if c.name == "chroot" && len(rest) > 0 {
			rest = rest[1:]
		}
		a.exec(rest, c.in)
	}
}

// cloud handles container engines, orchestrators and cloud CLIs.
func (a *analyzer) cloud(c *call) {
	i, verb := firstVerb(c.args, "nHclLsp")
	rest := c.args[min(i+1, len(c.args)):]
	has := func(opts ...string) bool {
		for _, f := range rest {
			for _, o := range opts {
				if f.s == o || strings.HasSuffix(o, "=") && strings.HasPrefix(f.s, o) {
					return true
				}
			}
		}
		return false
	}
	hasWord := func(w string) bool {
		for _, f := range c.args {
			if f.s == w {
				return true
			}
		}
		return false
	}
	switch c.name {
	case "docker":
		a.docker(verb, rest, c)
	case "kubectl", "oc":
		switch verb {
		case "delete", "drain":
			a.add(ruleCloud)
		case "exec":
			for j, f := range rest {
				if f.s == "--" {
					a.exec(rest[j+1:], desc{})
					break
				}
			}
		case "replace":
			if has("--force") {
				a.add(ruleCloud)
			}
		}
	case "helm":
		switch verb {
		case "uninstall", "delete", "del", "un":
			a.add(ruleCloud)
		}
	case "terraform":
		switch {
		case verb == "destroy":
			a.add(ruleCloud)
		case verb == "apply" && (has("-auto-approve", "--auto-approve", "-destroy", "-auto-approve=true")):
			a.add(ruleCloud)
		case verb == "workspace" && len(rest) > 0 && rest[0].s == "delete":
			a.add(ruleCloud)
		}
	case "pulumi":
		if verb == "destroy" || verb == "down" {
			a.add(ruleCloud)
		}
	case "aws":
		if len(rest) == 0 {
			return
		}
		action := rest[0].s
		switch {
		case verb == "s3" && (action == "rm" && has("--recursive") || action == "rb" || action == "sync" && has("--delete")):
			a.add(ruleCloud)
		case verb == "s3" && (action == "cp" || action == "sync" || action == "mv"):
			files := nonOptions(rest[1:], "")
			if len(files) >= 2 {
				a.exfilCopy(files[:len(files)-1], files[len(files)-1])
			}
		case strings.HasPrefix(action, "delete-") || strings.HasPrefix(action, "terminate-") || strings.HasPrefix(action, "deregister-") ||
			action == "purge-queue" || strings.HasPrefix(action, "remove-") && verb == "iam":
			a.add(ruleCloud)
		}
	case "gcloud", "az", "linode-cli", "hcloud", "doctl", "eksctl":
		if hasWord("delete") || hasWord("destroy") || c.name == "doctl" && hasWord("rm") ||
			(verb == "storage" && hasWord("rm") && (hasWord("-r") || hasWord("--recursive"))) {
			a.add(ruleCloud)
		}
	case "heroku":
		if strings.HasPrefix(verb, "apps:destroy") || verb == "apps:delete" || verb == "pg:reset" || verb == "destroy" {
			a.add(ruleCloud)
		}
	case "fly", "flyctl":
		if hasWord("destroy") {
			a.add(ruleCloud)
		}
	case "vercel":
		if verb == "rm" || verb == "remove" {
			a.add(ruleCloud)
		}
	case "s3cmd", "mc", "gsutil":
		if verb == "rb" || (verb == "rm" || verb == "del") && (hasWord("-r") || hasWord("--recursive") || hasWord("--force")) {
			a.add(ruleCloud)
		}
	}
}

func (a *analyzer) docker(verb string, rest []field, c *call) {
	if verb == "container" || verb == "image" || verb == "volume" || verb == "system" || verb == "compose" || verb == "network" || verb == "builder" {
		if len(rest) == 0 {
			return
		}
		sub := rest[0].s
		rest = rest[1:]
		switch {
		case verb == "container" && (sub == "run" || sub == "create" || sub == "exec"):
			verb = sub
		case verb == "volume" && (sub == "rm" || sub == "remove"):
			verb = "volume-rm"
		case sub == "rm" || sub == "remove" || sub == "kill":
			verb = "rm"
		case sub == "prune":
			verb = verb + "-prune"
		case verb == "compose" && sub == "down":
			verb = "compose-down"
		case verb == "compose" && sub == "exec":
			verb = "exec"
		default:
			return
		}
	}
	has := func(opts ...string) bool {
		for _, f := range rest {
			for _, o := range opts {
				if f.s == o || strings.HasSuffix(o, "=") && strings.HasPrefix(f.s, o) {
					return true
				}
			}
		}
		return false
	}
	switch verb {
	case "run", "create":
		a.dockerRun(rest)
	case "exec":
		if has("--privileged") {
			a.add(ruleContainerEscape)
		}
		cmd := peelOptions(rest, "euwi", "env user workdir env-file detach-keys ")
		if len(cmd) > 1 {
			a.exec(cmd[1:], c.in)
		}
	case "rm", "rmi", "kill", "volume-rm":
		force := verb == "kill" || verb == "volume-rm" || has("-f", "--force", "-fv", "-vf")
		for _, f := range rest {
			if f.subst && force {
				a.add(ruleContainerDestroy)
			}
		}
	case "system-prune":
		if has("-a", "--all", "--volumes", "-af", "-fa") {
			a.add(ruleContainerDestroy)
		}
	case "volume-prune":
		a.add(ruleContainerDestroy)
	case "image-prune":
		if has("-a", "--all", "-af", "-fa") {
			a.add(ruleContainerDestroy)
		}
	case "compose-down":
		if has("-v", "--volumes") {
			a.add(ruleContainerDestroy)
		}
	}
}

func (a *analyzer) dockerRun(args []field) {
	for i := 0; i < len(args); i++ {
		s := args[i].s
		if !strings.HasPrefix(s, "-") {
			return // the image; what follows runs inside the container
		}
		name, val, eq := strings.Cut(s, "=")
		needVal := func() string {
			if eq {
				return val
			}
			if i+1 < len(args) {
				i++
				return args[i].s
			}
			return ""
		}
		switch name {
		case "--privileged":
			if !eq || val == "true" {
				a.add(ruleContainerEscape)
			}
		case "-v", "--volume":
			src, _, _ := strings.Cut(needVal(), ":")
			a.hostMount(src)
		case "--mount":
			for _, kv := range strings.Split(needVal(), ",") {
				k, v, _ := strings.Cut(kv, "=")
				if k == "source" || k == "src" {
					a.hostMount(v)
				}
			}
		case "--pid", "--userns", "--ipc", "--uts", "--cgroupns":
			if needVal() == "host" {
				a.add(ruleContainerEscape)
			}
		case "--cap-add":
			switch strings.ToUpper(strings.TrimPrefix(needVal(), "CAP_")) {
			case "ALL", "SYS_ADMIN", "SYS_PTRACE", "SYS_MODULE", "DAC_READ_SEARCH", "SYS_RAWIO", "DAC_OVERRIDE":
				a.add(ruleContainerEscape)
			}
		case "--security-opt":
			v := needVal()
			if strings.Contains(v, "unconfined") || strings.Contains(v, "disable") {
				a.add(ruleContainerEscape)
			}
		case "--device":
			if deviceKind(strings.SplitN(needVal(), ":", 2)[0]) == devBlock {
				a.add(ruleContainerEscape)
			}
		case "-e", "--env", "--name", "-w", "--workdir", "-p", "--publish", "-u", "--user", "--network", "--net",
			"--entrypoint", "--env-file", "-l", "--label", "--platform", "-m", "--memory", "--cpus", "--hostname",
			"-h", "--add-host", "--restart", "--log-driver", "--tmpfs", "--shm-size", "--ulimit", "--gpus", "--dns", "--expose", "--pull":
			needVal()
		default:
			if len(s) == 2 && strings.IndexByte("vewpulmh", s[1]) >= 0 {
				needVal()
			} else if strings.HasPrefix(s, "-v") && len(s) > 2 && s[1] != '-' {
				src, _, _ := strings.Cut(s[2:], ":")
				a.hostMount(src)
			}
		}
	}
}

// hostMount flags bind-mounting a sensitive host path into a container.
func (a *analyzer) hostMount(src string) {
	if !strings.HasPrefix(src, "/") && !strings.HasPrefix(src, a.c.home) {
		return
	}
	t := a.target(lit(src))
	p := t.p
	switch {
	case p == "/" || systemTops[p] && p != "/mnt" && p != "/media" && p != "/opt" && p != "/srv",
		strings.HasSuffix(p, "docker.sock"), strings.HasSuffix(p, "containerd.sock"), a.isSSHDir(p),
		within(p, "/etc"), within(p, "/proc"), within(p, "/sys"), within(p, "/dev"), within(p, "/boot"),
		a.isHomeDir(p) && !a.inside(t), a.isProtected(t):
		a.add(ruleContainerEscape)
	}
}

func (a *analyzer) setcap(c *call) {
	for _, f := range c.args {
		if f.s == "-r" || strings.Contains(f.s, "+") || strings.Contains(f.s, "=") {
			a.add(ruleCapabilities)
			return
		}
	}
}

// secretStore handles tools that print private keys or stored passwords.
func (a *analyzer) secretStore(c *call) {
	for _, f := range c.args {
		switch f.s {
		case "--export-secret-keys", "--export-secret-subkeys", "find-generic-password", "find-internet-password", "dump-keychain":
			if c.name != "security" || f.s == "dump-keychain" || hasShortFlag(c.args, "wg") {
				a.add(ruleReadCreds)
			}
		}
	}
	a.generic(c)
}

// hasShortFlag reports whether a short-option cluster (-wa, -g) in args
// holds one of the letters in flags.
func hasShortFlag(args []field, flags string) bool {
	for _, f := range args {
		if len(f.s) > 1 && f.s[0] == '-' && f.s[1] != '-' && strings.ContainsAny(f.s[1:], flags) {
			return true
		}
	}
	return false
}

func hasArg(args []field, opts ...string) bool {
	for _, f := range args {
		for _, o := range opts {
			if f.s == o {
				return true
			}
		}
	}
	return false
}
