package policy

// Rule describes one kind of finding.
type Rule struct {
	ID          string
	Description string
	Verdict     Verdict
}

type ruleID int

// Rule ids. Their strings and descriptions are stable: allowlists and audit
// records name them.
const (
	// hardline
	ruleDeleteRoot ruleID = iota
	ruleDeleteSystem
	ruleDeleteHome
	ruleNoPreserveRoot
	ruleMkfsDevice
	ruleDiskOverwrite
	ruleRedirectDevice
	ruleDiskWipe
	ruleForkBomb
	ruleKillAll
	ruleShutdown
	ruleSysrq
	ruleSudoStdin
	ruleGateConfigChange
	ruleGateConfigWrite
	ruleGateEnv
	ruleEgressChange
	ruleChmodRoot

	// dangerous
	ruleUnparseable
	ruleTooComplex
	ruleInternalError
	ruleDeleteOutside
	ruleDeleteUnresolved
	ruleDeleteSystemFile
	ruleDeleteSensitive
	ruleMoveSystem
	ruleFindDelete
	ruleRsyncDelete
	ruleDynamicCommand
	ruleEvalDynamic
	ruleObfuscated
	ruleChmodSystem
	ruleChmodWorld
	ruleChmodSetuid
	ruleWriteSystem
	ruleWriteRC
	ruleWriteSSH
	ruleWriteCreds
	ruleDeviceWrite
	ruleReadCreds
	rulePipeShell
	ruleDownloadExec
	ruleReverseShell
	ruleDevTCP
	ruleExfil
	ruleGitForcePush
	ruleGitResetHard
	ruleGitClean
	ruleGitDiscard
	ruleGitRewrite
	ruleGitBranchDelete
	ruleGitRemoteDelete
	ruleSQL
	ruleDatabase
	ruleCloud
	ruleContainerEscape
	ruleContainerDestroy
	ruleMount
	ruleCron
	ruleService
	ruleGitHooks
	ruleAuthorizedKeys
	ruleLDPreload
	ruleHistory
	ruleLogs
	ruleSecurity
	ruleKillCritical
	rulePrivilege
	ruleChattr
	ruleUsers
	ruleKernel
	ruleServiceStop
	ruleGateConfigOther
	ruleNetworkDown
	ruleDiskPartition
	ruleDiskUnresolved
	ruleCapabilities
	ruleAgentBypass
	ruleAgentSettings
	ruleCloudSecret
	ruleKeyHunt
	ruleTruncate
	ruleDeleteVCS
	ruleDeleteAllHere
	ruleFillDisk
	ruleKillSupervisor
	ruleExposure
	ruleHTTPDelete
	ruleProgramOption
	ruleLookalike
	rulePublish
	ruleRegistryRedirect
	ruleOffensive
	ruleIAM
	ruleRemoteExec
	ruleStdinScript
	ruleArchiveRemove
	ruleChmodOutside
	ruleGitRemoteRefDelete
	ruleSessionEnv
	ruleRunUnseen
	ruleRebind
	ruleFindExec
	ruleOptionWrite
	ruleForcedTempDelete
	ruleHostContainerExec
	numRules
)

var ruleTable = [numRules]Rule{
	ruleDeleteRoot:       {"recursive-delete-root", "recursive delete of the root filesystem", VerdictHardline},
	ruleDeleteSystem:     {"recursive-delete-system", "recursive delete of a system directory", VerdictHardline},
	ruleDeleteHome:       {"recursive-delete-home", "recursive delete of the home directory", VerdictHardline},
	ruleNoPreserveRoot:   {"no-preserve-root", "command run with --no-preserve-root", VerdictHardline},
	ruleMkfsDevice:       {"mkfs-device", "creating a filesystem on a block device", VerdictHardline},
	ruleDiskOverwrite:    {"disk-overwrite", "raw write to a block device", VerdictHardline},
	ruleRedirectDevice:   {"redirect-to-device", "redirect into a block device", VerdictHardline},
	ruleDiskWipe:         {"disk-wipe", "wiping or erasing a disk", VerdictHardline},
	ruleForkBomb:         {"fork-bomb", "fork bomb", VerdictHardline},
	ruleKillAll:          {"kill-all-processes", "killing every process on the system", VerdictHardline},
	ruleShutdown:         {"system-shutdown", "shutting down or rebooting the system", VerdictHardline},
	ruleSysrq:            {"sysrq-trigger", "triggering a kernel SysRq action", VerdictHardline},
	ruleSudoStdin:        {"sudo-stdin-password", "sudo reading a password from stdin (password guessing)", VerdictHardline},
	ruleGateConfigChange: {"gate-config-change", "changing the sandbox's own approval, tool, loop or audit settings", VerdictHardline},
	ruleGateConfigWrite:  {"gate-config-write", "modifying the sandbox's own config, secrets or audit log", VerdictHardline},
	ruleGateEnv:          {"gate-env-override", "overriding the sandbox's settings through environment variables", VerdictHardline},
	ruleEgressChange: {"egress-change", "changing the sandbox's network egress (docker.network, kubernetes.network, " +
		"an egress allowlist, or a live session's with `sessions network`)", VerdictHardline},
	ruleChmodRoot: {"recursive-chmod-root", "recursive permission or ownership change of the root filesystem", VerdictHardline},

	ruleUnparseable:        {"unparseable", "command could not be parsed", VerdictDangerous},
	ruleTooComplex:         {"too-complex", "command too large or too deeply nested to analyse", VerdictDangerous},
	ruleInternalError:      {"analysis-error", "command could not be analysed", VerdictDangerous},
	ruleDeleteOutside:      {"recursive-delete-outside", "recursive or forced delete outside the working tree", VerdictDangerous},
	ruleDeleteUnresolved:   {"delete-unresolved-target", "delete target comes from an unresolved expansion", VerdictDangerous},
	ruleDeleteSystemFile:   {"delete-system-file", "deleting a system file", VerdictDangerous},
	ruleDeleteSensitive:    {"delete-sensitive", "deleting credentials, SSH keys or shell startup files", VerdictDangerous},
	ruleMoveSystem:         {"move-system-path", "moving or renaming a system directory", VerdictDangerous},
	ruleFindDelete:         {"find-delete-outside", "find -delete outside the working tree", VerdictDangerous},
	ruleRsyncDelete:        {"rsync-delete-outside", "rsync --delete outside the working tree", VerdictDangerous},
	ruleDynamicCommand:     {"dynamic-command", "command name comes from an unresolved expansion", VerdictDangerous},
	ruleEvalDynamic:        {"eval-dynamic", "evaluating an unresolved command string", VerdictDangerous},
	ruleObfuscated:         {"obfuscated-exec", "decoded or obfuscated command executed", VerdictDangerous},
	ruleChmodSystem:        {"chmod-system", "permission or ownership change of a system path", VerdictDangerous},
	ruleChmodWorld:         {"chmod-world-writable", "recursive world-writable permission change", VerdictDangerous},
	ruleChmodSetuid:        {"chmod-setuid", "setting a setuid or setgid bit", VerdictDangerous},
	ruleWriteSystem:        {"write-system-path", "write to a system path", VerdictDangerous},
	ruleWriteRC:            {"write-shell-rc", "write to a shell startup file", VerdictDangerous},
	ruleWriteSSH:           {"write-ssh", "write to the SSH directory", VerdictDangerous},
	ruleWriteCreds:         {"write-credentials", "write to a credential file", VerdictDangerous},
	ruleDeviceWrite:        {"device-write", "write to a device file", VerdictDangerous},
	ruleReadCreds:          {"read-credentials", "reading high-value credentials", VerdictDangerous},
	rulePipeShell:          {"pipe-to-shell", "remote content executed by a shell or interpreter", VerdictDangerous},
	ruleDownloadExec:       {"download-execute", "executing a freshly downloaded file", VerdictDangerous},
	ruleReverseShell:       {"reverse-shell", "reverse or bind shell", VerdictDangerous},
	ruleDevTCP:             {"dev-tcp", "network connection through /dev/tcp or /dev/udp", VerdictDangerous},
	ruleExfil:              {"exfiltration", "secrets or history sent to the network", VerdictDangerous},
	ruleGitForcePush:       {"git-force-push", "force push that rewrites remote history", VerdictDangerous},
	ruleGitResetHard:       {"git-reset-hard", "git reset --hard discarding local changes", VerdictDangerous},
	ruleGitClean:           {"git-clean", "git clean deleting untracked files", VerdictDangerous},
	ruleGitDiscard:         {"git-discard-changes", "git checkout/restore discarding all local changes", VerdictDangerous},
	ruleGitRewrite:         {"git-history-rewrite", "rewriting or expiring git history", VerdictDangerous},
	ruleGitBranchDelete:    {"git-branch-force-delete", "force-deleting a git branch", VerdictDangerous},
	ruleGitRemoteDelete:    {"git-remote-branch-delete", "deleting a main or release branch on the remote", VerdictDangerous},
	ruleSQL:                {"sql-destructive", "destructive SQL statement (DROP, TRUNCATE, or DELETE/UPDATE without WHERE)", VerdictDangerous},
	ruleDatabase:           {"database-destroy", "flushing or dropping a database", VerdictDangerous},
	ruleCloud:              {"cloud-destroy", "destroying cloud or cluster resources", VerdictDangerous},
	ruleContainerEscape:    {"container-escape", "privileged container or host namespace access", VerdictDangerous},
	ruleContainerDestroy:   {"container-destroy", "removing all containers, images or volumes", VerdictDangerous},
	ruleMount:              {"mount", "mounting filesystems or changing root", VerdictDangerous},
	ruleCron:               {"cron-modify", "modifying scheduled jobs (cron, at)", VerdictDangerous},
	ruleService:            {"service-persistence", "installing or enabling a system service or login item", VerdictDangerous},
	ruleGitHooks:           {"git-hooks", "changing git hooks", VerdictDangerous},
	ruleAuthorizedKeys:     {"authorized-keys", "adding SSH authorized keys", VerdictDangerous},
	ruleLDPreload:          {"ld-preload", "hijacking the dynamic linker (LD_PRELOAD)", VerdictDangerous},
	ruleHistory:            {"history-tampering", "clearing or disabling shell history", VerdictDangerous},
	ruleLogs:               {"log-tampering", "clearing or tampering with system logs", VerdictDangerous},
	ruleSecurity:           {"security-disable", "disabling the firewall or a security control", VerdictDangerous},
	ruleKillCritical:       {"kill-critical", "killing critical or many processes", VerdictDangerous},
	rulePrivilege:          {"privilege-escalation", "running a command with elevated privileges", VerdictDangerous},
	ruleChattr:             {"chattr", "changing immutable file attributes", VerdictDangerous},
	ruleUsers:              {"user-management", "changing user accounts or passwords", VerdictDangerous},
	ruleKernel:             {"kernel-change", "loading kernel modules or changing kernel parameters", VerdictDangerous},
	ruleServiceStop:        {"service-stop", "stopping or disabling a critical system service", VerdictDangerous},
	ruleGateConfigOther:    {"gate-config-isolation", "weakening the sandbox's isolation settings", VerdictDangerous},
	ruleNetworkDown:        {"network-down", "taking down network interfaces", VerdictDangerous},
	ruleDiskPartition:      {"disk-partition", "modifying disk partitions or volumes", VerdictDangerous},
	ruleDiskUnresolved:     {"disk-unresolved-device", "disk operation on an unresolved device", VerdictDangerous},
	ruleCapabilities:       {"file-capabilities", "granting file capabilities (setcap)", VerdictDangerous},
	ruleAgentBypass:        {"agent-bypass", "running an agent with its approvals or sandbox turned off", VerdictDangerous},
	ruleAgentSettings:      {"agent-settings-write", "changing an agent's permission or approval settings", VerdictDangerous},
	ruleCloudSecret:        {"secret-store-read", "printing secrets or tokens from a CLI or secret manager", VerdictDangerous},
	ruleKeyHunt:            {"key-hunt", "searching the filesystem for private keys or credentials", VerdictDangerous},
	ruleTruncate:           {"truncate-file", "emptying or overwriting a file's contents", VerdictDangerous},
	ruleDeleteVCS:          {"delete-vcs-history", "deleting version-control history or stashes", VerdictDangerous},
	ruleDeleteAllHere:      {"delete-everything-here", "deleting everything in the working directory or its parent", VerdictDangerous},
	ruleFillDisk:           {"resource-exhaustion", "filling the disk or memory without a bound", VerdictDangerous},
	ruleKillSupervisor:     {"kill-supervisor", "killing the agent, this sandbox or the parent process", VerdictDangerous},
	ruleExposure:           {"public-exposure", "exposing a local service, directory or resource to the network", VerdictDangerous},
	ruleHTTPDelete:         {"http-delete", "destructive HTTP request to a data store or API", VerdictDangerous},
	ruleProgramOption:      {"option-runs-program", "an option or variable names a program to run", VerdictDangerous},
	ruleLookalike:          {"hidden-characters", "control bytes, escape sequences or look-alike Unicode in a command", VerdictDangerous},
	rulePublish:            {"publish-release", "publishing or deleting a package, image, release or repository setting", VerdictDangerous},
	ruleRegistryRedirect:   {"registry-redirect", "redirecting package, git or name lookups to another source", VerdictDangerous},
	ruleOffensive:          {"offensive-tool", "scanning networks or brute-forcing credentials", VerdictDangerous},
	ruleIAM:                {"iam-escalation", "granting administrator access or creating access keys", VerdictDangerous},
	ruleRemoteExec:         {"remote-exec", "running commands on other hosts or applying remote content", VerdictDangerous},
	ruleStdinScript:        {"unknown-stdin-script", "a shell or interpreter runs a script it reads from an unknown source", VerdictDangerous},
	ruleArchiveRemove:      {"archive-remove-files", "archiving that deletes the archived files", VerdictDangerous},
	ruleChmodOutside:       {"recursive-chmod-outside", "recursive permission or ownership change outside the working tree", VerdictDangerous},
	ruleGitRemoteRefDelete: {"git-remote-ref-delete", "deleting a branch or tag on the remote", VerdictDangerous},
	ruleSessionEnv: {"session-env-change",
		"changing a variable that decides what later commands run (PATH, BASH_ENV, ENV, LD_PRELOAD, PROMPT_COMMAND)", VerdictDangerous},
	ruleRebind: {"command-rebound",
		"making a command name run another program or code (hash -p, an exported BASH_FUNC_ function)", VerdictDangerous},
	ruleFindExec: {"find-exec-changes",
		"find runs a program that can change files on every match, or asks on the terminal for each (-ok)", VerdictDangerous},
	ruleOptionWrite: {"option-writes-file", "an option writes the program's output to a file (base64 -o)", VerdictDangerous},
	ruleForcedTempDelete: {"forced-delete-outside",
		"forced delete of an absolute path outside the working tree (a shared temporary directory)", VerdictDangerous},
	ruleHostContainerExec: {"host-container-exec",
		"entering another container or namespace on the host from a local session (docker exec, kubectl exec, nsenter)", VerdictDangerous},
	ruleRunUnseen: {"run-unseen-content",
		"running a file that an earlier part of the same command line wrote with content the gate cannot see", VerdictDangerous},
}

// Rules lists every rule the classifier can report, most severe first.
func Rules() []Rule {
	out := make([]Rule, 0, numRules)
	for _, v := range []Verdict{VerdictHardline, VerdictDangerous} {
		for _, r := range ruleTable {
			if r.Verdict == v {
				out = append(out, r)
			}
		}
	}
	return out
}
