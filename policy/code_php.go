package policy

// langPHP is what the classifier knows about PHP code.
var langPHP = &codeLang{
	shellCalls: []string{"system", "exec", "shell_exec", "passthru", "popen", "proc_open", "pcntl_exec"},
	evalCalls:  []string{"eval", "assert", "create_function"},
	join:       "",
	bareCalls:  false,
}
