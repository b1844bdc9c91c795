// Command ordersaga is sagactl with the order example's Go actions
// registered, so "run" uses the fake inventory, payment and shipping
// services instead of simulating them.
package main

import (
	"os"

	"github.com/lambdasaga/lambdasaga/cli"
	"github.com/lambdasaga/lambdasaga/engine"
	"github.com/lambdasaga/lambdasaga/examples/order"
)

func main() {
	reg := engine.NewRegistry()
	order.NewServices().Register(reg)
	os.Exit(cli.Main(os.Args[1:], cli.Config{Actions: reg, Name: "ordersaga"}))
}
