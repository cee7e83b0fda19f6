package policy

// langNode is what the classifier knows about JavaScript (node, deno, bun) code.
var langNode = &codeLang{
	shellCalls: []string{"exec", "execSync", "spawn", "spawnSync", "execFile", "execFileSync", "execa", "execaSync", "execaCommand"},
	evalCalls:  []string{"eval", "Function", "runInThisContext", "runInNewContext"},
	join:       " ",
	bareCalls:  false,
}
