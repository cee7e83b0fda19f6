package policy

import "strings"

// Windows (cmd.exe and PowerShell) spellings. The local backend runs
// wherever the agent runs, so these commands reach a real machine. Command
// names are compared in lower case without ".exe". The bash parser drops
// unquoted backslashes, so "C:\Users\dev" arrives as "C:Usersdev": paths
// are judged by their drive, first component and depth, not by separators.

// winPath classifies a Windows path argument: 0 not a Windows path or
// relative, 1 elsewhere on a drive, 2 the profile (home), 3 a system
// directory, 4 a drive root.
func winPath(s string) int {
	w := strings.ToLower(strings.Trim(s, "\"'"))
	switch {
	case strings.HasPrefix(w, "hklm:") || strings.HasPrefix(w, "hkcu:") || strings.HasPrefix(w, "registry::") || strings.HasPrefix(w, "hkey_"):
		return 3
	case strings.Contains(w, "userprofile") || w == "~" || strings.HasPrefix(w, "~\\") && len(w) == 2 || w == "$home" || w == "%homepath%":
		return 2
	case strings.HasPrefix(w, "~") || strings.Contains(w, "$home") || strings.Contains(w, "%homepath%") || strings.Contains(w, "appdata"):
		return 1
	case strings.Contains(w, "systemroot") || strings.Contains(w, "windir") || strings.Contains(w, "programfiles") || strings.Contains(w, "system32"):
		return 3
	}
	if len(w) < 2 || w[1] != ':' || w[0] < 'a' || w[0] > 'z' {
		return 0
	}
	rest := strings.TrimLeft(w[2:], "\\/")
	switch {
	case rest == "" || rest == "*" || rest == "*.*":
		return 4
	case strings.HasPrefix(rest, "windows") || strings.HasPrefix(rest, "program files") || strings.HasPrefix(rest, "programfiles") ||
		strings.HasPrefix(rest, "programdata") || strings.HasPrefix(rest, "boot"):
		return 3
	case strings.HasPrefix(rest, "users"):
		// C:\Users, C:\Users\NAME (the profile) or deeper. Without
		// separators, depth is unknown: take the shortest reading that
		// still names something under the profile.
		after := strings.TrimLeft(rest[len("users"):], "\\/")
		if after == "" || after == "*" {
			return 3
		}
		if !strings.ContainsAny(rest, "\\/") {
			return 1 // separators lost to shell quoting: depth unknown
		}
		if _, tail, ok := strings.Cut(strings.ReplaceAll(after, "/", "\\"), "\\"); !ok || tail == "" || tail == "*" || tail == "*.*" {
			return 2
		}
		return 1
	}
	return 1
}

// winDriveAbs reports whether s is an absolute Windows path with a drive
// letter (C:\x, c:/x).
func winDriveAbs(s string) bool {
	return len(s) >= 3 && s[1] == ':' && (s[2] == '\\' || s[2] == '/') &&
		(s[0] >= 'a' && s[0] <= 'z' || s[0] >= 'A' && s[0] <= 'Z')
}

// windowsDelete judges Remove-Item, rd, rmdir, del and erase.
func (a *analyzer) windowsDelete(c *call) {
	recursive, winStyle := false, false
	var targets []field
	for i := 0; i < len(c.args); i++ {
		f := c.args[i]
		s := strings.ToLower(f.s)
		switch {
		case s == "/s" || s == "-recurse" || s == "-r" || s == "-rec" || strings.HasPrefix(s, "-recurse"):
			recursive, winStyle = true, true
		case s == "-path" || s == "-literalpath" || s == "-lp":
			winStyle = true
			if i+1 < len(c.args) {
				i++
				targets = append(targets, c.args[i])
			}
		case strings.HasPrefix(s, "/") && len(s) <= 3 && c.name != "rm" && c.name != "rmdir" || strings.HasPrefix(s, "-") && len(s) > 2 && c.name != "rm" && c.name != "rmdir":
			winStyle = true
		case strings.HasPrefix(s, "-fo") || s == "-force":
			winStyle = true
		case strings.HasPrefix(s, "-") || strings.HasPrefix(s, "/") && len(s) <= 3:
		default:
			targets = append(targets, f)
		}
	}
	for _, f := range targets {
		k := winPath(f.s)
		if !f.dyn && winStyle && a.isHomeDir(a.target(f).p) {
			k = 2
		}
		if k == 0 {
			// A drive-absolute path (C:\tmp\x) is outside any working tree
			// this sandbox has: a recursive delete there needs approval, as
			// rm -r of an absolute path outside the tree does.
			if recursive && !f.dyn && winDriveAbs(f.s) {
				a.add(ruleDeleteOutside)
			}
			continue
		}
		if (c.name == "rm" || c.name == "rmdir") && !winStyle && !strings.Contains(strings.ToLower(f.s), ":") {
			continue // a Unix rm: its own rules judge it
		}
		glob := strings.Contains(f.s, "*")
		switch {
		case k == 4:
			a.add(ruleDeleteRoot)
		case k == 3 && (recursive || glob):
			a.add(ruleDeleteSystem)
		case k == 3:
			a.add(ruleDeleteSystemFile)
		case k == 2 && (recursive || glob):
			a.add(ruleDeleteHome)
		case recursive || glob || c.name == "del" || c.name == "erase":
			a.add(ruleDeleteOutside)
		}
	}
	if len(targets) == 0 && recursive && !c.in.known {
		// Get-ChildItem ... | Remove-Item -Recurse: the targets come from a listing.
		a.add(ruleDeleteUnresolved)
	}
}

// windows applies the Windows rules that need more than a table row.
func (a *analyzer) windows(c *call) {
	switch c.name {
	case "remove-item", "ri", "rd", "del", "erase", "rm", "rmdir", "rmdir.exe":
		a.windowsDelete(c)
	case "format":
		for _, f := range c.args {
			if s := f.s; len(s) == 2 && s[1] == ':' {
				a.add(ruleDiskWipe)
			}
		}
	case "cmd":
		for i, f := range c.args {
			if s := strings.ToLower(f.s); s == "/c" || s == "/k" || s == "/r" {
				if i+1 < len(c.args) {
					a.shellCode(joinFields(c.args[i+1:]), desc{}, nil, false)
				}
				return
			}
		}
	case "iex", "invoke-expression":
		if c.in.t&tRemote != 0 {
			a.add(rulePipeShell)
			return
		}
		for _, f := range c.args {
			s := strings.ToLower(f.s)
			if f.t&tRemote != 0 || strings.Contains(s, "downloadstring") || strings.Contains(s, "iwr ") || strings.Contains(s, "irm ") ||
				strings.Contains(s, "invoke-webrequest") || strings.Contains(s, "invoke-restmethod") || strings.Contains(s, "net.webclient") {
				a.add(rulePipeShell)
				return
			}
		}
		a.add(ruleEvalDynamic)
	}
}

// remoteFetchers are PowerShell downloaders whose output is remote content.
func isPSFetcher(name string) bool {
	switch strings.ToLower(name) {
	case "iwr", "irm", "invoke-webrequest", "invoke-restmethod", "start-bitstransfer":
		return true
	}
	return false
}
