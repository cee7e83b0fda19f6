// Command testsummary reads `go test -json` on stdin and prints what plain `go test` prints
// (each package's ok/FAIL line, and the output of failing tests), then every skipped test with
// its reason and one closing line: "N passed, N failed, N skipped". It exits 1 if any test or
// package failed, so `make test` fails when go test does.
//
//	go run ./internal/tools/testsummary -race ./...   # runs go test -json -race ./...
//	go test -json ./... | go run ./internal/tools/testsummary
package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"sort"
	"strings"
)

// event is one line of `go test -json` (cmd/test2json).
type event struct {
	Action  string
	Package string
	Test    string
	Output  string
	Elapsed float64
}

type key struct{ pkg, test string }

func main() {
	if len(os.Args) == 1 {
		os.Exit(run(os.Stdin, os.Stdout))
	}
	gotest := exec.Command("go", append([]string{"test", "-json"}, os.Args[1:]...)...)
	gotest.Stderr = os.Stderr
	pipe, err := gotest.StdoutPipe()
	if err != nil {
		fmt.Fprintln(os.Stderr, "testsummary:", err)
		os.Exit(2)
	}
	if err := gotest.Start(); err != nil {
		fmt.Fprintln(os.Stderr, "testsummary:", err)
		os.Exit(2)
	}
	code := run(pipe, os.Stdout)
	if err := gotest.Wait(); err != nil && code == 0 {
		fmt.Fprintln(os.Stderr, "testsummary: go test:", err)
		code = 1
	}
	os.Exit(code)
}

func run(in io.Reader, out io.Writer) int {
	outputs := map[key][]string{} // output per test (and per package with test "")
	var passed, failed, skipped int
	var skips []string
	failedPkg := false
	sc := bufio.NewScanner(in)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for sc.Scan() {
		line := sc.Bytes()
		var e event
		if err := json.Unmarshal(line, &e); err != nil || e.Action == "" {
			fmt.Fprintln(out, string(line)) // build errors and the like arrive as plain text
			continue
		}
		k := key{e.Package, e.Test}
		switch e.Action {
		case "build-output":
			fmt.Fprint(out, e.Output)
		case "build-fail":
			failedPkg = true
		case "output":
			outputs[k] = append(outputs[k], e.Output)
		case "pass":
			if e.Test == "" {
				fmt.Fprintf(out, "ok  \t%s\t%.3fs\n", e.Package, e.Elapsed)
			} else if !strings.Contains(e.Test, "/") {
				passed++
			}
			delete(outputs, k)
		case "skip":
			if e.Test == "" {
				fmt.Fprintf(out, "?   \t%s\t[no test files]\n", e.Package)
			} else {
				skipped++
				skips = append(skips, fmt.Sprintf("%s %s: %s", shortPkg(e.Package), e.Test, skipReason(outputs[k])))
			}
			delete(outputs, k)
		case "fail":
			if e.Test == "" {
				failedPkg = true
				for _, o := range outputs[k] {
					fmt.Fprint(out, o)
				}
				fmt.Fprintf(out, "FAIL\t%s\t%.3fs\n", e.Package, e.Elapsed)
			} else {
				if !strings.Contains(e.Test, "/") {
					failed++
				}
				fmt.Fprintf(out, "=== %s %s failed:\n", shortPkg(e.Package), e.Test)
				for _, o := range outputs[k] {
					fmt.Fprint(out, o)
				}
			}
			delete(outputs, k)
		}
	}
	if len(skips) > 0 {
		sort.Strings(skips)
		fmt.Fprintf(out, "\nSkipped tests (%d):\n", len(skips))
		for _, s := range skips {
			fmt.Fprintf(out, "  %s\n", s)
		}
	}
	fmt.Fprintf(out, "\n%d passed, %d failed, %d skipped\n", passed, failed, skipped)
	if failed > 0 || failedPkg {
		return 1
	}
	return 0
}

// skipReason is the message the test gave to t.Skip, from its output.
func skipReason(lines []string) string {
	for i := len(lines) - 1; i >= 0; i-- {
		l := strings.TrimSpace(lines[i])
		if l == "" || strings.HasPrefix(l, "--- SKIP") || strings.HasPrefix(l, "=== ") {
			continue
		}
		// "file_test.go:12: skipping: …"
		if _, rest, ok := strings.Cut(l, ": "); ok && strings.Contains(l[:strings.Index(l, ": ")], ".go:") {
			return rest
		}
		return l
	}
	return "(no reason given)"
}

func shortPkg(p string) string {
	const mod = "github.com/hermes-sandbox/hermes-sandbox/"
	return strings.TrimPrefix(p, mod)
}
