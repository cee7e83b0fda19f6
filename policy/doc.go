// Package policy classifies shell commands before they run in a sandbox.
//
// Every command is parsed with a real shell parser (mvdan.cc/sh/v3/syntax,
// bash dialect) and its syntax tree is walked: pipelines, lists, subshells,
// functions, command and process substitutions, here-documents and
// here-strings, nested "bash -c" strings, eval, xargs, find -exec,
// privilege and process wrappers, interpreter one-liners and
// decode-then-execute chains. Quoting, $IFS, ANSI-C strings, simple
// variables and aliases defined earlier on the same line are resolved
// statically, so they cannot hide the payload.
//
// The result is one of three verdicts: [VerdictHardline] (never runs),
// [VerdictDangerous] (needs approval; each finding carries a stable
// description an allowlist can name) and [VerdictSafe].
//
// # How a command is judged
//
// analyzer.go walks the tree; expand.go, params.go and vars.go resolve words
// into fields (with a taint: remote, secret, decoded, a device name, the
// parent's pid, an endless stream...); exec.go resolves the command name and
// runs, for each simple command:
//
//  1. options.go: the program's option spec (optSpecs) expands abbreviated
//     long options the way getopt_long and git accept them (git reset --har,
//     rm --rec), and lets rules find positionals whatever options precede them;
//  2. registry.go: the rows of cliRules for the command (subcommand words and
//     options, one row per rule), then extraRules, the families that look at
//     every command (supervisor kills, Windows spellings, destruction,
//     credentials and exfiltration);
//  3. the command's own handler from handlerTable (exec.go), if any, which may
//     recurse into the command it wraps (sudo, env, xargs, ssh, docker run...).
//
// dataflow.go computes what each command prints, so pipes into shells and
// decoders are followed, and gate.go protects the sandbox's own settings.
//
// # Rule families
//
//   - Deletion and moves (rules_fs.go), emptying files, archives that delete,
//     recursive permission changes, version-control history and resource
//     exhaustion (rules_destroy.go); build outputs and dependency directories
//     under home (node_modules, dist, target) are routine to delete.
//   - Disks and filesystems (rules_disk.go), including devices computed at run
//     time (dd of=$(findmnt -no SOURCE /)).
//   - Writes to system paths, shell startup files, keys and credentials, and
//     other agents' permission settings (rules_write.go, rules_agents.go).
//   - Other agents' bypass switches (claude --dangerously-skip-permissions,
//     codex -a never, gemini --yolo, any --yolo) and this tool's own settings.
//   - Credentials: files, secret managers and cloud CLIs that print secrets,
//     secret-named variables, key hunts (rules_exfil.go, registry.go).
//   - Network: pipes into shells, reverse shells, exfiltration through URLs,
//     non-Authorization headers, DNS lookups built from command output, pushes
//     to new remotes and home-directory uploads; HTTP DELETE; exposure through
//     tunnels, remote forwards and servers of directories outside the tree
//     (rules_net.go, rules_exfil.go).
//   - Processes: killing every process, critical daemons, the parent ($PPID),
//     the agent or this tool (rules_proc.go, rules_agents.go).
//   - Git (rules_git.go), databases and SQL including dynamic SQL
//     (rules_db.go), containers and clouds (rules_cloud.go), system
//     administration (rules_sys.go), Windows and macOS (rules_win.go and the
//     Windows and macOS rows of cliRules).
//   - Options and variables whose value is a program (progopts.go): man -P,
//     rg --pre, sort --compress-program, tar -I/--to-command, rsync -e,
//     git -c core.pager, ssh -o ProxyCommand, PAGER, LESSOPEN, GIT_SSH_COMMAND.
//     The value is classified as a command, and a program outside the
//     well-known helpers (cat, less, gzip, ssh...) needs approval.
//   - Interpreter code (code.go, code_files.go and one code_<language>.go per
//     language): shell-outs, eval, file deletes and writes, fork and
//     allocation loops, environment exfiltration, decoded payloads.
//
// # The unknown
//
// A command the classifier cannot understand is never silently safe (see
// unknown.go): unparseable text, control bytes, terminal escapes, zero-width
// and bidirectional characters, look-alike Unicode in a command name, command
// names computed at run time, code read from a source it cannot see, inline
// programs past maxInlineCode and anything past the analysis budget all need
// approval, each with a finding that says why.
//
// # How to add a rule
//
//  1. If a new finding is needed, add a ruleID constant and its row in
//     ruleTable (rules.go): a stable kebab-case id, a stable description
//     (allowlists name it) and its verdict.
//  2. If the rule is about a command's subcommand words or options, add one row
//     to cliRules (registry.go). That is all most tools need.
//  3. If it needs logic, write func (a *analyzer) name(c *call) in the file of
//     its family and either list the command in handlerTable (exec.go) when it
//     is the command's own handler, or call it from extraRules (registry.go)
//     when it adds to another handler. If the rule reads positionals or long
//     options, give the program an entry in optSpecs (options.go).
//  4. For a new interpreter language, add code_<language>.go with its codeLang,
//     a line in codeLangs (code.go) and the name in the interpreter row of
//     handlerTable.
//  5. Add positive and benign look-alike cases to families_test.go and run
//     go test ./policy. TestSets measures every labelled set in testdata
//     against its pinned known misses (testdata/*.misses): a new miss fails,
//     and so does a pinned miss that no longer happens. After a fix, re-pin
//     with go test ./policy -run TestSets -pin and review the diff; never
//     relabel a set's line to make it pass.
package policy
