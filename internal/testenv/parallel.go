package testenv

import (
	"flag"
	"os"
	"strconv"
	"testing"
)

// WideParallel raises go test's -parallel to at least n, in the fast tier only, for a
// package whose parallel tests mostly wait (a timeout to pass, a caller to go, a job's
// deadline) rather than compute: with the default, GOMAXPROCS, a 2-core machine runs two such
// checks at once and idles. An explicit -parallel wins, and the full tier (FullEnv), which
// runs every package under -race at once, keeps the default. A TestMain calls it before m.Run.
func WideParallel(n int) {
	if os.Getenv(FullEnv) != "" {
		return
	}
	if !flag.Parsed() {
		flag.Parse()
	}
	explicit := false
	flag.Visit(func(f *flag.Flag) { explicit = explicit || f.Name == "test.parallel" })
	f := flag.Lookup("test.parallel")
	if f == nil || explicit {
		return
	}
	if cur, err := strconv.Atoi(f.Value.String()); err == nil && cur < n {
		flag.Set("test.parallel", strconv.Itoa(n))
	}
}

// ParallelInFastTier marks t parallel (t.Parallel) in the fast tier only: for a top-level test
// whose work is independent of the package's other tests but which the full tier (FullEnv,
// every package under -race at once, which CI runs) keeps serial, because its checks were
// seen to starve one another there.
func ParallelInFastTier(t *testing.T) {
	if os.Getenv(FullEnv) == "" {
		t.Parallel()
	}
}
