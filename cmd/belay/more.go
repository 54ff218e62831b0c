package main

import "github.com/spf13/cobra"

// addMore adds the operations commands (runs, trace, approvals, kill) and
// the servers (serve, sim).
func addMore(root *cobra.Command) {
	root.AddCommand(opsCommands()...)
	root.AddCommand(serverCommands()...)
}
