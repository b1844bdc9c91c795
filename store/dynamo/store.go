// Package dynamo is durable.Store on Amazon DynamoDB: one table, one item
// per saga, every transition a single conditional write on the version.
//
// Table design (single table, on-demand):
//
//	item        pk               sk       attributes
//	saga        SAGA#<id>        STATE    v (N, version), st (S, status), name (S), def (S, hash),
//	                                      upd (N, updated, Unix ns), state (B, engine state),
//	                                      gsi1pk (S, STATUS#<status>), gsi1sk (S, <updated ns, 20 digits>#<id>),
//	                                      ttl (N, Unix seconds; only once succeeded or compensated,
//	                                      never while parked in compensation_failed)
//	definition  DEF#<hash>       DEF      name (S), src (B)
//
// The global secondary index "by_status" (gsi1pk, gsi1sk; projecting v,
// st, name, def and upd) lists sagas of one status, most recently updated
// first. Reads of sagas are strongly consistent; writes are PutItem with a
// condition on v (create: attribute_not_exists); no transactions. History
// items are not written: the state item is the record. docs/PROTOCOL.md
// gives the access patterns and what each transition bills. Like every
// adapter it imports only durable of this module, and no CEL.
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
	"github.com/aws/smithy-go"
	"github.com/lambdasaga/lambdasaga/durable"
)

var _ durable.Store = (*Store)(nil)

// Names of the table's keys, attributes and index.
const (
	attrPK        = "pk"
	attrSK        = "sk"
	attrVersion   = "v"
	attrStatus    = "st"
	attrName      = "name"
	attrDef       = "def"
	attrUpdated   = "upd"
	attrState     = "state"
	attrGSI1PK    = "gsi1pk"
	attrGSI1SK    = "gsi1sk"
	attrTTL       = "ttl"
	attrSource    = "src"
	IndexByStatus = "by_status"
	// TTLAttribute is the attribute the table's time to live reads.
	TTLAttribute = attrTTL
)

// MaxItemBytes is the largest saga item this store writes: DynamoDB allows
// 400 KB; the margin covers the other attributes' names and values.
const MaxItemBytes = 390 << 10

// Config sets up a Store.
type Config struct {
	Client *dynamodb.Client // makes the DynamoDB calls; required
	Table  string           // the table's name, keys and index as in the package doc; required
	// Retention is how long a succeeded or compensated saga stays before
	// DynamoDB's TTL removes it; default 30 days. Negative: keep forever (no
	// ttl attribute). Sagas parked in compensation_failed never expire.
	Retention time.Duration
}

// Store is durable.Store on a DynamoDB table.
type Store struct {
	client    *dynamodb.Client
	table     string
	retention time.Duration
}

// New checks cfg and returns a store.
func New(cfg Config) (*Store, error) {
	if cfg.Client == nil || cfg.Table == "" {
		return nil, errors.New("dynamo store: a Client and a Table are required")
	}
	if cfg.Retention == 0 {
		cfg.Retention = 30 * 24 * time.Hour
	}
	return &Store{client: cfg.Client, table: cfg.Table, retention: cfg.Retention}, nil
}

func sagaKey(id string) map[string]types.AttributeValue {
	return map[string]types.AttributeValue{
		attrPK: &types.AttributeValueMemberS{Value: "SAGA#" + id},
		attrSK: &types.AttributeValueMemberS{Value: "STATE"},
	}
}

func defKey(hash string) map[string]types.AttributeValue {
	return map[string]types.AttributeValue{
		attrPK: &types.AttributeValueMemberS{Value: "DEF#" + hash},
		attrSK: &types.AttributeValueMemberS{Value: "DEF"},
	}
}

func n(v uint64) *types.AttributeValueMemberN {
	return &types.AttributeValueMemberN{Value: strconv.FormatUint(v, 10)}
}

func gsi1sk(updated time.Time, id string) string {
	return fmt.Sprintf("%020d#%s", updated.UnixNano(), id)
}

// item builds the saga item, checking its size first.
func (s *Store) item(r *durable.SagaRecord) (map[string]types.AttributeValue, error) {
	size := len(r.State) + len(r.SagaID)*3 + len(r.Name) + len(r.DefinitionHash) + 200
	if size > MaxItemBytes {
		return nil, fmt.Errorf("%w: saga %s item would be %d bytes, over the %d this store writes (DynamoDB's limit is 400 KB)", durable.ErrTooLarge, r.SagaID, size, MaxItemBytes)
	}
	it := sagaKey(r.SagaID)
	it[attrVersion] = n(r.Version)
	it[attrStatus] = &types.AttributeValueMemberS{Value: string(r.Status)}
	it[attrName] = &types.AttributeValueMemberS{Value: r.Name}
	it[attrDef] = &types.AttributeValueMemberS{Value: r.DefinitionHash}
	it[attrUpdated] = &types.AttributeValueMemberN{Value: strconv.FormatInt(r.UpdatedAt.UnixNano(), 10)}
	it[attrState] = &types.AttributeValueMemberB{Value: r.State}
	it[attrGSI1PK] = &types.AttributeValueMemberS{Value: "STATUS#" + string(r.Status)}
	it[attrGSI1SK] = &types.AttributeValueMemberS{Value: gsi1sk(r.UpdatedAt, r.SagaID)}
	if expires(r.Status) && s.retention > 0 {
		it[attrTTL] = &types.AttributeValueMemberN{Value: strconv.FormatInt(r.UpdatedAt.Add(s.retention).Unix(), 10)}
	}
	return it, nil
}

// expires reports whether a saga in status is over for good, so DynamoDB's
// TTL may delete it after the retention period: succeeded and compensated
// only. A saga parked in compensation_failed is final too, but it waits for
// an operator and is kept however long that takes. Every write replaces the
// whole item, so a write that moves a saga out of these statuses (a resume)
// removes the ttl attribute.
func expires(status durable.Status) bool {
	return status == durable.StatusSucceeded || status == durable.StatusCompensated
}

// SagaCreate implements durable.Store.
func (s *Store) SagaCreate(ctx context.Context, p *durable.SagaCreateParams) error {
	it, err := s.item(&p.Record)
	if err != nil {
		return err
	}
	_, err = s.client.PutItem(ctx, &dynamodb.PutItemInput{
		TableName: &s.table, Item: it,
		ConditionExpression:      aws.String("attribute_not_exists(#pk)"),
		ExpressionAttributeNames: map[string]string{"#pk": attrPK},
		ReturnConsumedCapacity:   types.ReturnConsumedCapacityTotal,
	})
	if err = interpretError(err); errors.Is(err, durable.ErrConflict) {
		return fmt.Errorf("saga %s: %w", p.Record.SagaID, durable.ErrExists)
	}
	return wrap(err, "create saga %s", p.Record.SagaID)
}

// SagaGet implements durable.Store.
func (s *Store) SagaGet(ctx context.Context, p *durable.SagaGetParams) (*durable.SagaRecord, error) {
	out, err := s.client.GetItem(ctx, &dynamodb.GetItemInput{
		TableName: &s.table, Key: sagaKey(p.SagaID), ConsistentRead: aws.Bool(true),
		ReturnConsumedCapacity: types.ReturnConsumedCapacityTotal,
	})
	if err != nil {
		return nil, wrap(interpretError(err), "get saga %s", p.SagaID)
	}
	if out.Item == nil {
		return nil, fmt.Errorf("saga %s: %w", p.SagaID, durable.ErrNotFound)
	}
	return decodeRecord(p.SagaID, out.Item)
}

func decodeRecord(id string, it map[string]types.AttributeValue) (*durable.SagaRecord, error) {
	r := &durable.SagaRecord{SagaID: id}
	var err error
	if r.Version, err = numAttr(it, attrVersion); err != nil {
		return nil, fmt.Errorf("saga %s: %w", id, err)
	}
	r.Status = durable.Status(strAttr(it, attrStatus))
	r.Name = strAttr(it, attrName)
	r.DefinitionHash = strAttr(it, attrDef)
	ns, _ := numAttr(it, attrUpdated)
	r.UpdatedAt = time.Unix(0, int64(ns)).UTC()
	if b, ok := it[attrState].(*types.AttributeValueMemberB); ok {
		r.State = b.Value
	}
	return r, nil
}

func strAttr(it map[string]types.AttributeValue, name string) string {
	if v, ok := it[name].(*types.AttributeValueMemberS); ok {
		return v.Value
	}
	return ""
}

func numAttr(it map[string]types.AttributeValue, name string) (uint64, error) {
	v, ok := it[name].(*types.AttributeValueMemberN)
	if !ok {
		return 0, fmt.Errorf("item lacks numeric attribute %s", name)
	}
	return strconv.ParseUint(v.Value, 10, 64)
}

// SagaUpdate implements durable.Store: a PutItem conditional on the version.
func (s *Store) SagaUpdate(ctx context.Context, p *durable.SagaUpdateParams) error {
	it, err := s.item(&p.Record)
	if err != nil {
		return err
	}
	_, err = s.client.PutItem(ctx, &dynamodb.PutItemInput{
		TableName: &s.table, Item: it,
		ConditionExpression:       aws.String("#v = :expected"),
		ExpressionAttributeNames:  map[string]string{"#v": attrVersion},
		ExpressionAttributeValues: map[string]types.AttributeValue{":expected": n(p.ExpectedVersion)},
		ReturnConsumedCapacity:    types.ReturnConsumedCapacityTotal,
	})
	err = interpretError(err)
	if errors.Is(err, durable.ErrConflict) {
		// Missing, or at another version? Only the failure path pays this read.
		if _, gerr := s.SagaGet(ctx, &durable.SagaGetParams{SagaID: p.Record.SagaID}); errors.Is(gerr, durable.ErrNotFound) {
			return gerr
		}
		return fmt.Errorf("saga %s is not at version %d: %w", p.Record.SagaID, p.ExpectedVersion, durable.ErrConflict)
	}
	return wrap(err, "update saga %s", p.Record.SagaID)
}

// SagaList implements durable.Store. The cursor is the index sort key of the
// last saga returned; a page without a status filter merges one query per status.
func (s *Store) SagaList(ctx context.Context, p *durable.SagaListParams) (*durable.SagaListResult, error) {
	limit := p.Limit
	if limit <= 0 {
		limit = 100
	}
	statuses := []durable.Status{p.Status}
	if p.Status == "" {
		statuses = durable.Statuses()
	}
	type found struct {
		sk string
		sm durable.SagaSummary
	}
	var all []found
	for _, st := range statuses {
		in := &dynamodb.QueryInput{
			TableName: &s.table, IndexName: aws.String(IndexByStatus),
			KeyConditionExpression:    aws.String("#pk = :pk"),
			ExpressionAttributeNames:  map[string]string{"#pk": attrGSI1PK},
			ExpressionAttributeValues: map[string]types.AttributeValue{":pk": &types.AttributeValueMemberS{Value: "STATUS#" + string(st)}},
			ScanIndexForward:          aws.Bool(false),
			Limit:                     aws.Int32(int32(limit)),
			ReturnConsumedCapacity:    types.ReturnConsumedCapacityTotal,
		}
		if p.Cursor != "" {
			in.KeyConditionExpression = aws.String("#pk = :pk AND #sk < :cursor")
			in.ExpressionAttributeNames["#sk"] = attrGSI1SK
			in.ExpressionAttributeValues[":cursor"] = &types.AttributeValueMemberS{Value: p.Cursor}
		}
		out, err := s.client.Query(ctx, in)
		if err != nil {
			return nil, wrap(interpretError(err), "list sagas")
		}
		for _, it := range out.Items {
			id := strings.TrimPrefix(strAttr(it, attrPK), "SAGA#")
			r, err := decodeRecord(id, it)
			if err != nil {
				return nil, err
			}
			all = append(all, found{sk: strAttr(it, attrGSI1SK), sm: durable.SagaSummary{SagaID: id, Name: r.Name, Status: r.Status, Version: r.Version, DefinitionHash: r.DefinitionHash, UpdatedAt: r.UpdatedAt}})
		}
	}
	// Newest first across statuses: the sort key orders by time, then id.
	slices.SortFunc(all, func(a, b found) int { return strings.Compare(b.sk, a.sk) })
	res := &durable.SagaListResult{}
	for _, f := range all[:min(limit, len(all))] {
		res.Sagas = append(res.Sagas, f.sm)
	}
	// A full page may have more behind it (each status query stopped at
	// limit); the next page starts below its last key, and may be empty.
	if len(all) >= limit {
		res.NextCursor = all[limit-1].sk
	}
	return res, nil
}

// DefinitionPut implements durable.Store.
func (s *Store) DefinitionPut(ctx context.Context, p *durable.DefinitionPutParams) error {
	it := defKey(p.Hash)
	it[attrName] = &types.AttributeValueMemberS{Value: p.Name}
	it[attrSource] = &types.AttributeValueMemberB{Value: p.Source}
	_, err := s.client.PutItem(ctx, &dynamodb.PutItemInput{
		TableName: &s.table, Item: it,
		ConditionExpression:      aws.String("attribute_not_exists(#pk)"),
		ExpressionAttributeNames: map[string]string{"#pk": attrPK},
		ReturnConsumedCapacity:   types.ReturnConsumedCapacityTotal,
	})
	if err = interpretError(err); errors.Is(err, durable.ErrConflict) {
		stored, gerr := s.DefinitionGet(ctx, &durable.DefinitionGetParams{Hash: p.Hash})
		if gerr != nil {
			return gerr
		}
		if string(stored.Source) != string(p.Source) {
			return fmt.Errorf("definition %s: stored with a different source: %w", p.Hash, durable.ErrConflict)
		}
		return nil
	}
	return wrap(err, "put definition %s", p.Hash)
}

// DefinitionGet implements durable.Store.
func (s *Store) DefinitionGet(ctx context.Context, p *durable.DefinitionGetParams) (*durable.DefinitionRecord, error) {
	out, err := s.client.GetItem(ctx, &dynamodb.GetItemInput{
		TableName: &s.table, Key: defKey(p.Hash), ConsistentRead: aws.Bool(true),
		ReturnConsumedCapacity: types.ReturnConsumedCapacityTotal,
	})
	if err != nil {
		return nil, wrap(interpretError(err), "get definition %s", p.Hash)
	}
	if out.Item == nil {
		return nil, fmt.Errorf("definition %s: %w", p.Hash, durable.ErrNotFound)
	}
	d := &durable.DefinitionRecord{Hash: p.Hash, Name: strAttr(out.Item, attrName)}
	if b, ok := out.Item[attrSource].(*types.AttributeValueMemberB); ok {
		d.Source = b.Value
	}
	return d, nil
}

// interpretError translates DynamoDB errors into the contract's, in one
// place: a failed condition is a conflict, throttling is ErrThrottled
// (retryable). Anything else passes through.
func interpretError(err error) error {
	if err == nil {
		return nil
	}
	var (
		conflict    *types.ConditionalCheckFailedException
		provisioned *types.ProvisionedThroughputExceededException
		throttling  *types.ThrottlingException
		requests    *types.RequestLimitExceeded
		limit       *types.LimitExceededException
		missing     *types.ResourceNotFoundException
		ae          smithy.APIError
	)
	switch {
	case errors.As(err, &conflict):
		return durable.ErrConflict
	case errors.As(err, &provisioned), errors.As(err, &throttling), errors.As(err, &requests), errors.As(err, &limit):
		return fmt.Errorf("%w: %w", durable.ErrThrottled, err)
	case errors.As(err, &missing):
		return fmt.Errorf("table missing: %w", err)
	case errors.As(err, &ae) && ae.ErrorCode() == "ValidationException" && strings.Contains(ae.ErrorMessage(), "Item size"):
		// DynamoDB has no error type for an item over 400 KB, only this
		// ValidationException message (Put checks sizes first; this is
		// the backstop).
		return fmt.Errorf("%w: %w", durable.ErrTooLarge, err)
	}
	return err
}

func wrap(err error, format string, args ...any) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("%s: %w", fmt.Sprintf(format, args...), err)
}
