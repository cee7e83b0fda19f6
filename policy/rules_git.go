package policy

import "strings"

func (a *analyzer) git(c *call) {
	args := optSpecs["git"].canon(c.args)
	i := 0
	for ; i < len(args); i++ {
		s := args[i].s
		switch {
		case s == "-C" || s == "--git-dir" || s == "--work-tree" || s == "--namespace" || s == "--exec-path":
			i++
		case s == "--config-env" || strings.HasPrefix(s, "--config-env="):
			// The value comes from the environment: unknown.
			v := strings.TrimPrefix(s, "--config-env=")
			if s == "--config-env" && i+1 < len(args) {
				i++
				v = args[i].s
			}
			k, _, _ := strings.Cut(v, "=")
			a.gitConfigValue(k, field{s: unkS, dyn: true}, false)
		case s == "-c":
			if i+1 < len(args) {
				k, v, _ := strings.Cut(args[i+1].s, "=")
				a.gitConfigValue(k, field{s: v, dyn: args[i+1].dyn, t: args[i+1].t}, false)
			}
			i++
		case strings.HasPrefix(s, "-"):
		default:
			a.gitSub(s, args[i+1:], c)
			return
		}
	}
}

func (a *analyzer) gitSub(sub string, rest []field, c *call) {
	if sp := optSpecs["git "+sub]; sp != nil {
		rest = sp.canon(rest)
	}
	has := func(opts ...string) bool { return hasOpt(rest, opts...) }
	shortHas := func(ch byte) bool {
		for _, f := range rest {
			if s := f.s; len(s) > 1 && s[0] == '-' && s[1] != '-' && strings.IndexByte(s[1:], ch) >= 0 {
				return true
			}
		}
		return false
	}
	for j, f := range rest {
		if v, _, ok := optValue(rest, j, "--output", "-o"); ok && (f.s == "--output" || strings.HasPrefix(f.s, "--output=") || sub == "format-patch" && f.s == "-o") {
			a.writeTarget(v, wCopy, desc{})
		}
	}
	switch sub {
	case "push":
		a.gitPush(rest)
	case "reset":
		if has("--hard") {
			a.add(ruleGitResetHard)
		}
	case "clean":
		if (has("--force") || shortHas('f')) && !has("--dry-run") && !shortHas('n') {
			a.add(ruleGitClean)
		}
	case "checkout":
		if has("-f", "--force") || pathspecAll(rest) {
			a.add(ruleGitDiscard)
		}
	case "restore":
		staged := has("--staged", "-S")
		worktree := has("--worktree", "-W")
		if pathspecAll(rest) && (!staged || worktree) {
			a.add(ruleGitDiscard)
		}
	case "filter-branch", "filter-repo":
		a.add(ruleGitRewrite)
	case "reflog":
		if len(rest) > 0 && (rest[0].s == "delete" || rest[0].s == "expire" && has("--expire=now", "--expire-unreachable=now", "--expire=all", "--expire-unreachable=all")) {
			a.add(ruleGitRewrite)
		}
	case "update-ref":
		if has("-d", "--delete") {
			a.add(ruleGitRewrite)
		}
	case "branch":
		if has("-D") || shortHas('D') || (has("--delete", "-d") || shortHas('d')) && (has("--force") || shortHas('f')) {
			a.add(ruleGitBranchDelete)
		}
	case "config":
		a.gitConfig(rest)
	case "clone":
		if dirs := nonOptions(rest, "bocju"); len(dirs) > 1 {
			a.writeTarget(dirs[len(dirs)-1], wCopy, desc{})
		}
	case "submodule":
		for j, f := range rest {
			if f.s == "foreach" {
				cmd := peelOptions(rest[j+1:], "", "")
				if len(cmd) > 0 {
					a.shellCode(joinFields(cmd), desc{}, nil, false)
				}
				return
			}
		}
	case "rebase":
		for j := 0; j+1 < len(rest); j++ {
			if rest[j].s == "-x" || rest[j].s == "--exec" {
				a.shellCode(rest[j+1], desc{}, nil, false)
			}
		}
	case "bisect":
		if len(rest) > 1 && rest[0].s == "run" {
			a.exec(rest[1:], desc{})
		}
	default:
		a.generic(&call{name: "git", args: rest, in: c.in})
	}
}

// pathspecAll reports whether git's arguments name the whole tree.
func pathspecAll(args []field) bool {
	for _, f := range args {
		switch f.s {
		case ".", ":/", "*", "./", ":(top)":
			return true
		}
	}
	return false
}

var protectedBranches = map[string]bool{
	"main": true, "master": true, "trunk": true, "develop": true, "development": true, "production": true,
	"prod": true, "release": true, "stable": true, "gh-pages": true,
}

func (a *analyzer) gitPush(args []field) {
	deleting := false
	var refs []field
	for i := 0; i < len(args); i++ {
		s := args[i].s
		switch {
		case s == "--force" || s == "--mirror" || s == "--force-if-includes" || strings.HasPrefix(s, "--force-with-lease"):
			a.add(ruleGitForcePush)
		case s == "--delete":
			deleting = true
		case s == "--repo" || s == "--receive-pack" || s == "--exec" || s == "-o" || s == "--push-option":
			i++
		case strings.HasPrefix(s, "--"):
		case len(s) > 1 && s[0] == '-':
			if strings.ContainsRune(s, 'f') {
				a.add(ruleGitForcePush)
			}
			if strings.ContainsRune(s, 'd') {
				deleting = true
			}
		default:
			refs = append(refs, args[i])
		}
	}
	if len(refs) > 1 {
		refs = refs[1:] // the first is the remote
	} else {
		refs = nil
	}
	for _, r := range refs {
		s := r.s
		switch {
		case strings.HasPrefix(s, "+"):
			a.add(ruleGitForcePush)
		case strings.HasPrefix(s, ":") && protectedBranches[strings.TrimPrefix(s[1:], "refs/heads/")]:
			a.add(ruleGitRemoteDelete)
		case deleting && protectedBranches[strings.TrimPrefix(s, "refs/heads/")]:
			a.add(ruleGitRemoteDelete)
		}
	}
}

func (a *analyzer) gitConfig(args []field) {
	reading := false
	var kv []field
	for i := 0; i < len(args); i++ {
		s := args[i].s
		switch {
		case s == "-f" || s == "--file" || s == "--blob" || s == "--default" || s == "--type":
			i++
		case s == "--get" || s == "--get-all" || s == "--get-regexp" || s == "-l" || s == "--list" || s == "--unset" ||
			s == "--unset-all" || s == "--remove-section" || s == "get" || s == "list" || s == "unset":
			reading = true
		case s == "set" || strings.HasPrefix(s, "-"):
		default:
			kv = append(kv, args[i])
		}
	}
	if reading || len(kv) < 2 {
		return
	}
	a.gitConfigValue(kv[0].s, kv[1], true)
}

// gitConfigValue judges setting a git config key; persistent settings that
// run code on later git commands count as hooks.
func (a *analyzer) gitConfigValue(key string, v field, persist bool) {
	k := strings.ToLower(key)
	switch {
	case k == "core.hookspath":
		// Hooks kept in the repository (.githooks) are the project's own.
		if v.dyn || strings.HasPrefix(v.s, "/") || strings.HasPrefix(v.s, "~") || strings.HasPrefix(v.s, "..") {
			a.add(ruleGitHooks)
		}
	case strings.HasPrefix(k, "url.") && (strings.HasSuffix(k, ".insteadof") || strings.HasSuffix(k, ".pushinsteadof")):
		a.add(ruleRegistryRedirect)
	case strings.HasPrefix(k, "protocol.") && strings.HasSuffix(k, ".allow") && v.s == "always":
		a.add(ruleProgramOption)
	case k == "core.fsmonitor":
		if persist && v.s != "false" && v.s != "true" && v.s != "" {
			a.add(ruleGitHooks)
		}
		a.programOption(v)
	case strings.HasPrefix(k, "alias."):
		if strings.HasPrefix(v.s, "!") {
			v.s = v.s[1:]
			a.shellCode(v, desc{}, nil, false)
		}
	case k == "core.sshcommand" || k == "core.pager" || k == "core.editor" || k == "sequence.editor" ||
		k == "diff.external" || k == "core.askpass" || strings.HasPrefix(k, "pager.") || strings.HasPrefix(k, "interactive.difffilter") ||
		strings.HasPrefix(k, "diff.") && strings.HasSuffix(k, ".textconv") || strings.HasPrefix(k, "filter.") || strings.HasPrefix(k, "merge.") && strings.HasSuffix(k, ".driver"):
		a.programOption(v)
	case strings.HasPrefix(k, "credential.") && strings.HasPrefix(v.s, "!"):
		v.s = v.s[1:]
		a.shellCode(v, desc{}, nil, false)
		a.add(ruleProgramOption)
	}
}
