package policy

// langRuby is what the classifier knows about Ruby code.
var langRuby = &codeLang{
	shellCalls: []string{"system", "exec", "spawn", "popen", "popen2", "popen2e", "popen3", "capture2", "capture2e", "capture3", "pipeline"},
	evalCalls:  []string{"eval", "instance_eval", "class_eval", "module_eval"},
	join:       " ",
	bareCalls:  true,
}
