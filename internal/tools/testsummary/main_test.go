package main

import (
	"bytes"
	"strings"
	"testing"
)

func TestSummary(t *testing.T) {
	in := strings.Join([]string{
		`{"Action":"run","Package":"example/a","Test":"TestOK"}`,
		`{"Action":"output","Package":"example/a","Test":"TestOK","Output":"=== RUN   TestOK\n"}`,
		`{"Action":"pass","Package":"example/a","Test":"TestOK","Elapsed":0.01}`,
		`{"Action":"run","Package":"example/a","Test":"TestNeedsDocker"}`,
		`{"Action":"output","Package":"example/a","Test":"TestNeedsDocker","Output":"    a_test.go:9: skipping: docker unavailable: no engine\n"}`,
		`{"Action":"output","Package":"example/a","Test":"TestNeedsDocker","Output":"--- SKIP: TestNeedsDocker (0.00s)\n"}`,
		`{"Action":"skip","Package":"example/a","Test":"TestNeedsDocker","Elapsed":0}`,
		`{"Action":"pass","Package":"example/a","Elapsed":0.5}`,
		`{"Action":"run","Package":"example/b","Test":"TestBroken"}`,
		`{"Action":"output","Package":"example/b","Test":"TestBroken","Output":"    b_test.go:3: want 1, got 2\n"}`,
		`{"Action":"fail","Package":"example/b","Test":"TestBroken","Elapsed":0}`,
		`{"Action":"fail","Package":"example/b","Elapsed":0.2}`,
		`# example/c`,
	}, "\n")
	var out bytes.Buffer
	code := run(strings.NewReader(in), &out)
	got := out.String()
	if code != 1 {
		t.Errorf("exit = %d; want 1 with a failing test", code)
	}
	for _, want := range []string{
		"ok  \texample/a", "want 1, got 2", "FAIL\texample/b", "# example/c",
		"Skipped tests (1):", "example/a TestNeedsDocker: skipping: docker unavailable: no engine",
		"\n1 passed, 1 failed, 1 skipped\n",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("output lacks %q:\n%s", want, got)
		}
	}
	if strings.Contains(got, "=== RUN   TestOK") {
		t.Errorf("output of a passing test was printed:\n%s", got)
	}
	out.Reset()
	if code := run(strings.NewReader(`{"Action":"pass","Package":"example/a","Test":"TestOK"}`), &out); code != 0 {
		t.Errorf("exit = %d for an all-pass run", code)
	}
}
