//go:build embedhelpers

package agentbin

import "embed"

// The Linux helpers of a release build (make dist copies them here before building).
//
//go:embed helpers/sandbox-agent-linux-amd64 helpers/sandbox-agent-linux-arm64
var helpers embed.FS

func embeddedHelper(arch string) []byte {
	data, err := helpers.ReadFile(EmbedDir + "/sandbox-agent-linux-" + arch)
	if err != nil {
		return nil
	}
	return data
}
