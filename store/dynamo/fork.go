package dynamo

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/lambdasaga/lambdasaga/durable"
)

// The fork record's attributes: a number per lane counted (l0 to l99),
// the stopped lanes as a number set, the first failed child, and the
// lanes the fork's stop has cancelled as a bit set (ForkCancelled).
const (
	attrForkLanePrefix = "l"
	attrForkStopped    = "stop"
	attrForkFailed     = "fail"
	attrForkCancelled  = "cancelled"
)

// forkKey is the fork record's primary key. It has no index keys, so it
// is in neither index: no listing, sweep or due query ever reads it.
func forkKey(key string) map[string]types.AttributeValue {
	return map[string]types.AttributeValue{
		attrPK: &types.AttributeValueMemberS{Value: "FORK#" + key},
		attrSK: &types.AttributeValueMemberS{Value: "FORK"},
	}
}

func laneAttr(lane int) string {
	return attrForkLanePrefix + strconv.Itoa(lane)
}

func laneSet(lane int) *types.AttributeValueMemberNS {
	return &types.AttributeValueMemberNS{Value: []string{strconv.Itoa(lane)}}
}

// ForkCount implements durable.Store: one UpdateItem, with no read first,
// that sets the lane's attribute to Count+1 on condition that it holds
// Count (attribute_not_exists for 0), and for a failed child also sets
// fail with if_not_exists (the first one counted stays) and ADDs the lane
// to the stop set. DynamoDB applies the updates of one item one at a time,
// so counts of different lanes, whose conditions name different
// attributes, never conflict, and of counts of one lane from one Count
// exactly one passes its condition.
//
// It asks for the item as it was just before the update (ALL_OLD) and
// applies the update to it to return the record just after: the same
// atomic view as ALL_NEW, and one that the accounting middleware can bill
// (a write's bill needs the item before it; an ALL_NEW answer hides it).
// A return value costs no capacity (API Reference, UpdateItem,
// ReturnValues).
func (s *Store) ForkCount(ctx context.Context, p *durable.ForkCountParams) (*durable.ForkRecord, error) {
	if err := p.Check(); err != nil {
		return nil, err
	}
	names := map[string]string{"#l": laneAttr(p.Lane)}
	values := map[string]types.AttributeValue{":next": n(uint64(p.Count) + 1)}
	update, cond := "SET #l = :next", "attribute_not_exists(#l)"
	if p.Count > 0 {
		cond = "#l = :m"
		values[":m"] = n(uint64(p.Count))
	}
	if p.Failed {
		update += ", #f = if_not_exists(#f, :child) ADD #s :lane"
		names["#f"], names["#s"] = attrForkFailed, attrForkStopped
		values[":child"], values[":lane"] = n(uint64(p.Child)), laneSet(p.Lane)
	}
	out, err := s.client.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName: &s.table, Key: forkKey(p.Key),
		UpdateExpression:          aws.String(update),
		ConditionExpression:       aws.String(cond),
		ExpressionAttributeNames:  names,
		ExpressionAttributeValues: values,
		ReturnValues:              types.ReturnValueAllOld,
		ReturnConsumedCapacity:    types.ReturnConsumedCapacityTotal,
	})
	if err = interpretError(err); errors.Is(err, durable.ErrConflict) {
		return nil, fmt.Errorf("fork %s: lane %d does not hold count %d: %w", p.Key, p.Lane, p.Count, durable.ErrConflict)
	}
	if err != nil {
		return nil, wrap(err, "count in fork %s", p.Key)
	}
	r, err := decodeFork(p.Key, out.Attributes)
	if err != nil {
		return nil, err
	}
	if p.Lane >= len(r.Counts) {
		r.Counts = append(r.Counts, make([]int, p.Lane+1-len(r.Counts))...)
	}
	r.Counts[p.Lane] = p.Count + 1
	if p.Failed {
		if r.Failed < 0 {
			r.Failed = p.Child
		}
		r.Stopped = addLane(r.Stopped, p.Lane)
	}
	return r, nil
}

// ForkStop implements durable.Store: one UpdateItem that ADDs the lane to
// the stop set (ADD creates the item and the set if missing, and adding a
// member twice keeps one), with ALL_OLD as in ForkCount.
func (s *Store) ForkStop(ctx context.Context, p *durable.ForkStopParams) (*durable.ForkRecord, error) {
	if err := p.Check(); err != nil {
		return nil, err
	}
	out, err := s.client.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName: &s.table, Key: forkKey(p.Key),
		UpdateExpression:          aws.String("ADD #s :lane"),
		ExpressionAttributeNames:  map[string]string{"#s": attrForkStopped},
		ExpressionAttributeValues: map[string]types.AttributeValue{":lane": laneSet(p.Lane)},
		ReturnValues:              types.ReturnValueAllOld,
		ReturnConsumedCapacity:    types.ReturnConsumedCapacityTotal,
	})
	if err != nil {
		return nil, wrap(interpretError(err), "stop lane %d of fork %s", p.Lane, p.Key)
	}
	r, err := decodeFork(p.Key, out.Attributes)
	if err != nil {
		return nil, err
	}
	r.Stopped = addLane(r.Stopped, p.Lane)
	return r, nil
}

// ForkFail implements durable.Store: one UpdateItem that sets fail with
// if_not_exists (the first one stays), with ALL_OLD as in ForkCount.
func (s *Store) ForkFail(ctx context.Context, p *durable.ForkFailParams) (*durable.ForkRecord, error) {
	if err := p.Check(); err != nil {
		return nil, err
	}
	out, err := s.client.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName: &s.table, Key: forkKey(p.Key),
		UpdateExpression:          aws.String("SET #f = if_not_exists(#f, :child)"),
		ExpressionAttributeNames:  map[string]string{"#f": attrForkFailed},
		ExpressionAttributeValues: map[string]types.AttributeValue{":child": n(uint64(p.Child))},
		ReturnValues:              types.ReturnValueAllOld,
		ReturnConsumedCapacity:    types.ReturnConsumedCapacityTotal,
	})
	if err != nil {
		return nil, wrap(interpretError(err), "fail fork %s", p.Key)
	}
	r, err := decodeFork(p.Key, out.Attributes)
	if err != nil {
		return nil, err
	}
	if r.Failed < 0 {
		r.Failed = p.Child
	}
	return r, nil
}

// ForkCancelled implements durable.Store. The cancelled lanes are a bit
// set, a binary attribute with lane j as bit j%8 of byte j/8: 13 bytes
// for 100 lanes, where a number set takes up to 200 and would carry the
// largest record past 1 KB, and every count of it to 2 write units.
// DynamoDB updates no bits: a consistent read of the set, then a SET
// conditional on the set read (or on its absence), again on a conflict.
// A stop that failed on some lane records the lanes it did so; one that
// did them all records Every lane, one write with no read.
func (s *Store) ForkCancelled(ctx context.Context, p *durable.ForkCancelledParams) error {
	if err := p.Check(); err != nil {
		return err
	}
	names := map[string]string{"#c": attrForkCancelled}
	if p.Every > 0 {
		// Every lane: the whole set, whatever it held, with no read.
		bits := make([]byte, (p.Every+7)/8)
		for j := range p.Every {
			bits[j/8] |= 1 << (j % 8)
		}
		_, err := s.client.UpdateItem(ctx, &dynamodb.UpdateItemInput{
			TableName: &s.table, Key: forkKey(p.Key),
			UpdateExpression:          aws.String("SET #c = :bits"),
			ExpressionAttributeNames:  names,
			ExpressionAttributeValues: map[string]types.AttributeValue{":bits": &types.AttributeValueMemberB{Value: bits}},
			ReturnConsumedCapacity:    types.ReturnConsumedCapacityTotal,
		})
		return wrap(interpretError(err), "record every lane of fork %s cancelled", p.Key)
	}
	for range maxCancelledTries {
		out, err := s.client.GetItem(ctx, &dynamodb.GetItemInput{
			// No projection: a read bills the whole item anyway, and the
			// accounting middleware can bill only a whole item it sees.
			TableName: &s.table, Key: forkKey(p.Key), ConsistentRead: aws.Bool(true),
			ReturnConsumedCapacity: types.ReturnConsumedCapacityTotal,
		})
		if err != nil {
			return wrap(interpretError(err), "read cancelled lanes of fork %s", p.Key)
		}
		var old []byte
		if v, ok := out.Item[attrForkCancelled].(*types.AttributeValueMemberB); ok {
			old = v.Value
		}
		bits := slices.Clone(old)
		for _, j := range p.Lanes {
			for len(bits) <= j/8 {
				bits = append(bits, 0)
			}
			bits[j/8] |= 1 << (j % 8)
		}
		if bytes.Equal(bits, old) {
			return nil
		}
		values := map[string]types.AttributeValue{":bits": &types.AttributeValueMemberB{Value: bits}}
		cond := "attribute_not_exists(#c)"
		if old != nil {
			cond, values[":old"] = "#c = :old", &types.AttributeValueMemberB{Value: old}
		}
		_, err = s.client.UpdateItem(ctx, &dynamodb.UpdateItemInput{
			TableName: &s.table, Key: forkKey(p.Key),
			UpdateExpression:          aws.String("SET #c = :bits"),
			ConditionExpression:       aws.String(cond),
			ExpressionAttributeNames:  names,
			ExpressionAttributeValues: values,
			ReturnConsumedCapacity:    types.ReturnConsumedCapacityTotal,
		})
		if err = interpretError(err); !errors.Is(err, durable.ErrConflict) {
			return wrap(err, "record cancelled lanes of fork %s", p.Key)
		}
	}
	return fmt.Errorf("record cancelled lanes of fork %s: changed by others %d times: %w", p.Key, maxCancelledTries, durable.ErrConflict)
}

// maxCancelledTries bounds ForkCancelled's read and conditional write:
// only the deliveries of one fork's stop write the set at once.
const maxCancelledTries = 8

// ForkGet implements durable.Store: a consistent GetItem.
func (s *Store) ForkGet(ctx context.Context, p *durable.ForkGetParams) (*durable.ForkRecord, error) {
	if err := p.Check(); err != nil {
		return nil, err
	}
	out, err := s.client.GetItem(ctx, &dynamodb.GetItemInput{
		TableName: &s.table, Key: forkKey(p.Key), ConsistentRead: aws.Bool(true),
		ReturnConsumedCapacity: types.ReturnConsumedCapacityTotal,
	})
	if err != nil {
		return nil, wrap(interpretError(err), "get fork %s", p.Key)
	}
	if out.Item == nil {
		return nil, fmt.Errorf("fork %s: %w", p.Key, durable.ErrNotFound)
	}
	return decodeFork(p.Key, out.Item)
}

// decodeFork reads a fork record; an empty item (none before a write) is
// a record with nothing counted.
func decodeFork(key string, it map[string]types.AttributeValue) (*durable.ForkRecord, error) {
	r := &durable.ForkRecord{Key: key, Failed: -1}
	bad := func(name string) error { return fmt.Errorf("fork %s: bad attribute %s", key, name) }
	for name, v := range it {
		switch {
		case name == attrForkFailed:
			num, ok := v.(*types.AttributeValueMemberN)
			f, err := strconv.Atoi(numText(num, ok))
			if err != nil || f < 0 {
				return nil, bad(name)
			}
			r.Failed = f
		case name == attrForkStopped:
			set, ok := v.(*types.AttributeValueMemberNS)
			if !ok {
				return nil, bad(name)
			}
			for _, e := range set.Value {
				lane, err := strconv.Atoi(e)
				if err != nil || lane < 0 || lane >= durable.MaxForkLanes {
					return nil, bad(name)
				}
				r.Stopped = addLane(r.Stopped, lane)
			}
		case name == attrForkCancelled:
			bits, ok := v.(*types.AttributeValueMemberB)
			if !ok || len(bits.Value) > (durable.MaxForkLanes+7)/8 {
				return nil, bad(name)
			}
			for j := range len(bits.Value) * 8 {
				if bits.Value[j/8]&(1<<(j%8)) == 0 {
					continue
				}
				if j >= durable.MaxForkLanes {
					return nil, bad(name)
				}
				r.Cancelled = append(r.Cancelled, j)
			}
		case strings.HasPrefix(name, attrForkLanePrefix):
			lane, err := strconv.Atoi(name[len(attrForkLanePrefix):])
			if err != nil || lane < 0 || lane >= durable.MaxForkLanes {
				return nil, bad(name)
			}
			num, ok := v.(*types.AttributeValueMemberN)
			c, err := strconv.Atoi(numText(num, ok))
			if err != nil || c < 0 {
				return nil, bad(name)
			}
			if lane >= len(r.Counts) {
				r.Counts = append(r.Counts, make([]int, lane+1-len(r.Counts))...)
			}
			r.Counts[lane] = c
		}
	}
	return r, nil
}

func numText(v *types.AttributeValueMemberN, ok bool) string {
	if !ok {
		return ""
	}
	return v.Value
}

// addLane adds lane to an ascending list of lanes, once.
func addLane(lanes []int, lane int) []int {
	if i, ok := slices.BinarySearch(lanes, lane); !ok {
		return slices.Insert(lanes, i, lane)
	}
	return lanes
}
