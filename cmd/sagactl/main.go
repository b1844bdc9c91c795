// Command sagactl validates, runs, draws and plans saga definitions.
// Actions it runs are simulated (output = input); build your own main
// around sagactl.Main with your registry to run your Go actions for real.
package main

import (
	"os"

	"github.com/lambdasaga/lambdasaga/sagactl"
)

func main() { os.Exit(sagactl.Main(os.Args[1:], sagactl.Config{})) }
