package dynamo

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/lambdasaga/lambdasaga/durable"
)

// SagaExpire implements durable.Store: an UpdateItem SET ttl = the root's
// end plus the retention (the ttl a root saga that ended then has), on
// condition that the item exists, so that a child never launched is not
// created. It returns nothing and touches no index key: 1 write unit per
// KB of the item, no index write. With a negative Retention it does
// nothing.
func (s *Store) SagaExpire(ctx context.Context, p *durable.SagaExpireParams) error {
	return wrap(s.expire(ctx, sagaKey(p.SagaID), p.EndedAt), "expire saga %s", p.SagaID)
}

// ForkExpire implements durable.Store, as SagaExpire on the fork record:
// 1 write unit (the record stays under 1 KB).
func (s *Store) ForkExpire(ctx context.Context, p *durable.ForkExpireParams) error {
	if err := p.Check(); err != nil {
		return err
	}
	return wrap(s.expire(ctx, forkKey(p.Key), p.EndedAt), "expire fork %s", p.Key)
}

// expire sets the item's ttl, if the item exists. The update names only
// pk (its condition) and ttl: the template grants exactly these.
func (s *Store) expire(ctx context.Context, key map[string]types.AttributeValue, endedAt time.Time) error {
	if s.retention < 0 {
		return nil
	}
	_, err := s.client.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName: &s.table, Key: key,
		UpdateExpression:          aws.String("SET #ttl = :ttl"),
		ConditionExpression:       aws.String("attribute_exists(#pk)"),
		ExpressionAttributeNames:  map[string]string{"#ttl": attrTTL, "#pk": attrPK},
		ExpressionAttributeValues: map[string]types.AttributeValue{":ttl": &types.AttributeValueMemberN{Value: strconv.FormatInt(endedAt.Add(s.retention).Unix(), 10)}},
		ReturnConsumedCapacity:    types.ReturnConsumedCapacityTotal,
	})
	if err = interpretError(err); errors.Is(err, durable.ErrConflict) {
		return fmt.Errorf("%w: no such item", durable.ErrNotFound)
	}
	return err
}
