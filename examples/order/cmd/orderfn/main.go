// Command orderfn is the order example's Lambda function: the stock
// handler with the order saga's Go actions registered. Deploy it as both
// the advance and the compensate function (compensations are Go actions
// too). The fake services live in the function's memory, so they are for
// demonstration and the local loop only.
package main

import (
	"github.com/lambdasaga/lambdasaga"
	"github.com/lambdasaga/lambdasaga/examples/order"
)

func main() {
	actions := lambdasaga.NewActions()
	order.NewServices().Register(actions)
	lambdasaga.StartLambda(actions)
}
