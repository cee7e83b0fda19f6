package policy

import (
	"strings"
)

// Containers, clusters and clouds: namespaces, docker/kubectl/helm/terraform
// and the cloud CLIs, privileged containers and host mounts.

func (a *analyzer) namespace(c *call) {
	switch c.name {
	case "nsenter":
		a.add(ruleContainerEscape)
		a.hostEnter()
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

// hostEnter flags entering a container or namespace when the session runs on the host
// itself (Options.Host, or Context.Host for one session): the sandbox's own confinement does not follow the command into
// another container, which may hold other credentials, mounts and networks.
func (a *analyzer) hostEnter() {
	if a.c.host || (a.sess != nil && a.sess.ctx.Host) {
		a.add(ruleHostContainerExec)
	}
}

// cloud handles container engines, orchestrators and cloud CLIs.
func (a *analyzer) cloud(c *call) {
	i, verb := firstVerb(c.args, "nHclLsp")
	rest := c.args[min(i+1, len(c.args)):]
	has := func(opts ...string) bool { return hasOpt(rest, opts...) }
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
		case "exec", "attach":
			a.hostEnter()
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
	has := func(opts ...string) bool { return hasOpt(rest, opts...) }
	switch verb {
	case "run", "create":
		a.dockerRun(rest)
	case "exec":
		a.hostEnter()
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
