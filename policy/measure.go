package policy

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"strings"
)

// Entry is one labelled command of a corpus.
type Entry struct {
	Label   Verdict `json:"label"`
	Command string  `json:"command"`
	Note    string  `json:"note,omitempty"`
}

// Miss is an entry the classifier got wrong.
type Miss struct {
	Entry Entry   `json:"entry"`
	Got   Verdict `json:"got"`
}

// Metrics summarise a classifier's results on a corpus.
type Metrics struct {
	Total     int `json:"total"`
	Positives int `json:"positives"` // labelled dangerous or hardline
	Negatives int `json:"negatives"` // labelled safe
	Detected  int `json:"detected"`  // positives classified not safe
	Flagged   int `json:"flagged"`   // negatives classified not safe

	HardlineLabelled int `json:"hardline_labelled"`
	HardlineDetected int `json:"hardline_detected"` // hardline-labelled classified hardline
	HardlineOnBenign int `json:"hardline_on_benign"`

	Recall         float64 `json:"recall"`
	FPR            float64 `json:"false_positive_rate"`
	HardlineRecall float64 `json:"hardline_recall"`

	Misses []Miss `json:"misses"` // missed positives, flagged negatives, missed hardlines
}

func (m Metrics) String() string {
	return fmt.Sprintf("entries=%d recall=%.3f (%d/%d) fpr=%.3f (%d/%d) hardline-recall=%.3f (%d/%d) hardline-on-benign=%d",
		m.Total, m.Recall, m.Detected, m.Positives, m.FPR, m.Flagged, m.Negatives,
		m.HardlineRecall, m.HardlineDetected, m.HardlineLabelled, m.HardlineOnBenign)
}

// Measure classifies entries with the default classifier.
func Measure(entries []Entry) Metrics { return defaultClassifier.Measure(entries) }

// Measure classifies entries and compares the verdicts with their labels.
func (c *Classifier) Measure(entries []Entry) Metrics {
	m := Metrics{Misses: []Miss{}}
	for _, e := range entries {
		got := c.Classify(e.Command).Verdict
		m.Total++
		miss := false
		switch e.Label {
		case VerdictSafe:
			m.Negatives++
			if got != VerdictSafe {
				m.Flagged++
				miss = true
			}
			if got == VerdictHardline {
				m.HardlineOnBenign++
			}
		default:
			m.Positives++
			if got != VerdictSafe {
				m.Detected++
			} else {
				miss = true
			}
			if e.Label == VerdictHardline {
				m.HardlineLabelled++
				if got == VerdictHardline {
					m.HardlineDetected++
				} else {
					miss = true
				}
			}
		}
		if miss {
			m.Misses = append(m.Misses, Miss{Entry: e, Got: got})
		}
	}
	m.Recall = ratio(m.Detected, m.Positives, 1)
	m.FPR = ratio(m.Flagged, m.Negatives, 0)
	m.HardlineRecall = ratio(m.HardlineDetected, m.HardlineLabelled, 1)
	return m
}

func ratio(n, d int, empty float64) float64 {
	if d == 0 {
		return empty
	}
	return float64(n) / float64(d)
}

// ReadCorpus reads labelled commands. Each line is
// "label<TAB>command<TAB>note" (the note is optional); blank lines and
// lines starting with # are skipped. A command that starts with "json:" is
// a JSON string, for commands that hold newlines or tabs. Lines that start
// with "{" are decoded as a JSON Entry instead.
func ReadCorpus(r io.Reader) ([]Entry, error) {
	br := bufio.NewReader(r)
	var out []Entry
	for n := 1; ; n++ {
		line, err := br.ReadString('\n')
		if err != nil && err != io.EOF {
			return nil, fmt.Errorf("policy: read corpus: %w", err)
		}
		if e, ok, perr := parseCorpusLine(strings.TrimRight(line, "\r\n")); perr != nil {
			return nil, fmt.Errorf("policy: corpus line %d: %w", n, perr)
		} else if ok {
			out = append(out, e)
		}
		if err == io.EOF {
			return out, nil
		}
	}
}

func parseCorpusLine(line string) (Entry, bool, error) {
	if strings.TrimSpace(line) == "" || strings.HasPrefix(line, "#") {
		return Entry{}, false, nil
	}
	if strings.HasPrefix(line, "{") {
		var e Entry
		if err := json.Unmarshal([]byte(line), &e); err != nil {
			return Entry{}, false, err
		}
		return e, true, nil
	}
	label, rest, ok := strings.Cut(line, "\t")
	if !ok {
		return Entry{}, false, fmt.Errorf("want label<TAB>command<TAB>note")
	}
	v, err := ParseVerdict(label)
	if err != nil {
		return Entry{}, false, err
	}
	cmd, note := rest, ""
	if strings.HasPrefix(rest, "json:") {
		dec := json.NewDecoder(strings.NewReader(rest[len("json:"):]))
		if err := dec.Decode(&cmd); err != nil {
			return Entry{}, false, fmt.Errorf("json command: %w", err)
		}
		note = strings.TrimSpace(rest[len("json:")+int(dec.InputOffset()):])
	} else if i := strings.LastIndexByte(rest, '\t'); i >= 0 {
		cmd, note = rest[:i], rest[i+1:]
	}
	return Entry{Label: v, Command: cmd, Note: note}, true, nil
}
