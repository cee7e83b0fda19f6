//go:build !linux

package owner

import "os"

// procContext cannot describe a process here (no /proc): NewHello fails, so an exec never
// looks for an owner.
func procContext(pid string) (string, bool, error) { return "", false, errUnsupported }

func exeIdentity(pid string) (string, error) { return "", errUnsupported }

func cwdIdentity(pid, path string) (string, error) { return "", errUnsupported }

// VerifyPeer accepts no caller here (see Supported).
func VerifyPeer(pid int, h Hello) error { return errUnsupported }

// peerIsOwner trusts no process here (see Supported).
func peerIsOwner(conn *os.File) bool { return false }
