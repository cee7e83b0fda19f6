package mountinfo

import "testing"

func TestUnescape(t *testing.T) {
	for in, want := range map[string]string{
		"/plain":            "/plain",
		`/with\040space`:    "/with space",
		`/back\134slash`:    `/back\slash`,
		`/tab\011and\012nl`: "/tab\tand\nnl",
		`/not\08octal`:      `/not\08octal`, // 8 is no octal digit: kept
		`/short\04`:         `/short\04`,    // fewer than three digits: kept
		`/big\777`:          `/big\777`,     // over a byte: kept
		`\040`:              " ",
	} {
		if got := Unescape(in); got != want {
			t.Errorf("Unescape(%q) = %q; want %q", in, got, want)
		}
	}
}
