//go:build !no_ssh

package all

import "github.com/hermes-sandbox/hermes-sandbox/backends/ssh"

func newSSH(c cfg, o opts) (backend, error) { return ssh.New(c.SSH, o) }
