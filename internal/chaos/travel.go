package chaos

import (
	"context"
	"fmt"
	"strings"

	"github.com/lambdasaga/lambdasaga/examples/travel"
	"github.com/lambdasaga/lambdasaga/internal/engine"
	"github.com/lambdasaga/lambdasaga/internal/saga"
)

// NoCarSuffix ends the trip id of a trip whose car cannot be booked: the
// travel functions' cars.book refuses it for good (SoldOut).
const NoCarSuffix = "-nocar"

// NoTicketName is the traveller whose ticket cannot be issued, for good.
const NoTicketName = "noticket"

// RegisterTravel adds the travel example's actions (examples/travel) to
// reg, each recording its effect in the ledger before it returns, so that
// a test can see every effect of a saga whose calls run in many processes,
// and their order. The example's fake services give the outputs; the
// ledger says what happened. A do is recorded as "do" (and marked
// returned), a compensation as "undo"; the note names the action and
// what it acted on ("hotels.book t-1", "tickets.issue t-1 2 cy").
func (l *Ledger) RegisterTravel(reg *engine.Registry) {
	svc := travel.NewServices()
	svc.NoTicket[NoTicketName] = true
	inner := engine.NewRegistry()
	svc.Register(inner)
	for _, name := range inner.Names() {
		reg.MustRegister(name, func(ctx context.Context, c saga.Call) (any, error) {
			in, _ := c.Input.(map[string]any)
			if name == "cars.book" && strings.HasSuffix(fmt.Sprint(in["trip_id"]), NoCarSuffix) {
				return nil, saga.Permanent(saga.NewError("SoldOut", "cars: sold out"))
			}
			out, err := inner.Invoke(ctx, c)
			if err != nil {
				return nil, err
			}
			phase := "do"
			if c.Compensation {
				phase = "undo"
			}
			if err := l.apply(ctx, c, phase, travelNote(name, in)); err != nil {
				return nil, err
			}
			if c.Compensation {
				return out, nil
			}
			return out, l.returned(ctx, c)
		})
	}
}

// travelNote names a travel action and what it acts on.
func travelNote(action string, in map[string]any) string {
	parts := []string{action}
	for _, k := range []string{"trip_id", "order_id", "seat", "name"} {
		if v, ok := in[k]; ok {
			parts = append(parts, fmt.Sprint(v))
		}
	}
	return strings.Join(parts, " ")
}
