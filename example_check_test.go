package lambdasaga_test

import (
	"fmt"

	"github.com/lambdasaga/lambdasaga"
)

// A test can keep a definition's compensations complete: every action
// undone by a compensation, or marked compensate: none on purpose.
func ExampleDefinition_CheckCompensation() {
	def, err := lambdasaga.ParseDefinition("order.yaml", []byte(`
saga: order
steps:
  - id: quote
    action: prices.quote
    compensate: none   # a read: nothing to undo
  - id: charge
    action: payments.charge
    compensate: {action: payments.refund}
  - id: ship
    action: shipping.create
`))
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(def.CheckCompensation())
	// Output:
	// order.yaml:11:5: step ship: compensate: action shipping.create has no compensate: if a later step fails, or the saga is cancelled or runs past its timeout, what it did stays done; give compensate: {action: ...} to undo it, or compensate: none when it changes nothing that needs undoing (missing-compensation)
}
