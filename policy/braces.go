package policy

import (
	"strconv"
	"strings"
)

// expandBraces performs bash brace expansion on s, producing at most limit
// words. Malformed braces are left as they are.
func expandBraces(s string, limit int) []string {
	budget := 4 * limit
	return expandBracesN(s, limit, &budget)
}

func expandBracesN(s string, limit int, budget *int) []string {
	*budget--
	if *budget < 0 {
		return []string{s}
	}
	open := -1
	depth := 0
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case '{':
			if depth == 0 {
				open = i
			}
			depth++
		case '}':
			if depth == 0 {
				continue
			}
			depth--
			if depth != 0 {
				continue
			}
			body := s[open+1 : i]
			alts := splitTopCommas(body)
			if len(alts) < 2 {
				alts = braceSeq(body, limit)
			}
			if len(alts) < 2 {
				open = -1
				continue
			}
			pre := s[:open]
			tails := expandBracesN(s[i+1:], limit, budget)
			var out []string
			for _, alt := range alts {
				for _, x := range expandBracesN(alt, limit, budget) {
					for _, tail := range tails {
						if len(out) >= limit {
							return out
						}
						out = append(out, pre+x+tail)
					}
				}
			}
			return out
		}
	}
	return []string{s}
}

func splitTopCommas(s string) []string {
	var out []string
	depth, start := 0, 0
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case '{':
			depth++
		case '}':
			depth--
		case ',':
			if depth == 0 {
				out = append(out, s[start:i])
				start = i + 1
			}
		}
	}
	if out == nil {
		return nil
	}
	return append(out, s[start:])
}

func braceSeq(s string, limit int) []string {
	lo, hi, ok := strings.Cut(s, "..")
	if !ok {
		return nil
	}
	if i := strings.Index(hi, ".."); i >= 0 {
		hi = hi[:i]
	}
	if a, err1 := strconv.Atoi(lo); err1 == nil {
		b, err2 := strconv.Atoi(hi)
		if err2 != nil {
			return nil
		}
		var out []string
		step := 1
		if b < a {
			step = -1
		}
		for n := a; len(out) < limit; n += step {
			out = append(out, strconv.Itoa(n))
			if n == b {
				break
			}
		}
		return out
	}
	if len(lo) == 1 && len(hi) == 1 {
		var out []string
		step := 1
		if hi[0] < lo[0] {
			step = -1
		}
		for c := int(lo[0]); len(out) < limit; c += step {
			out = append(out, string(rune(c)))
			if c == int(hi[0]) {
				break
			}
		}
		return out
	}
	return nil
}
