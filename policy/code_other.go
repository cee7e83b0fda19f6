package policy

// langOther is what the classifier knows about languages without their own table (julia, pwsh, osascript, ...) code.
var langOther = &codeLang{
	shellCalls: []string{"system", "exec", "popen"},
	evalCalls:  nil,
	join:       "",
	bareCalls:  false,
}
