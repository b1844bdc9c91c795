package ddbmeter_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/lambdasaga/lambdasaga/durable"
)

// TestLimitRequestsAsBilled pins what each request of an action's limit
// bills, as the meter computes it from the items (the emulator leaves
// failed conditions out of ConsumedCapacity): every write 1 unit, a
// failed condition too (Developer Guide, "Condition expressions"), on no
// index (the items have no index keys); the engine's read of the limits
// half a unit (eventually consistent, under 4 KB). docs/COST.md, "Limits".
func TestLimitRequestsAsBilled(t *testing.T) {
	t.Parallel()
	meter, st := meteredStore(t, "lim-")
	ctx := context.Background()
	now := time.Now()
	for _, l := range []durable.Limit{{Action: "payments.charge", Rate: 50, Concurrency: 5}, {Action: "lambda:arn:aws:lambda:us-east-1:123456789012:function:ship", Rate: 10}} {
		if err := st.LimitPut(ctx, &durable.LimitPutParams{Limit: l}); err != nil {
			t.Fatal(err)
		}
	}
	take := &durable.LimitTakeParams{Action: "payments.charge", Window: now.UnixNano() / int64(100*time.Millisecond), Max: 1, Expires: now.Add(time.Second)}
	lease := func(holder string) *durable.LimitLeaseParams {
		return &durable.LimitLeaseParams{Action: "payments.charge", Slot: 3, Holder: holder, Now: now, Until: now.Add(time.Minute)}
	}
	for _, c := range []struct {
		name      string
		op        string
		do        func() error
		want      error
		reads     float64
		writes    float64
		indexWrts float64
	}{
		{"the engine reads the limits", "DynamoDB.GetItem", func() error { _, err := st.LimitList(ctx, &durable.LimitListParams{}); return err }, nil, 0.5, 0, 0},
		{"a call counted in its window", "DynamoDB.UpdateItem", func() error { return st.LimitTake(ctx, take) }, nil, 0, 1, 0},
		{"a call over its window", "DynamoDB.UpdateItem", func() error { return st.LimitTake(ctx, take) }, durable.ErrLimited, 0, 1, 0},
		{"a slot leased", "DynamoDB.PutItem", func() error { return st.LimitLease(ctx, lease("pay/a/1#1")) }, nil, 0, 1, 0},
		{"a slot held by another", "DynamoDB.PutItem", func() error { return st.LimitLease(ctx, lease("pay/b/1#1")) }, durable.ErrLimited, 0, 1, 0},
		{"a slot released", "DynamoDB.DeleteItem", func() error {
			return st.LimitRelease(ctx, &durable.LimitReleaseParams{Action: "payments.charge", Slot: 3, Holder: "pay/a/1#1"})
		}, nil, 0, 1, 0},
	} {
		meter.Reset()
		if err := c.do(); !errors.Is(err, c.want) && (err != nil || c.want != nil) {
			t.Fatalf("%s: %v, want %v", c.name, err, c.want)
		}
		s := meter.Snapshot()[c.op]
		if s.Calls != 1 || s.Unbilled != 0 || s.BilledReadUnits != c.reads || s.BilledWriteUnits != c.writes || s.BilledIndexWriteUnits != c.indexWrts {
			t.Errorf("%s: %+v; want %v read and %v write units, %v on indexes", c.name, s, c.reads, c.writes, c.indexWrts)
		}
	}
}
