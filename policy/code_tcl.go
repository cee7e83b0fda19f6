package policy

// langTcl is what the classifier knows about Tcl (tclsh, expect) code.
var langTcl = &codeLang{
	shellCalls: []string{"exec", "spawn"},
	evalCalls:  nil,
	join:       " ",
	bareCalls:  true,
}
