package dynamo_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/lambdasaga/lambdasaga/durable"
	"github.com/lambdasaga/lambdasaga/internal/accounting"
	"github.com/lambdasaga/lambdasaga/internal/awstest"
)

// forkItem reads the fork record's item as stored, through the counted
// client (callers reset the counter after).
func forkItem(t *testing.T, b *awstest.Backend, key string) map[string]types.AttributeValue {
	t.Helper()
	out, err := b.DynamoDB.GetItem(context.Background(), &dynamodb.GetItemInput{TableName: &b.Table, ConsistentRead: aws.Bool(true),
		Key: map[string]types.AttributeValue{"pk": &types.AttributeValueMemberS{Value: "FORK#" + key}, "sk": &types.AttributeValueMemberS{Value: "FORK"}}})
	if err != nil || out.Item == nil {
		t.Fatalf("get the fork item: %v (item %v)", err, out)
	}
	return out.Item
}

// Counting a child of a 50-lane fork is one UpdateItem, no read, and
// bills exactly 1 write unit on the table and nothing on either index
// (the fork item has no index keys). A stop bills the same, a lost count
// 1 unit (the stored item's size, under 1 KB), and the consistent read of
// the record 1 read unit (under 4 KB).
func TestForkWritesBill(t *testing.T) {
	t.Parallel()
	b := awstest.New(t)
	ctx := context.Background()
	key := durable.ForkKey("order-7", "ship_all", 4)
	for j := range 50 {
		if _, err := b.Store.ForkCount(ctx, &durable.ForkCountParams{Key: key, Lane: j, Count: 0}); err != nil {
			t.Fatal(err)
		}
	}
	if s := b.Counter.Snapshot(); len(s) != 1 || s["DynamoDB.UpdateItem"].Calls != 50 {
		t.Fatalf("50 counts made %v, want 50 UpdateItem calls and nothing else", slices.Sorted(maps.Keys(s)))
	}
	for _, name := range []string{"gsi1pk", "gsi1sk", "gsi2pk", "gsi2sk", "ttl"} {
		if _, ok := forkItem(t, b, key)[name]; ok {
			t.Fatalf("the fork item has %s", name)
		}
	}

	for _, c := range []struct {
		what   string
		op     string
		do     func() error
		want   error
		billed float64 // write units, or read units for ForkGet
		isRead bool
	}{
		{"count a child of a 50-lane fork", "DynamoDB.UpdateItem", func() error {
			_, err := b.Store.ForkCount(ctx, &durable.ForkCountParams{Key: key, Lane: 17, Count: 1})
			return err
		}, nil, 1, false},
		{"count a failed child", "DynamoDB.UpdateItem", func() error {
			_, err := b.Store.ForkCount(ctx, &durable.ForkCountParams{Key: key, Lane: 18, Count: 1, Failed: true, Child: 68})
			return err
		}, nil, 1, false},
		{"stop a lane", "DynamoDB.UpdateItem", func() error {
			_, err := b.Store.ForkStop(ctx, &durable.ForkStopParams{Key: key, Lane: 40})
			return err
		}, nil, 1, false},
		{"a repeated count", "DynamoDB.UpdateItem", func() error {
			_, err := b.Store.ForkCount(ctx, &durable.ForkCountParams{Key: key, Lane: 17, Count: 1})
			return err
		}, durable.ErrConflict, 1, false},
		{"read the record", "DynamoDB.GetItem", func() error {
			_, err := b.Store.ForkGet(ctx, &durable.ForkGetParams{Key: key})
			return err
		}, nil, 1, true},
	} {
		b.Counter.Reset()
		if err := c.do(); !errors.Is(err, c.want) {
			t.Fatalf("%s: %v, want %v", c.what, err, c.want)
		}
		snap := b.Counter.Snapshot()
		st := snap[c.op]
		if len(snap) != 1 || st.Calls != 1 || st.Unbilled != 0 {
			t.Fatalf("%s: calls %v, %s %+v; want one %s, billed", c.what, slices.Sorted(maps.Keys(snap)), c.op, st, c.op)
		}
		got := st.BilledWriteUnits
		if c.isRead {
			got = st.BilledReadUnits
		}
		if got != c.billed || st.BilledIndexWriteUnits != 0 {
			t.Errorf("%s: billed %v units and %v on the indexes, want %v and 0", c.what, got, st.BilledIndexWriteUnits, c.billed)
		}
	}
}

// The largest fork record (every one of the 100 lanes at count 9,999,
// far past what a foreach of 10,000 children in 100 lanes reaches, every
// lane stopped, a failed child of 9,999, every lane cancelled, a key of
// the longest length)
// stays under 1 KB, so a count always bills 1 write unit. The counts are
// written by hand: counting each lane that far would take a million
// writes.
func TestForkRecordUnderOneKB(t *testing.T) {
	t.Parallel()
	b := awstest.New(t)
	ctx := context.Background()
	key := strings.Repeat("k", durable.MaxForkKeyBytes)
	// The store makes the item; then every attribute is set to its largest.
	if _, err := b.Store.ForkCount(ctx, &durable.ForkCountParams{Key: key, Lane: 0, Count: 0}); err != nil {
		t.Fatal(err)
	}
	var sets []string
	values := map[string]types.AttributeValue{":big": &types.AttributeValueMemberN{Value: "9999"}}
	names := map[string]string{"#f": "fail", "#s": "stop", "#c": "cancelled"}
	stopped := &types.AttributeValueMemberNS{}
	cancelled := &types.AttributeValueMemberB{Value: bytes.Repeat([]byte{0xff}, (durable.MaxForkLanes+7)/8)}
	cancelled.Value[len(cancelled.Value)-1] = 0xff >> (8 - durable.MaxForkLanes%8) // lanes 96 to 99
	for j := range durable.MaxForkLanes {
		names[fmt.Sprintf("#l%d", j)] = "l" + strconv.Itoa(j)
		sets = append(sets, fmt.Sprintf("#l%d = :big", j))
		stopped.Value = append(stopped.Value, strconv.Itoa(j))
	}
	values[":stopped"], values[":cancelled"] = stopped, cancelled
	_, err := b.DynamoDB.UpdateItem(ctx, &dynamodb.UpdateItemInput{TableName: &b.Table,
		Key:                       map[string]types.AttributeValue{"pk": &types.AttributeValueMemberS{Value: "FORK#" + key}, "sk": &types.AttributeValueMemberS{Value: "FORK"}},
		UpdateExpression:          aws.String("SET " + strings.Join(sets, ", ") + ", #f = :big, #s = :stopped, #c = :cancelled"),
		ExpressionAttributeNames:  names,
		ExpressionAttributeValues: values,
	})
	if err != nil {
		t.Fatal(err)
	}
	size := accounting.ItemSize(forkItem(t, b, key))
	t.Logf("the largest fork item: %d bytes", size)
	if size >= 1024 {
		t.Fatalf("the largest fork item is %d bytes, want under 1 KB", size)
	}
	// A count of it, from what the lane holds, bills 1 unit.
	b.Counter.Reset()
	r, err := b.Store.ForkCount(ctx, &durable.ForkCountParams{Key: key, Lane: 99, Count: 9999, Failed: true, Child: 1})
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Counts) != durable.MaxForkLanes || r.Count(99) != 10000 || r.Count(0) != 9999 || r.Failed != 9999 || len(r.Stopped) != durable.MaxForkLanes || len(r.Cancelled) != durable.MaxForkLanes {
		t.Fatalf("after-image: %+v", *r)
	}
	if st := b.Counter.Snapshot()["DynamoDB.UpdateItem"]; st.BilledWriteUnits != 1 || st.BilledIndexWriteUnits != 0 || st.Unbilled != 0 {
		t.Fatalf("the count of the largest record: %+v, want 1 write unit billed, none on the indexes", st)
	}
}

// The after-image a count returns is the item DynamoDB stored, attribute
// for attribute, even though the store derives it from the item before.
func TestForkAfterImageIsTheStoredItem(t *testing.T) {
	t.Parallel()
	b := awstest.New(t)
	ctx := context.Background()
	key := durable.ForkKey("p", "each", 1)
	for i, p := range []durable.ForkCountParams{
		{Key: key, Lane: 2, Count: 0},
		{Key: key, Lane: 0, Count: 0, Failed: true, Child: 0},
		{Key: key, Lane: 2, Count: 1, Failed: true, Child: 5},
		{Key: key, Lane: 11, Count: 0},
	} {
		got, err := b.Store.ForkCount(ctx, &p)
		if err != nil {
			t.Fatal(err)
		}
		stored, err := b.Store.ForkGet(ctx, &durable.ForkGetParams{Key: key})
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(got.Counts, stored.Counts) || !slices.Equal(got.Stopped, stored.Stopped) || got.Failed != stored.Failed {
			t.Fatalf("count %d: returned %+v, stored %+v", i, *got, *stored)
		}
	}
}
