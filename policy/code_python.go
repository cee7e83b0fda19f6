package policy

// langPython is what the classifier knows about Python code.
var langPython = &codeLang{
	shellCalls: []string{"system", "popen", "run", "call", "Popen", "check_output", "check_call", "getoutput", "getstatusoutput",
		"spawn", "execl", "execlp", "execle", "execv", "execvp", "execve", "execvpe", "spawnl", "spawnlp", "spawnv",
		"spawnvp", "create_subprocess_shell", "create_subprocess_exec", "posix_spawn", "posix_spawnp"},
	evalCalls: []string{"exec", "eval", "compile"},
	join:      "",
	bareCalls: false,
}
