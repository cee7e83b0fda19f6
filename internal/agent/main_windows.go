package agent

import (
	"fmt"
	"io"
)

// Main refuses: the helper runs inside Linux sandboxes (and beside macOS local sessions),
// never on Windows, whose CLI only talks to helpers elsewhere.
func Main(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	fmt.Fprintln(stderr, "sandbox-agent: the helper does not run on Windows; it runs inside the Linux sandboxes a Windows CLI starts (docker, ssh, kubernetes…)")
	return 2
}
