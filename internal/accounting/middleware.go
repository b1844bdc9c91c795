package accounting

import (
	"errors"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// write is what prepare did to a write's request.
type write struct {
	// setOld and setOnFailure: the middleware set ReturnValues and
	// ReturnValuesOnConditionCheckFailure to ALL_OLD, so it removes what
	// they return before the caller sees it.
	setOld, setOnFailure bool
	// blind: the caller asked for return values that do not give the
	// item before the write.
	blind bool
}

// oldValues decides ReturnValues for a write: ALL_OLD when the caller left
// it unset (or NONE), which the middleware then hides; the caller's own
// ALL_OLD is used as it is; anything else leaves the write blind.
func oldValues(rv *types.ReturnValue, rvf *types.ReturnValuesOnConditionCheckFailure) *write {
	w := &write{}
	switch *rv {
	case "", types.ReturnValueNone:
		*rv, w.setOld = types.ReturnValueAllOld, true
	case types.ReturnValueAllOld:
	default:
		w.blind = true
	}
	switch *rvf {
	case "", types.ReturnValuesOnConditionCheckFailureNone:
		*rvf, w.setOnFailure = types.ReturnValuesOnConditionCheckFailureAllOld, true
	}
	return w
}

// prepare returns the parameters to send: for a single-item write, a copy
// that asks for the item before it (the caller's input is left as it was).
func prepare(params any) (any, *write) {
	switch p := params.(type) {
	case *dynamodb.PutItemInput:
		cp := *p
		return &cp, oldValues(&cp.ReturnValues, &cp.ReturnValuesOnConditionCheckFailure)
	case *dynamodb.UpdateItemInput:
		cp := *p
		return &cp, oldValues(&cp.ReturnValues, &cp.ReturnValuesOnConditionCheckFailure)
	case *dynamodb.DeleteItemInput:
		cp := *p
		return &cp, oldValues(&cp.ReturnValues, &cp.ReturnValuesOnConditionCheckFailure)
	}
	return params, nil
}

// bill computes a DynamoDB call's bill from what it asked and answered,
// and removes from the answer what prepare asked for. billed is false when
// the call bills something that cannot be computed; a nil bill with billed
// true is a call that bills nothing (control calls, rejected requests).
func (c *Counter) bill(asked any, w *write, result any, err error) (bill *Bill, billed bool) {
	if w != nil {
		return c.billWrite(asked, w, result, err)
	}
	if err != nil {
		return nil, true
	}
	switch r := result.(type) {
	case *dynamodb.CreateTableOutput:
		if in, ok := asked.(*dynamodb.CreateTableInput); ok && in.TableName != nil {
			c.Table(*in.TableName, SchemaFromCreateTable(in))
		}
		return nil, true
	case *dynamodb.DescribeTableOutput:
		if r.Table != nil && r.Table.TableName != nil {
			c.Table(*r.Table.TableName, SchemaFromDescription(r.Table))
		}
		return nil, true
	case *dynamodb.GetItemOutput:
		in := asked.(*dynamodb.GetItemInput)
		if in.ProjectionExpression != nil || len(in.AttributesToGet) > 0 {
			return nil, false
		}
		return &Bill{ReadUnits: ReadUnits(ItemSize(r.Item), in.ConsistentRead != nil && *in.ConsistentRead)}, true
	case *dynamodb.QueryOutput:
		in := asked.(*dynamodb.QueryInput)
		if partial(in.Select, in.IndexName, in.ProjectionExpression, in.AttributesToGet) || r.Count != r.ScannedCount {
			return nil, false
		}
		return &Bill{ReadUnits: ReadUnits(itemsSize(r.Items), in.ConsistentRead != nil && *in.ConsistentRead)}, true
	case *dynamodb.ScanOutput:
		in := asked.(*dynamodb.ScanInput)
		if partial(in.Select, in.IndexName, in.ProjectionExpression, in.AttributesToGet) || r.Count != r.ScannedCount {
			return nil, false
		}
		return &Bill{ReadUnits: ReadUnits(itemsSize(r.Items), in.ConsistentRead != nil && *in.ConsistentRead)}, true
	case *dynamodb.BatchGetItemOutput, *dynamodb.BatchWriteItemOutput, *dynamodb.TransactWriteItemsOutput,
		*dynamodb.TransactGetItemsOutput, *dynamodb.ExecuteStatementOutput, *dynamodb.BatchExecuteStatementOutput,
		*dynamodb.ExecuteTransactionOutput:
		return nil, false
	}
	return nil, true
}

// partial reports whether a Query or Scan answers with less than the
// items (or index entries) it read, which is what it bills.
func partial(sel types.Select, index *string, projection *string, attrs []string) bool {
	switch sel {
	case types.SelectCount, types.SelectSpecificAttributes:
		return true
	case types.SelectAllAttributes:
		// on an index, fetches from the table what the index lacks
		if index != nil {
			return true
		}
	}
	return projection != nil || len(attrs) > 0
}

func itemsSize(items []map[string]types.AttributeValue) int {
	n := 0
	for _, it := range items {
		n += ItemSize(it)
	}
	return n
}

func (c *Counter) billWrite(asked any, w *write, result any, err error) (*Bill, bool) {
	var ccf *types.ConditionalCheckFailedException
	if err != nil && errors.As(err, &ccf) {
		existing := ccf.Item
		if w.setOnFailure {
			ccf.Item = nil
		}
		// The item is always asked for (the caller's ALL_OLD, or the
		// middleware's in place of NONE), and DynamoDB returns it when there
		// is one: none means none, and the write bills the minimum. (dynalite 4 never
		// returns it, so on the emulator an existing item bills 1 unit here
		// whatever its size; the wire meter reads it and bills it exactly.)
		b := FailedConditionBill(existing)
		return &b, true
	}
	if err != nil {
		return nil, true
	}
	var (
		table         *string
		before, after map[string]types.AttributeValue
		update        *dynamodb.UpdateItemInput
	)
	switch r := result.(type) {
	case *dynamodb.PutItemOutput:
		before = r.Attributes
		if w.setOld {
			r.Attributes = nil
		}
		in := asked.(*dynamodb.PutItemInput)
		table, after = in.TableName, in.Item
	case *dynamodb.UpdateItemOutput:
		before = r.Attributes
		if w.setOld {
			r.Attributes = nil
		}
		update = asked.(*dynamodb.UpdateItemInput)
		table = update.TableName
	case *dynamodb.DeleteItemOutput:
		before = r.Attributes
		if w.setOld {
			r.Attributes = nil
		}
		table = asked.(*dynamodb.DeleteItemInput).TableName
	default:
		return nil, false
	}
	schema, known := c.schema(table)
	if w.blind || !known {
		return nil, false
	}
	if len(before) == 0 {
		before = nil
	}
	if update != nil {
		if update.UpdateExpression == nil {
			return nil, false // the legacy AttributeUpdates
		}
		var aerr error
		after, aerr = ApplyUpdate(before, update.Key, *update.UpdateExpression, update.ExpressionAttributeNames, update.ExpressionAttributeValues)
		if aerr != nil {
			return nil, false
		}
	}
	b := schema.WriteBill(before, after)
	return &b, true
}
