package policy

// langAwk is what the classifier knows about awk code.
var langAwk = &codeLang{
	shellCalls: []string{"system"},
	evalCalls:  nil,
	join:       "",
	bareCalls:  false,
}
