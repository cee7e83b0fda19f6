package policy

// langLua is what the classifier knows about Lua code.
var langLua = &codeLang{
	shellCalls: []string{"execute", "popen"},
	evalCalls:  []string{"load", "loadstring", "dostring"},
	join:       "",
	bareCalls:  false,
}
