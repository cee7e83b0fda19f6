package cli

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strings"

	"github.com/spf13/cobra"

	"github.com/hermes-sandbox/hermes-sandbox/config"
	"github.com/hermes-sandbox/hermes-sandbox/sandbox"
)

// Newcomers' spellings: Hermes Agent's commands and flags, typos of backend names, a --config
// that names no file. The pointers themselves live in config (one table for every entry point).

// hermesCommands are Hermes Agent commands with no counterpart here: each answers with its
// pointer (config.HermesPointer) and exit 2 instead of cobra's bare "unknown command".
var hermesCommands = []string{"chat", "approvals", "model", "gateway"}

func (a *app) hermesPointerCmds() []*cobra.Command {
	var cmds []*cobra.Command
	for _, name := range hermesCommands {
		cmds = append(cmds, &cobra.Command{
			Use:                name,
			Hidden:             true,
			DisableFlagParsing: true,
			RunE: func(cmd *cobra.Command, args []string) error {
				return usagef("%s", config.HermesPointer(name))
			},
		})
	}
	return cmds
}

// preRun refuses Hermes's --yolo with its pointer and an explicit --config that names no file
// (except for the commands that create it).
func (a *app) preRun(cmd *cobra.Command, yolo bool) error {
	if yolo {
		return usagef("%s", config.HermesPointer("--yolo"))
	}
	if a.configFlag == "" {
		return nil
	}
	switch cmd.CommandPath() {
	case "hermes-sandbox config set", "hermes-sandbox config import-hermes", "hermes-sandbox config path",
		"hermes-sandbox setup":
		return nil
	}
	path := a.configPath()
	if _, err := os.Stat(path); errors.Is(err, fs.ErrNotExist) {
		return usagef("--config %s: no such file (create it with `hermes-sandbox --config %s config set KEY VALUE`, "+
			"or leave --config out to use %s)", path, path, config.DefaultPathFrom(a.environ))
	}
	return nil
}

// unknownBackend is the error for a backend name that is none, with the closest one.
func unknownBackend(prefix, name string) error {
	hint := ""
	if s := config.Suggest(name, sandbox.BuiltinNames); s != "" {
		hint = fmt.Sprintf(" (did you mean %s?)", s)
	}
	return usagef("%sunknown backend %q%s: valid backends are %s", prefix, name, hint, strings.Join(sandbox.BuiltinNames, ", "))
}
