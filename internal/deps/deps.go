// Package deps pins the module's dependencies until the packages that use them exist.
package deps

import (
	_ "github.com/creack/pty"
	_ "github.com/docker/docker/api/types/container"
	_ "github.com/docker/docker/client"
	_ "github.com/docker/docker/pkg/stdcopy"
	_ "github.com/docker/docker/pkg/jsonmessage"
	_ "github.com/modelcontextprotocol/go-sdk/mcp"
	_ "github.com/pkg/sftp"
	_ "github.com/spf13/cobra"
	_ "go.yaml.in/yaml/v3"
	_ "golang.org/x/crypto/ssh"
	_ "golang.org/x/crypto/ssh/agent"
	_ "golang.org/x/crypto/ssh/knownhosts"
	_ "golang.org/x/sys/unix"
	_ "golang.org/x/term"
	_ "mvdan.cc/sh/v3/syntax"
	_ "mvdan.cc/sh/v3/expand"
)
