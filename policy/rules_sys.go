package policy

import (
	"strings"
)

// System administration: services, cron, firewalls, kernel, users, mounts,
// logs, network interfaces, capabilities and secret stores.

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
