// Package accounting counts AWS requests per service and operation, and
// the DynamoDB capacity they consumed, with SDK middleware. Tests assert
// the request economy with it and benchmarks report it.
package accounting

import (
	"context"
	"maps"
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
	// Scan calls that set ReturnConsumedCapacity, as the service reported
	// them; zero for the others.
	ReadUnits float64
	// WriteUnits sums the capacity units consumed by PutItem, UpdateItem
	// and DeleteItem calls that set ReturnConsumedCapacity, as the service
	// reported them (the emulators leave out index writes); zero for the
	// others.
	WriteUnits float64
	// BilledReadUnits sums the read units DynamoDB would bill, computed
	// from the items read (see Bill).
	BilledReadUnits float64
	// BilledWriteUnits sums the write units DynamoDB would bill, on the
	// table and its indexes, computed from the items before and after each
	// write.
	BilledWriteUnits float64
	// BilledIndexWriteUnits is the indexes' share of BilledWriteUnits.
	BilledIndexWriteUnits float64
	// BilledIndexes is that share by index name.
	BilledIndexes map[string]float64
	// Unbilled counts the calls whose bill could not be computed without
	// guessing (see Counter); they add nothing to the Billed fields.
	Unbilled int
}

// AddBill adds one call's bill to s.
func (s *Stat) AddBill(b Bill) {
	s.BilledReadUnits += b.ReadUnits
	idx := b.IndexUnits()
	s.BilledWriteUnits += b.WriteUnits + idx
	s.BilledIndexWriteUnits += idx
	for name, u := range b.IndexWriteUnits {
		if s.BilledIndexes == nil {
			s.BilledIndexes = map[string]float64{}
		}
		s.BilledIndexes[name] += u
	}
}

// Counter accumulates Stats by "Service.Operation" (e.g. "DynamoDB.PutItem").
// It is safe for concurrent use.
//
// Next to what DynamoDB reports, it computes what DynamoDB would bill
// (the Billed fields of Stat). A write's bill needs the item before and
// after it and the table's indexes: the counter learns a table's schema
// from the CreateTable and DescribeTable calls it sees (or from Table),
// and gets the item before a PutItem, UpdateItem or DeleteItem by setting
// ReturnValues and ReturnValuesOnConditionCheckFailure to ALL_OLD when the
// caller left them unset, then removing what they returned, so the caller
// sees the answer it asked for. A return value costs no capacity (API
// Reference, PutItem/UpdateItem/DeleteItem, ReturnValues: "There is no
// additional cost associated with requesting a return value ... No read
// capacity units are consumed."). The item after is the request's item
// (PutItem), none (DeleteItem) or the one before with the update
// expression applied (UpdateItem, see ApplyUpdate). A failed condition
// bills the item DynamoDB returns with it, or the minimum when it returns
// none (there was none; dynalite 4 returns none even when there is one, so
// on the emulator an item over 1 KB is billed short: the wire meter reads
// it).
//
// A call is counted as Unbilled instead when that cannot be done without
// guessing: the caller asked for other return values itself; a table
// whose schema the counter has not seen; an update expression ApplyUpdate
// does not support; a read of some attributes only (DynamoDB bills the whole item,
// which the answer does not hold), a filtered Query or Scan; and
// BatchWriteItem, TransactWriteItems and BatchGetItem, which take no
// ReturnValues. internal/ddbmeter measures those on the wire.
type Counter struct {
	mu     sync.Mutex
	stats  map[string]*Stat
	tables map[string]TableSchema
	skip   func(service, op string, params any) bool
}

// Skip makes the counter leave out the requests for which skip reports
// true (nil: count every request). Set it before the clients send.
func (c *Counter) Skip(skip func(service, op string, params any) bool) {
	c.mu.Lock()
	c.skip = skip
	c.mu.Unlock()
}

// EventualReads reports whether a request is an eventually consistent
// DynamoDB GetItem: a Skip for a measure of what each step reads (its
// saga, strongly consistent) without the per-process caches' reads (the
// pauses and the action limits, read at most every 5 s), which are
// measured on their own.
func EventualReads(service, op string, params any) bool {
	in, ok := params.(*dynamodb.GetItemInput)
	return ok && service == "DynamoDB" && (in.ConsistentRead == nil || !*in.ConsistentRead)
}

// New returns an empty counter.
func New() *Counter { return &Counter{stats: map[string]*Stat{}, tables: map[string]TableSchema{}} }

// Table tells the counter a table's schema, for a table whose CreateTable
// or DescribeTable it does not see.
func (c *Counter) Table(name string, s TableSchema) {
	c.mu.Lock()
	c.tables[name] = s
	c.mu.Unlock()
}

func (c *Counter) schema(table *string) (TableSchema, bool) {
	if table == nil {
		return TableSchema{}, false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	s, ok := c.tables[*table]
	return s, ok
}

// Register adds the counting middleware to an SDK client's stack: pass it
// in the client's APIOptions.
func (c *Counter) Register(stack *middleware.Stack) error {
	return stack.Initialize.Add(middleware.InitializeMiddlewareFunc("lambdasaga/accounting",
		func(ctx context.Context, in middleware.InitializeInput, next middleware.InitializeHandler) (middleware.InitializeOutput, middleware.Metadata, error) {
			service := awsmiddleware.GetServiceID(ctx)
			c.mu.Lock()
			skip := c.skip
			c.mu.Unlock()
			if skip != nil && skip(service, awsmiddleware.GetOperationName(ctx), in.Parameters) {
				return next.HandleInitialize(ctx, in)
			}
			if service != "DynamoDB" {
				out, md, err := next.HandleInitialize(ctx, in)
				c.record(service+"."+awsmiddleware.GetOperationName(ctx), out.Result, err, nil, false)
				return out, md, err
			}
			asked := in.Parameters
			var w *write
			in.Parameters, w = prepare(asked)
			out, md, err := next.HandleInitialize(ctx, in)
			bill, billed := c.bill(asked, w, out.Result, err)
			c.record(service+"."+awsmiddleware.GetOperationName(ctx), out.Result, err, bill, !billed)
			return out, md, err
		}), middleware.After)
}

func (c *Counter) record(op string, result any, err error, bill *Bill, unbilled bool) {
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
	if bill != nil {
		s.AddBill(*bill)
	}
	if unbilled {
		s.Unbilled++
	}
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
		cp := *s
		cp.BilledIndexes = maps.Clone(s.BilledIndexes)
		out[k] = cp
	}
	return out
}

// Reset forgets every count (not the tables' schemas).
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
