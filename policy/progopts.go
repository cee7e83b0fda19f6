package policy

import "strings"

// Options and variables whose value is a program to run: pagers,
// preprocessors, compressors, remote shells, editors and helpers named in
// options (man -P, rg --pre, sort --compress-program, tar -I, rsync -e,
// git -c core.pager, ssh -o ProxyCommand) or in the environment (PAGER,
// LESSOPEN, GIT_SSH_COMMAND). The value is classified as a command; a
// program outside the well-known helpers needs approval, because the
// option hides it from anyone reading the command.

// helperPrograms are programs commonly named by such options.
var helperPrograms = map[string]bool{
	"cat": true, "less": true, "more": true, "most": true, "bat": true, "batcat": true, "head": true, "tail": true,
	"gzip": true, "gunzip": true, "zcat": true, "zstd": true, "unzstd": true, "pigz": true, "xz": true, "unxz": true,
	"bzip2": true, "pbzip2": true, "lbzip2": true, "lz4": true, "lzop": true, "brotli": true, "lzip": true, "plzip": true,
	"pdftotext": true, "lesspipe": true, "lesspipe.sh": true, "md5sum": true, "sha1sum": true, "sha256sum": true,
	"sha512sum": true, "b2sum": true, "wc": true, "ssh": true, "difft": true, "delta": true, "diff-so-fancy": true,
	"vim": true, "vi": true, "nvim": true, "nano": true, "emacs": true, "code": true, "subl": true, "true": true,
	"w3m": true, "lynx": true, "xdg-open": true, "open": true, "jq": true, "sort": true, "file": true, "strings": true,
	"highlight": true, "pygmentize": true, "mandoc": true, "groff": true, "col": true, "tee": true, "pandoc": true,
	"ripgrep": true, "rg": true, "grep": true, "ls": true, "tree": true, "echo": true, "printf": true, "diff": true,
	"git": true, "gpg": true, "mosh": true, "autossh": true, "ssh-askpass": true,
}

// programEnv are environment variables whose value is a program to run.
var programEnv = map[string]bool{
	"PAGER": true, "MANPAGER": true, "GIT_PAGER": true, "SYSTEMD_PAGER": true, "BAT_PAGER": true, "PSQL_PAGER": true,
	"LESSOPEN": true, "LESSCLOSE": true, "EDITOR": true, "VISUAL": true, "GIT_EDITOR": true, "GIT_SEQUENCE_EDITOR": true,
	"GIT_SSH": true, "GIT_SSH_COMMAND": true, "GIT_EXTERNAL_DIFF": true, "GIT_ASKPASS": true, "SSH_ASKPASS": true,
	"SUDO_ASKPASS": true, "RSYNC_RSH": true, "BROWSER": true, "MANOPT": true, "FZF_DEFAULT_COMMAND": true,
	"GIT_PROXY_COMMAND": true, "TAR_OPTIONS": true,
}

// programOption classifies v, the value of an option or variable that
// names a program to run, as a command.
func (a *analyzer) programOption(v field) {
	s := strings.TrimSpace(v.s)
	s = strings.TrimSpace(strings.TrimLeft(s, "|!"))
	if s == "" {
		return
	}
	v.s = s
	a.shellCode(v, desc{}, nil, false)
	if v.dyn {
		a.add(ruleProgramOption)
		return
	}
	words := strings.Fields(s)
	for len(words) > 0 && strings.Contains(words[0], "=") && !strings.HasPrefix(words[0], "-") {
		words = words[1:]
	}
	if len(words) == 0 {
		return
	}
	name := strings.Trim(cmdBase(words[0]), "'\"")
	if !helperPrograms[name] {
		a.add(ruleProgramOption)
	}
}
