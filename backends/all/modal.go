//go:build !no_modal

package all

import "github.com/hermes-sandbox/hermes-sandbox/backends/modal"

func newModal(c cfg, o opts) (backend, error) { return modal.New(c.Modal, o) }
