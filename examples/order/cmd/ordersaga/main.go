// Command ordersaga is sagactl with the order example's Go actions
// registered, so "run" uses the fake inventory, payment and shipping
// services instead of simulating them.
package main

import (
	"os"

	"github.com/lambdasaga/lambdasaga"
	"github.com/lambdasaga/lambdasaga/examples/order"
	"github.com/lambdasaga/lambdasaga/sagactl"
)

func main() {
	actions := lambdasaga.NewActions()
	order.NewServices().Register(actions)
	os.Exit(sagactl.Main(os.Args[1:], sagactl.Config{Actions: actions, Name: "ordersaga"}))
}
