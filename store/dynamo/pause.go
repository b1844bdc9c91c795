package dynamo

import (
	"cmp"
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

var _ durable.Pauses = (*Store)(nil)

// The pauses live in one item, pk = CONTROL, sk = PAUSES, one attribute
// per pause named "<kind>#<target>", a map of until (N, Unix ns; absent:
// none), comp (BOOL) and crt (N, Unix ns). Workers read it with one
// eventually consistent GetItem every few seconds per process (half a
// read unit: the item stays under 4 KB up to a dozen pauses), which the
// functions' GetItem on the table already allows; an operator writes it
// with UpdateItem. It is never a saga's key, and no saga's write touches
// it. At about 100 bytes a pause, the 400 KB item holds thousands.
const (
	pausePK   = "CONTROL"
	pauseSK   = "PAUSES"
	attrUntil = "until"
	attrComp  = "comp"
)

func pauseItemKey() map[string]types.AttributeValue {
	return map[string]types.AttributeValue{
		attrPK: &types.AttributeValueMemberS{Value: pausePK},
		attrSK: &types.AttributeValueMemberS{Value: pauseSK},
	}
}

func pauseAttr(kind durable.PauseKind, target string) string { return string(kind) + "#" + target }

// PausePut implements durable.Pauses: one UpdateItem SET of the pause's
// attribute, which creates the item if there is none (1 write unit per KB
// of the item).
func (s *Store) PausePut(ctx context.Context, p *durable.PausePutParams) error {
	if err := p.Check(); err != nil {
		return err
	}
	v := map[string]types.AttributeValue{
		attrComp:    &types.AttributeValueMemberBOOL{Value: p.Pause.Compensations},
		attrCreated: n64(unixNano(p.Pause.CreatedAt)),
	}
	if !p.Pause.Until.IsZero() {
		v[attrUntil] = n64(unixNano(p.Pause.Until))
	}
	_, err := s.client.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName: &s.table, Key: pauseItemKey(),
		UpdateExpression:          aws.String("SET #p = :p"),
		ExpressionAttributeNames:  map[string]string{"#p": pauseAttr(p.Pause.Kind, p.Pause.Target)},
		ExpressionAttributeValues: map[string]types.AttributeValue{":p": &types.AttributeValueMemberM{Value: v}},
		ReturnConsumedCapacity:    types.ReturnConsumedCapacityTotal,
	})
	return wrap(interpretError(err), "pause %s %s", p.Pause.Kind, p.Pause.Target)
}

// PauseDelete implements durable.Pauses: one UpdateItem REMOVE of the
// pause's attribute, on condition that it exists.
func (s *Store) PauseDelete(ctx context.Context, p *durable.PauseDeleteParams) error {
	if err := p.Check(); err != nil {
		return err
	}
	_, err := s.client.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName: &s.table, Key: pauseItemKey(),
		UpdateExpression:         aws.String("REMOVE #p"),
		ConditionExpression:      aws.String("attribute_exists(#p)"),
		ExpressionAttributeNames: map[string]string{"#p": pauseAttr(p.Kind, p.Target)},
		ReturnConsumedCapacity:   types.ReturnConsumedCapacityTotal,
	})
	if err = interpretError(err); errors.Is(err, durable.ErrConflict) {
		return fmt.Errorf("pause of %s %s: %w", p.Kind, p.Target, durable.ErrNotFound)
	}
	return wrap(err, "unpause %s %s", p.Kind, p.Target)
}

// PauseList implements durable.Pauses: one GetItem, eventually consistent
// unless Consistent.
func (s *Store) PauseList(ctx context.Context, p *durable.PauseListParams) ([]durable.Pause, error) {
	out, err := s.client.GetItem(ctx, &dynamodb.GetItemInput{
		TableName: &s.table, Key: pauseItemKey(), ConsistentRead: aws.Bool(p.Consistent),
		ReturnConsumedCapacity: types.ReturnConsumedCapacityTotal,
	})
	if err != nil {
		return nil, wrap(interpretError(err), "list pauses")
	}
	var ps []durable.Pause
	for name, av := range out.Item {
		kind, target, ok := strings.Cut(name, "#")
		m, isMap := av.(*types.AttributeValueMemberM)
		if !ok || !isMap {
			continue // pk, sk
		}
		pause := durable.Pause{Kind: durable.PauseKind(kind), Target: target, Until: timeAttr(m.Value, attrUntil), CreatedAt: timeAttr(m.Value, attrCreated)}
		if b, ok := m.Value[attrComp].(*types.AttributeValueMemberBOOL); ok {
			pause.Compensations = b.Value
		}
		ps = append(ps, pause)
	}
	slices.SortFunc(ps, func(a, b durable.Pause) int {
		return cmp.Or(cmp.Compare(a.Kind, b.Kind), cmp.Compare(a.Target, b.Target))
	})
	return ps, nil
}

func n64(v int64) *types.AttributeValueMemberN {
	return &types.AttributeValueMemberN{Value: strconv.FormatInt(v, 10)}
}
