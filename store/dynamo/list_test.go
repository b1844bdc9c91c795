package dynamo_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/smithy-go/middleware"

	"github.com/lambdasaga/lambdasaga/durable"
	"github.com/lambdasaga/lambdasaga/internal/awslocal"
	"github.com/lambdasaga/lambdasaga/internal/awstest"
	"github.com/lambdasaga/lambdasaga/store/dynamo"
)

// Paging through the sweep's listing (pages of 100) of 3,200 sagas long in
// running reads each index entry about once: a page reads what it returns
// and a few entries per shard, which the next page reads again. The bound,
// 3 entries read per saga listed, leaves room for those; a page that asks
// each shard for a page's worth reads about 16.5.
func TestListingReadsEachEntryAboutOnce(t *testing.T) {
	t.Parallel()
	b := awstest.New(t)
	ctx := context.Background()
	const sagas = 3200
	base := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	var wg sync.WaitGroup
	errs := make(chan error, sagas)
	sem := make(chan struct{}, 32)
	for i := range sagas {
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			at := base.Add(time.Duration(i) * time.Second)
			errs <- b.Store.SagaCreate(ctx, &durable.SagaCreateParams{Record: durable.SagaRecord{SagaID: fmt.Sprintf("s-%05d", i), Version: 1,
				Status: durable.StatusRunning, Name: "order", DefinitionHash: "h", CreatedAt: at, StatusSince: at, UpdatedAt: at, State: []byte("x")}})
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	s, entries, queries := countingStore(t, b)
	listed, pages := 0, 0
	p := durable.SagaListParams{Status: durable.StatusRunning, Limit: 100, EnteredBefore: base.Add(time.Hour * 24)}
	for {
		res, err := s.SagaList(ctx, &p)
		if err != nil {
			t.Fatal(err)
		}
		listed += len(res.Sagas)
		pages++
		if res.NextCursor == "" {
			break
		}
		p.Cursor = res.NextCursor
	}
	if listed != sagas {
		t.Fatalf("listed %d sagas, want %d", listed, sagas)
	}
	t.Logf("%d sagas in %d pages of 100: %d queries read %d index entries (%.1f per saga listed)", listed, pages, queries.Load(), entries.Load(), float64(entries.Load())/float64(listed))
	if entries.Load() > 3*sagas {
		t.Errorf("listing %d sagas read %d index entries, %.1f per saga: the entries each shard gave beyond what a page used are read again on every page",
			listed, entries.Load(), float64(entries.Load())/float64(listed))
	}
}

// countingStore is a store on b's table whose client counts the queries it
// makes and the index entries they read.
func countingStore(t *testing.T, b *awstest.Backend) (s *dynamo.Store, entries, queries *atomic.Int64) {
	t.Helper()
	entries, queries = new(atomic.Int64), new(atomic.Int64)
	count := func(stack *middleware.Stack) error {
		return stack.Initialize.Add(middleware.InitializeMiddlewareFunc("listing/count", func(ctx context.Context, in middleware.InitializeInput, next middleware.InitializeHandler) (middleware.InitializeOutput, middleware.Metadata, error) {
			out, md, err := next.HandleInitialize(ctx, in)
			if q, ok := out.Result.(*dynamodb.QueryOutput); ok {
				entries.Add(int64(q.Count))
				queries.Add(1)
			}
			return out, md, err
		}), middleware.After)
	}
	s, err := dynamo.New(dynamo.Config{Client: awslocal.DynamoDB(b.DynamoDBEndpoint, count, b.Counter.Register), Table: b.Table})
	if err != nil {
		t.Fatal(err)
	}
	return s, entries, queries
}
