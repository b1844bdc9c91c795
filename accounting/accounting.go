// Package accounting counts AWS requests per service and operation, and
// the DynamoDB capacity they consumed, with SDK middleware. Tests assert
// the request economy with it and benchmarks report it.
package accounting

import (
	"context"
	"sort"
	"sync"

	awsmiddleware "github.com/aws/aws-sdk-go-v2/aws/middleware"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/smithy-go/middleware"
)

// Stat is what one operation cost.
type Stat struct {
	// Calls counts the operation's calls; the SDK's retries within one
	// call do not add to it.
	Calls int
	// Errors counts the calls that returned an error.
	Errors int
	// ReadUnits sums the capacity units consumed by GetItem, Query and
	// Scan calls that set ReturnConsumedCapacity; zero for the others.
	ReadUnits float64
	// WriteUnits sums the capacity units consumed by PutItem, UpdateItem
	// and DeleteItem calls that set ReturnConsumedCapacity; zero for the
	// others.
	WriteUnits float64
}

// Counter accumulates Stats by "Service.Operation" (e.g. "DynamoDB.PutItem").
// It is safe for concurrent use.
type Counter struct {
	mu    sync.Mutex
	stats map[string]*Stat
}

// New returns an empty counter.
func New() *Counter { return &Counter{stats: map[string]*Stat{}} }

// Register adds the counting middleware to an SDK client's stack: pass it
// in the client's APIOptions.
func (c *Counter) Register(stack *middleware.Stack) error {
	return stack.Initialize.Add(middleware.InitializeMiddlewareFunc("lambdasaga/accounting",
		func(ctx context.Context, in middleware.InitializeInput, next middleware.InitializeHandler) (middleware.InitializeOutput, middleware.Metadata, error) {
			out, md, err := next.HandleInitialize(ctx, in)
			c.record(awsmiddleware.GetServiceID(ctx)+"."+awsmiddleware.GetOperationName(ctx), out.Result, err)
			return out, md, err
		}), middleware.After)
}

func (c *Counter) record(op string, result any, err error) {
	read, write := capacity(result)
	c.mu.Lock()
	defer c.mu.Unlock()
	s := c.stats[op]
	if s == nil {
		s = &Stat{}
		c.stats[op] = s
	}
	s.Calls++
	if err != nil {
		s.Errors++
	}
	s.ReadUnits += read
	s.WriteUnits += write
}

// capacity is the capacity a DynamoDB call consumed (with
// ReturnConsumedCapacity set): its total, as read units for reads and as
// write units for writes.
func capacity(result any) (read, write float64) {
	total := func(cc *types.ConsumedCapacity) float64 {
		if cc == nil || cc.CapacityUnits == nil {
			return 0
		}
		return *cc.CapacityUnits
	}
	switch r := result.(type) {
	case *dynamodb.GetItemOutput:
		return total(r.ConsumedCapacity), 0
	case *dynamodb.QueryOutput:
		return total(r.ConsumedCapacity), 0
	case *dynamodb.ScanOutput:
		return total(r.ConsumedCapacity), 0
	case *dynamodb.PutItemOutput:
		return 0, total(r.ConsumedCapacity)
	case *dynamodb.UpdateItemOutput:
		return 0, total(r.ConsumedCapacity)
	case *dynamodb.DeleteItemOutput:
		return 0, total(r.ConsumedCapacity)
	}
	return 0, 0
}

// Snapshot returns a copy of the counts so far.
func (c *Counter) Snapshot() map[string]Stat {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make(map[string]Stat, len(c.stats))
	for k, s := range c.stats {
		out[k] = *s
	}
	return out
}

// Reset forgets every count.
func (c *Counter) Reset() {
	c.mu.Lock()
	c.stats = map[string]*Stat{}
	c.mu.Unlock()
}

// Operations lists the operations seen, sorted.
func (c *Counter) Operations() []string {
	snap := c.Snapshot()
	ops := make([]string, 0, len(snap))
	for op := range snap {
		ops = append(ops, op)
	}
	sort.Strings(ops)
	return ops
}
