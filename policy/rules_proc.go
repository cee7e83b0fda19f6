package policy

import (
	"strings"
)

// Signals and process killing: kill, pkill, killall and the processes that
// must not be killed.

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
