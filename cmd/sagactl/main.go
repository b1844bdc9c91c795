// Command sagactl validates, runs, draws and plans saga definitions.
// Actions it runs are simulated (output = input); build your own main
// around cli.Main with your registry to run your Go actions for real.
package main

import (
	"os"

	"github.com/lambdasaga/lambdasaga/cli"
)

func main() { os.Exit(cli.Main(os.Args[1:], cli.Config{})) }
