package policy

import (
	"encoding/base64"
	"fmt"
	"strings"
	"testing"
	"time"
)

func TestZZSlow(t *testing.T) {
	b64 := base64.StdEncoding.EncodeToString([]byte("python3 -c \"import base64;exec(base64.b64decode('" + base64.StdEncoding.EncodeToString([]byte("import os;os.system('ls')")) + "'))\""))
	cases := map[string]string{
		"braces":   strings.Repeat("{a,b,c}", 40),
		"nestsub":  strings.Repeat("$(", 200) + "ls" + strings.Repeat(")", 200),
		"loops":    strings.Repeat("for i in 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16; do ", 6) + "rm -rf $i" + strings.Repeat("; done", 6),
		"funcs":    func() string { s := ""; for i := 0; i < 300; i++ { s += fmt.Sprintf("f%d(){ f%d|f%d; }; ", i, i+1, i+1) }; return s + "f0" }(),
		"b64":      "python3 -c \"import base64;" + strings.Repeat("exec(base64.b64decode('"+b64+"'));", 300) + "\"",
		"longpipe": strings.Repeat("cat | ", 3000) + "sh",
		"bigecho":  "echo " + strings.Repeat("x", 900000) + " | sh",
		"manyvars": strings.Repeat("a=$a$a; ", 40) + "rm -rf $a",
		"arr":      "x=(" + strings.Repeat("a ", 50000) + "); for i in ${x[@]}; do echo $i; done",
		"hdoc":     "bash <<EOF\n" + strings.Repeat("echo $(echo $(echo hi))\n", 5000) + "EOF",
	}
	for name, c := range cases {
		st := time.Now()
		r := Classify(c)
		fmt.Printf("%-9s %-10v %s %d findings\n", name, time.Since(st), r.Verdict, len(r.Findings))
	}
}
