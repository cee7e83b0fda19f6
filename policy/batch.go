package policy

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"strings"
)

// CheckLines classifies each line of r as one command and writes one JSON
// object per input line to w:
//
//	{"command": "...", "verdict": "safe", "findings": []}
//
// Lines may be of any length. An empty line is a safe command with no
// findings. A nil c means the default classifier.
func CheckLines(r io.Reader, w io.Writer, c *Classifier) error {
	if c == nil {
		c = defaultClassifier
	}
	br := bufio.NewReaderSize(r, 64<<10)
	bw := bufio.NewWriter(w)
	enc := json.NewEncoder(bw)
	enc.SetEscapeHTML(false)
	for {
		line, err := br.ReadString('\n')
		if err != nil && err != io.EOF {
			return fmt.Errorf("policy: check lines: read: %w", err)
		}
		if err == io.EOF && line == "" {
			break
		}
		line = strings.TrimSuffix(line, "\n")
		line = strings.TrimSuffix(line, "\r")
		if encErr := enc.Encode(c.Classify(line)); encErr != nil {
			return fmt.Errorf("policy: check lines: write: %w", encErr)
		}
		// Stream results while the reader has nothing more buffered, so an
		// interactive caller sees each verdict at once.
		if br.Buffered() == 0 {
			if ferr := bw.Flush(); ferr != nil {
				return fmt.Errorf("policy: check lines: write: %w", ferr)
			}
		}
		if err == io.EOF {
			break
		}
	}
	if err := bw.Flush(); err != nil {
		return fmt.Errorf("policy: check lines: write: %w", err)
	}
	return nil
}
