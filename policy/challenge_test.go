package policy

import "testing"

// TestChallenge measures the classifier on a challenge set written apart from the corpus
// (testdata/challenge.tsv), with the same aims as TestCorpus, and logs every miss.
func TestChallenge(t *testing.T) { checkSet(t, "testdata/challenge.tsv", 200) }
