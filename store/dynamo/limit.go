package dynamo

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/lambdasaga/lambdasaga/durable"
)

// Action limits (durable.Limiter) on the table:
//
//	item          pk                              sk      attributes
//	limits        LIMITS                          CONFIG  a:<action> (M: r, b, c as N), one per limited action
//	rate window   LIMIT#<action>#W#<window>       W       n (N, calls counted), ttl (N)
//	lease         LIMIT#<action>#L#<slot>         L       h (S, the holder), u (N, lapses at, Unix ms), ttl (N)
//
// The engine reads the limits item at most every few seconds per process
// (GetItem, eventually consistent: half a read unit), so an action
// without a limit costs no request. A call under a rate limit is one
// UpdateItem (ADD n 1 if n < max) on its window's item, which is under
// 1 KB: 1 write unit, and 1 too when the condition fails (a failed
// condition bills the stored item's size, at least 1 unit: docs/COST.md).
// Each window is its own partition key, so a key takes the writes of one
// window only. A lease is a PutItem (1 unit) and its release a DeleteItem
// (1 unit), each conditional. The TTL deletes windows and leases, free.
var _ durable.Limiter = (*Store)(nil)

const (
	attrLimitPrefix = "a:"
	attrLimitCount  = "n"
	attrLeaseHolder = "h"
	attrLeaseUntil  = "u"
	// limitTTL is how long a window or a lease is kept past its end: no
	// one reads it then, and DynamoDB deletes it within days anyway.
	limitTTL = time.Hour
)

var limitsKey = map[string]types.AttributeValue{
	attrPK: &types.AttributeValueMemberS{Value: "LIMITS"},
	attrSK: &types.AttributeValueMemberS{Value: "CONFIG"},
}

func limitItemKey(pk, sk string) map[string]types.AttributeValue {
	return map[string]types.AttributeValue{
		attrPK: &types.AttributeValueMemberS{Value: pk},
		attrSK: &types.AttributeValueMemberS{Value: sk},
	}
}

func num(v int64) *types.AttributeValueMemberN {
	return &types.AttributeValueMemberN{Value: strconv.FormatInt(v, 10)}
}

// LimitPut implements durable.Limiter: one UpdateItem that sets the
// action's attribute on the limits item.
func (s *Store) LimitPut(ctx context.Context, p *durable.LimitPutParams) error {
	l := p.Limit
	_, err := s.client.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName: &s.table, Key: limitsKey,
		UpdateExpression:         aws.String("SET #a = :l"),
		ExpressionAttributeNames: map[string]string{"#a": attrLimitPrefix + l.Action},
		ExpressionAttributeValues: map[string]types.AttributeValue{":l": &types.AttributeValueMemberM{Value: map[string]types.AttributeValue{
			"r": num(int64(l.Rate)), "b": num(int64(l.Burst)), "c": num(int64(l.Concurrency)),
		}}},
		ReturnConsumedCapacity: types.ReturnConsumedCapacityTotal,
	})
	return wrap(interpretError(err), "set limit of %s", l.Action)
}

// LimitDelete implements durable.Limiter: one UpdateItem that removes
// the action's attribute if it is there.
func (s *Store) LimitDelete(ctx context.Context, p *durable.LimitDeleteParams) error {
	_, err := s.client.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName: &s.table, Key: limitsKey,
		UpdateExpression:         aws.String("REMOVE #a"),
		ConditionExpression:      aws.String("attribute_exists(#a)"),
		ExpressionAttributeNames: map[string]string{"#a": attrLimitPrefix + p.Action},
		ReturnConsumedCapacity:   types.ReturnConsumedCapacityTotal,
	})
	if err = interpretError(err); errors.Is(err, durable.ErrConflict) {
		return fmt.Errorf("limit of %s: %w", p.Action, durable.ErrNotFound)
	}
	return wrap(err, "unset limit of %s", p.Action)
}

// LimitList implements durable.Limiter: one GetItem of the limits item.
func (s *Store) LimitList(ctx context.Context, p *durable.LimitListParams) ([]durable.Limit, error) {
	out, err := s.client.GetItem(ctx, &dynamodb.GetItemInput{
		TableName: &s.table, Key: limitsKey, ConsistentRead: aws.Bool(p.Consistent),
		ReturnConsumedCapacity: types.ReturnConsumedCapacityTotal,
	})
	if err != nil {
		return nil, wrap(interpretError(err), "list limits")
	}
	ls := []durable.Limit{}
	for name, v := range out.Item {
		action, ok := strings.CutPrefix(name, attrLimitPrefix)
		m, isMap := v.(*types.AttributeValueMemberM)
		if !ok || !isMap {
			continue
		}
		l := durable.Limit{Action: action}
		for key, dst := range map[string]*int{"r": &l.Rate, "b": &l.Burst, "c": &l.Concurrency} {
			if nv, ok := m.Value[key].(*types.AttributeValueMemberN); ok {
				*dst, _ = strconv.Atoi(nv.Value)
			}
		}
		ls = append(ls, l)
	}
	slices.SortFunc(ls, func(a, b durable.Limit) int { return strings.Compare(a.Action, b.Action) })
	return ls, nil
}

// LimitTake implements durable.Limiter: one UpdateItem, ADD n 1 if n is
// under the window's max (absent: 0), with the TTL set.
func (s *Store) LimitTake(ctx context.Context, p *durable.LimitTakeParams) error {
	_, err := s.client.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName: &s.table, Key: limitItemKey("LIMIT#"+p.Action+"#W#"+strconv.FormatInt(p.Window, 10), "W"),
		UpdateExpression:         aws.String("ADD #n :one SET #t = :t"),
		ConditionExpression:      aws.String("attribute_not_exists(#n) OR #n < :max"),
		ExpressionAttributeNames: map[string]string{"#n": attrLimitCount, "#t": attrTTL},
		ExpressionAttributeValues: map[string]types.AttributeValue{
			":one": num(1), ":max": num(int64(p.Max)), ":t": num(p.Expires.Add(limitTTL).Unix()),
		},
		ReturnConsumedCapacity: types.ReturnConsumedCapacityTotal,
	})
	if err = interpretError(err); errors.Is(err, durable.ErrConflict) {
		return fmt.Errorf("action %s, window %d: %w", p.Action, p.Window, durable.ErrLimited)
	}
	return wrap(err, "count a call of %s", p.Action)
}

func leaseKey(action string, slot int) map[string]types.AttributeValue {
	return limitItemKey("LIMIT#"+action+"#L#"+strconv.Itoa(slot), "L")
}

// LimitLease implements durable.Limiter: one PutItem if the slot is
// free, lapsed or the holder's.
func (s *Store) LimitLease(ctx context.Context, p *durable.LimitLeaseParams) error {
	it := leaseKey(p.Action, p.Slot)
	it[attrLeaseHolder] = &types.AttributeValueMemberS{Value: p.Holder}
	it[attrLeaseUntil] = num(p.Until.UnixMilli())
	it[attrTTL] = num(p.Until.Add(limitTTL).Unix())
	_, err := s.client.PutItem(ctx, &dynamodb.PutItemInput{
		TableName: &s.table, Item: it,
		ConditionExpression:      aws.String("attribute_not_exists(#h) OR #h = :h OR #u < :now"),
		ExpressionAttributeNames: map[string]string{"#h": attrLeaseHolder, "#u": attrLeaseUntil},
		ExpressionAttributeValues: map[string]types.AttributeValue{
			":h": &types.AttributeValueMemberS{Value: p.Holder}, ":now": num(p.Now.UnixMilli()),
		},
		ReturnConsumedCapacity: types.ReturnConsumedCapacityTotal,
	})
	if err = interpretError(err); errors.Is(err, durable.ErrConflict) {
		return fmt.Errorf("action %s, slot %d: %w", p.Action, p.Slot, durable.ErrLimited)
	}
	return wrap(err, "lease slot %d of %s", p.Slot, p.Action)
}

// LimitRelease implements durable.Limiter: one DeleteItem if the holder
// still has the slot.
func (s *Store) LimitRelease(ctx context.Context, p *durable.LimitReleaseParams) error {
	_, err := s.client.DeleteItem(ctx, &dynamodb.DeleteItemInput{
		TableName: &s.table, Key: leaseKey(p.Action, p.Slot),
		ConditionExpression:       aws.String("#h = :h"),
		ExpressionAttributeNames:  map[string]string{"#h": attrLeaseHolder},
		ExpressionAttributeValues: map[string]types.AttributeValue{":h": &types.AttributeValueMemberS{Value: p.Holder}},
		ReturnConsumedCapacity:    types.ReturnConsumedCapacityTotal,
	})
	if err = interpretError(err); errors.Is(err, durable.ErrConflict) {
		return nil // not the holder's any more
	}
	return wrap(err, "release slot %d of %s", p.Slot, p.Action)
}
