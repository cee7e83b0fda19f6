package policy

// langPerl is what the classifier knows about Perl code.
var langPerl = &codeLang{
	shellCalls: []string{"system", "exec"},
	evalCalls:  []string{"eval"},
	join:       " ",
	bareCalls:  true,
}
