package bench_test

import (
	"fmt"
	"strings"
)

// linearSaga is n action steps, each compensable, writing out into vars.
func linearSaga(n int) string {
	var s strings.Builder
	s.WriteString("saga: linear\nsteps:\n")
	for i := range n {
		fmt.Fprintf(&s, "  - {id: s%d, action: work, out: r%d, compensate: {action: undo}}\n", i, i)
	}
	return s.String()
}
