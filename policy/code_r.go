package policy

// langR is what the classifier knows about R (Rscript) code.
var langR = &codeLang{
	shellCalls: []string{"system", "system2", "shell"},
	evalCalls:  nil,
	join:       "",
	bareCalls:  false,
}
