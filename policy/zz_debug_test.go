package policy

import (
	"bufio"
	"fmt"
	"os"
	"testing"
)

func TestZZDebug(t *testing.T) {
	f, err := os.Open("/tmp/pc/cmds.txt")
	if err != nil {
		t.Skip()
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		if line == "" {
			continue
		}
		r := Classify(line)
		ids := ""
		for _, fi := range r.Findings {
			ids += fi.Rule + " "
		}
		fmt.Printf("%-9s %-60s | %s\n", r.Verdict, line, ids)
	}
}
