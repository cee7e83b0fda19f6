package policy

import (
	"path"
	"strings"
)

func (a *analyzer) mkfs(c *call) {
	for _, f := range mkfsSpec(cmdBase(c.argv0.s)).parse(c.args).pos {
		a.diskTarget(f, ruleMkfsDevice)
	}
}

// diskTarget judges a destructive disk operation on f.
func (a *analyzer) diskTarget(f field, hard ruleID) {
	if f.t&tDevice != 0 {
		// A device computed at run time (findmnt, df, lsblk): treat it as the disk it names.
		a.add(hard)
		return
	}
	if !strings.HasPrefix(f.s, "/dev/") {
		return
	}
	if f.dyn {
		a.add(ruleDiskUnresolved)
		return
	}
	switch deviceKind(path.Clean(f.s)) {
	case devBlock:
		a.add(hard)
	case devOther:
		a.add(ruleDiskPartition)
	}
}

func (a *analyzer) disk(c *call) {
	has := func(opts ...string) bool {
		for _, f := range c.args {
			for _, o := range opts {
				if f.s == o {
					return true
				}
				if len(o) == 2 && o[0] == '-' && len(f.s) > 2 && f.s[0] == '-' && f.s[1] != '-' && strings.IndexByte(f.s[1:], o[1]) >= 0 {
					return true
				}
			}
		}
		return false
	}
	rule := ruleID(numRules)
	switch c.name {
	case "wipefs":
		if has("-n", "--no-act") {
			return
		}
		if has("-a", "--all", "-o", "--offset") {
			rule = ruleDiskWipe
		}
	case "blkdiscard", "badblocks":
		if c.name == "blkdiscard" || has("-w") {
			rule = ruleDiskWipe
		}
	case "sgdisk", "gdisk":
		switch {
		case has("-Z", "--zap-all", "-z", "--zap", "-o", "--clear"):
			rule = ruleDiskWipe
		case has("-p", "--print", "-l", "--list", "-v", "--verify", "-i", "--info"):
			return
		default:
			rule = ruleDiskPartition
		}
	case "fdisk", "sfdisk", "cfdisk", "parted":
		switch {
		case c.name == "parted" && has("mklabel", "mktable"):
			rule = ruleDiskWipe
		case c.name == "fdisk" && c.in.known && (strings.Contains("\n"+c.in.text, "\nw") || strings.Contains(c.in.text, "w\n")):
			// A scripted fdisk session that writes a new table.
			rule = ruleDiskWipe
		case has("-l", "--list", "print", "-d", "--dump", "-J", "--json", "--help") || c.name != "parted" && has("-s", "--show-size"):
			return
		case has("mklabel", "mktable", "--delete", "--wipe", "-w"):
			rule = ruleDiskWipe
		default:
			rule = ruleDiskPartition
		}
	case "hdparm":
		if has("--security-erase", "--security-erase-enhanced", "--trim-sector-ranges", "--write-sector", "--dco-restore", "--make-bad-sector") {
			rule = ruleDiskWipe
		}
	case "cryptsetup":
		if has("luksFormat", "erase", "luksErase", "reencrypt") {
			rule = ruleDiskWipe
		}
	case "nvme":
		if has("format", "sanitize") {
			rule = ruleDiskWipe
		}
	case "mdadm":
		if has("--zero-superblock") {
			rule = ruleDiskWipe
		} else if has("--create", "-C", "--remove", "--fail") {
			rule = ruleDiskPartition
		}
	case "lvremove", "vgremove", "pvremove":
		a.add(ruleDiskPartition)
		return
	case "zpool":
		if has("destroy", "labelclear") {
			a.add(ruleDiskPartition)
		}
		return
	case "diskutil":
		if has("eraseDisk", "eraseVolume", "zeroDisk", "randomDisk", "secureErase", "partitionDisk", "reformat") {
			a.add(ruleDiskWipe)
		}
		return
	}
	if rule == numRules {
		return
	}
	found := false
	for _, f := range c.args {
		if strings.HasPrefix(f.s, "/dev/") {
			found = true
			if rule == ruleDiskPartition {
				if f.dyn {
					a.add(ruleDiskUnresolved)
				} else if deviceKind(f.s) != devNone {
					a.add(ruleDiskPartition)
				}
				continue
			}
			a.diskTarget(f, rule)
		}
	}
	if !found && rule == ruleDiskPartition {
		a.add(ruleDiskPartition)
	}
}

func (a *analyzer) chmod(c *call) {
	recursive := false
	var rest []field
	for _, f := range c.args {
		s := f.s
		switch {
		case s == "--recursive" || len(s) > 1 && s[0] == '-' && s[1] != '-' && strings.ContainsRune(s, 'R') && !looksLikeMode(s):
			recursive = true
		case s == "--no-preserve-root":
			a.add(ruleNoPreserveRoot)
		case strings.HasPrefix(s, "--reference="):
		case strings.HasPrefix(s, "--"):
		case len(s) > 1 && s[0] == '-' && !looksLikeMode(s):
		default:
			rest = append(rest, f)
		}
	}
	if c.name == "setfacl" {
		// setfacl -m u:x:rwx FILE: the spec is consumed by -m.
		for i, f := range c.args {
			if (f.s == "-m" || f.s == "-x" || f.s == "-M" || f.s == "-X") && i+1 < len(c.args) && len(rest) > 0 && rest[0].s == c.args[i+1].s {
				rest = rest[1:]
				break
			}
		}
	} else if len(rest) > 0 {
		mode := rest[0].s
		rest = rest[1:]
		if (c.name == "chown" || c.name == "chgrp") && toRoot(c.name, rest, mode) {
			// A file given to root (with a setuid bit next) is a way up.
			a.add(rulePrivilege)
		}
		if c.name == "chmod" {
			if modeSetuid(mode) {
				a.add(ruleChmodSetuid)
			}
			if recursive && modeWorldWritable(mode) {
				a.add(ruleChmodWorld)
			}
		}
	}
	for _, f := range rest {
		if f.dyn {
			continue
		}
		t := a.target(f)
		p := t.p
		root, sys, _ := false, false, false
		if t.glob {
			root, sys, _ = a.globHits(p)
		}
		switch {
		case a.isProtected(t):
			a.add(ruleGateConfigWrite)
		case (p == "/" || root) && recursive:
			a.add(ruleChmodRoot)
		case p == "/" || root || sys || systemTops[p] || a.isSystemWrite(p) || within(p, "/var") && !isTemp(p):
			a.add(ruleChmodSystem)
		}
	}
}

func looksLikeMode(s string) bool {
	// "-x", "-w", "-rwx" remove permissions; they are modes, not options.
	return len(s) > 1 && s[0] == '-' && strings.Trim(s[1:], "rwxXst") == ""
}

func modeSetuid(m string) bool {
	if isOctal(m) {
		return len(m) == 4 && strings.IndexByte("234567", m[0]) >= 0
	}
	for _, clause := range strings.Split(m, ",") {
		if i := strings.IndexAny(clause, "+="); i >= 0 && strings.ContainsRune(clause[i:], 's') {
			return true
		}
	}
	return false
}

func modeWorldWritable(m string) bool {
	if isOctal(m) {
		last := m[len(m)-1]
		return last == '2' || last == '3' || last == '6' || last == '7'
	}
	for _, clause := range strings.Split(m, ",") {
		i := strings.IndexAny(clause, "+=")
		if i < 0 || !strings.ContainsRune(clause[i:], 'w') {
			continue
		}
		who := clause[:i]
		if strings.ContainsAny(who, "oa") {
			return true
		}
	}
	return false
}

func isOctal(s string) bool {
	if s == "" || len(s) > 4 {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '7' {
			return false
		}
	}
	return true
}

func (a *analyzer) chattr(c *call) {
	a.add(ruleChattr)
	a.generic(c)
}

// toRoot reports whether an owner spec of chown ("root", "0:0", ":wheel")
// or a group of chgrp gives files to root.
func toRoot(prog string, files []field, spec string) bool {
	if len(files) == 0 {
		return false
	}
	user, group, _ := strings.Cut(spec, ":")
	if prog == "chgrp" {
		user, group = "", spec
	}
	user, _, _ = strings.Cut(user, ".")
	switch user {
	case "root", "0":
		return true
	}
	switch group {
	case "root", "0", "wheel", "admin":
		return true
	}
	return false
}
