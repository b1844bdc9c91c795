// Package dynamo is durable.Store on Amazon DynamoDB: one table, one item
// per saga, every transition a single conditional write on the version.
//
// # Key design
//
// One on-demand table, keys pk and sk, and two global secondary indexes:
// by_status (keys gsi1pk and gsi1sk) and the sparse by_due (keys gsi2pk
// and gsi2sk):
//
//	item        pk           sk     attributes
//	saga        SAGA#<id>    STATE  v (N, version), st (S, status), name (S), def (S, definition hash),
//	                                crt (N, created, Unix ns), upd (N, updated, Unix ns),
//	                                state (B, encoded state with its outbox),
//	                                gsi1pk (S, STATUS#<status>#<shard>), gsi1sk (S, <status since>#<id>: durable.ListPosition),
//	                                gsi2pk (S, DUE#<shard>), gsi2sk (S, <wake at>#<id>): only while WakeAt is set,
//	                                rs (N, the sweep's re-sends of this version; absent: none),
//	                                ttl (N, Unix s; only once succeeded or compensated)
//	definition  DEF#<hash>   DEF    name (S), src (B)
//	current     NAME#<name>  CURRENT def (S, the deployed definition's hash), src (B, a copy of its source)
//	fork        FORK#<key>   FORK   l0 .. l99 (N, each lane's count of ended children; absent: 0),
//	                                stop (NS, the stopped lanes), fail (N, the first failed child)
//	limits      LIMITS, LIMIT#<action>#...  action limits, their rate windows and leases: limit.go
//
// The shard is a hash of the saga id, 00 to 31 (Shards): no partition key,
// of the table or an index, is shared by every saga of a status or every
// timer. by_status projects st, name, def and crt: with its keys, nothing
// it holds changes while the saga keeps its status (the version and update
// time, which change at every transition, are not in it). by_due projects
// only its keys, which hold all it gives (the id and the due time), and
// holds only the sagas with a timer: an item without gsi2pk and gsi2sk has
// no entry (Developer Guide, "Take advantage of sparse indexes"). SagaGet
// reads WakeAt from gsi2sk, so the timer costs no attribute of its own.
// So, as DynamoDB bills index writes:
//
//	write                                       table                 by_status                by_due
//	create (a start)                            1 unit per KB of item 1 (a new entry)          1 with a timer, else 0
//	a transition that keeps the status          1 unit per KB         0                        see below
//	a transition that changes the status        1 unit per KB         2 (old deleted, new put) see below
//	a lost condition                            1 per KB of the stored item   0                0
//	a re-send counted by the sweep (UpdateItem) 1 per KB of item      0 (rs is not projected)  0
//	a fork's count or stop (UpdateItem)         1 (the item stays under 1 KB)  0 (no index keys)  0
//
// and on by_due, whatever the status does: setting a timer 1 (a new
// entry), clearing it 1 (the entry deleted), changing it 2 (deleted and
// put), keeping it or having none 0. A saga that never waits writes
// nothing to by_due, ever.
//
// Access patterns:
//
//	pattern                                  request                                       key
//	get a saga (every message)               GetItem, consistent                           pk = SAGA#<id>, sk = STATE
//	create, update a saga                    PutItem if attribute_not_exists(pk) / v = :v  same
//	count a sweep's re-send                  UpdateItem SET rs if v = :v and rs = :from    same
//	list, newest status first (by status)    Query by_status per shard, merged             gsi1pk = STATUS#<status>#<shard>, gsi1sk < cursor
//	list every status                        the same, for every status                    as above
//	sweep: sagas in their status since < t   Query by_status per shard of running, waiting, compensating, gsi1sk < <t>#
//	timers due before t, earliest first      Query by_due per shard, merged, ascending     gsi2pk = DUE#<shard>, cursor < gsi2sk < <t>#
//	store, get a definition                  PutItem if absent / GetItem, consistent       pk = DEF#<hash>, sk = DEF
//	the current version of a name (a start)  GetItem, eventually consistent                pk = NAME#<name>, sk = CURRENT
//	deploy a definition (sagactl deploy)     GetItem of the definition, PutItem            same
//	count a fork's ended child               UpdateItem SET l<j> = :m+1 if l<j> = :m (absent for 0), ALL_OLD; no read first
//	                                         (a failed one: SET fail = if_not_exists(fail, :k) ADD stop :j)    pk = FORK#<key>, sk = FORK
//	stop a fork's lane                       UpdateItem ADD stop :j, ALL_OLD               same
//	read a fork record                       GetItem, consistent                           same
//	expire a finished saga                   DynamoDB's time to live on ttl                (no write charge)
//
// A listing queries every shard of a status (32 queries, 192 for every
// status) in parallel, a few entries from each, and merges them by gsi1sk,
// newest first, reading more from a shard only when the merge has used what
// it read: a page reads about what it returns plus a few entries per shard.
// Its cursor is the gsi1sk of the last saga returned (durable.ListPosition),
// a place in that order, the same in every shard. The sweep's query reads only the entries older than its
// bound, so its cost grows with the sagas that have been in one status a
// long time (stuck ones among them), not with all of them. The due timers
// are merged the same way from the 32 DUE# shards, earliest first, the
// cursor the gsi2sk of the last one returned; a query reads only the
// entries due before its bound, so a timer a month away is read by no
// listing until it is due.
//
// Reads of sagas are strongly consistent; writes are PutItem with a
// condition on v; no transactions. docs/PROTOCOL.md gives the design with
// what each transition bills and the per-partition rates at scale. Like
// every adapter it imports only durable of this module, and no CEL.
package dynamo

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"strconv"
	"strings"
	"sync"
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
	attrCreated   = "crt"
	attrResends   = "rs"
	attrReceived  = "rc"
	attrState     = "state"
	attrChild     = "ch" // a child run of a fork: 1 listed (a child saga), 2 unlisted (a branch or an iteration)
	attrSince     = "ss" // an unlisted child's status since, which gsi1sk holds for the others
	attrGSI1PK    = "gsi1pk"
	attrGSI1SK    = "gsi1sk"
	attrGSI2PK    = "gsi2pk"
	attrGSI2SK    = "gsi2sk"
	attrTTL       = "ttl"
	attrSource    = "src"
	IndexByStatus = "by_status"
	IndexByDue    = "by_due"
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

// currentKey is the key of a name's current version.
func currentKey(name string) map[string]types.AttributeValue {
	return map[string]types.AttributeValue{
		attrPK: &types.AttributeValueMemberS{Value: "NAME#" + name},
		attrSK: &types.AttributeValueMemberS{Value: "CURRENT"},
	}
}

func n(v uint64) *types.AttributeValueMemberN {
	return &types.AttributeValueMemberN{Value: strconv.FormatUint(v, 10)}
}

// Shards is how many index partition keys the sagas of one status are
// spread over. It is part of the stored format: the shard of a saga is
// written in its index key, and listings read every shard, so changing it
// needs the items rewritten.
const Shards = 32

// shard is the saga's index shard: FNV-1a of its id, modulo Shards.
func shard(id string) int {
	h := fnv.New32a()
	_, _ = h.Write([]byte(id))
	return int(h.Sum32() % Shards)
}

// statusKey is the index partition key of the sagas of status in one shard.
func statusKey(status durable.Status, shard int) string {
	return fmt.Sprintf("STATUS#%s#%02d", status, shard)
}

// dueKey is the by_due partition key of the timers of one shard.
func dueKey(shard int) string {
	return fmt.Sprintf("DUE#%02d", shard)
}

// item builds the saga item, checking its size first.
func (s *Store) item(r *durable.SagaRecord) (map[string]types.AttributeValue, error) {
	size := len(r.State) + len(r.SagaID)*4 + len(r.Name) + len(r.DefinitionHash) + 250
	if size > MaxItemBytes {
		return nil, fmt.Errorf("%w: saga %s item would be %d bytes, over the %d this store writes (DynamoDB's limit is 400 KB)", durable.ErrTooLarge, r.SagaID, size, MaxItemBytes)
	}
	it := sagaKey(r.SagaID)
	it[attrVersion] = n(r.Version)
	it[attrStatus] = &types.AttributeValueMemberS{Value: string(r.Status)}
	it[attrName] = &types.AttributeValueMemberS{Value: r.Name}
	it[attrDef] = &types.AttributeValueMemberS{Value: r.DefinitionHash}
	it[attrCreated] = &types.AttributeValueMemberN{Value: strconv.FormatInt(unixNano(r.CreatedAt), 10)}
	it[attrUpdated] = &types.AttributeValueMemberN{Value: strconv.FormatInt(unixNano(r.UpdatedAt), 10)}
	it[attrState] = &types.AttributeValueMemberB{Value: r.State}
	if r.Received > 0 {
		it[attrReceived] = n(r.Received) // absent is 0: most sagas never keep a delivery
	}
	switch {
	case r.Unlisted:
		// A branch or an iteration: no by_status entry, so a fork bills
		// no index write per child; its parent lists it.
		it[attrChild] = n(2)
		it[attrSince] = &types.AttributeValueMemberN{Value: strconv.FormatInt(unixNano(r.StatusSince), 10)}
	default:
		if r.Child {
			it[attrChild] = n(1)
		}
		it[attrGSI1PK] = &types.AttributeValueMemberS{Value: statusKey(r.Status, shard(r.SagaID))}
		it[attrGSI1SK] = &types.AttributeValueMemberS{Value: durable.ListPosition(r.StatusSince, r.SagaID)}
	}
	// by_due is sparse: a saga without a timer has no gsi2 keys, so it has
	// no entry, and its writes bill nothing on the index.
	if !r.WakeAt.IsZero() {
		it[attrGSI2PK] = &types.AttributeValueMemberS{Value: dueKey(shard(r.SagaID))}
		it[attrGSI2SK] = &types.AttributeValueMemberS{Value: durable.ListPosition(r.WakeAt, r.SagaID)}
	}
	if expires(r.Status) && s.retention > 0 && !r.Child {
		// A child run is kept: its parent may undo it long after it ended.
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
	r.CreatedAt = timeAttr(it, attrCreated)
	r.UpdatedAt = timeAttr(it, attrUpdated)
	r.StatusSince, _ = timeOf(strAttr(it, attrGSI1SK))
	switch c, _ := numAttr(it, attrChild); c {
	case 1:
		r.Child = true
	case 2:
		r.Child, r.Unlisted = true, true
		r.StatusSince = timeAttr(it, attrSince)
	}
	r.WakeAt, _ = timeOf(strAttr(it, attrGSI2SK)) // absent: zero, no timer
	if n, err := numAttr(it, attrResends); err == nil {
		r.Resends = int(n)
	}
	if n, err := numAttr(it, attrReceived); err == nil {
		r.Received = n
	}
	if b, ok := it[attrState].(*types.AttributeValueMemberB); ok {
		r.State = b.Value
	}
	return r, nil
}

// unixNano is t in Unix ns, clamped to what an int64 holds (1678 to 2262).
func unixNano(t time.Time) int64 {
	at, _ := durable.PositionTime(durable.ListPosition(t, "x"))
	return at.UnixNano()
}

// timeAttr reads a time in Unix ns (before 1970: negative); zero when absent.
func timeAttr(it map[string]types.AttributeValue, name string) time.Time {
	v, ok := it[name].(*types.AttributeValueMemberN)
	if !ok {
		return time.Time{}
	}
	ns, err := strconv.ParseInt(v.Value, 10, 64)
	if err != nil {
		return time.Time{}
	}
	return time.Unix(0, ns).UTC()
}

// timeOf reads the time out of an index sort key (a durable.ListPosition):
// the status since in gsi1sk, the due time in gsi2sk.
func timeOf(sk string) (time.Time, bool) {
	if !durable.ValidListPosition(sk) {
		return time.Time{}, false
	}
	return durable.PositionTime(sk)
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

// SagaUpdate implements durable.Store: a PutItem conditional on the
// version and on the count of kept deliveries (rc, absent when 0).
func (s *Store) SagaUpdate(ctx context.Context, p *durable.SagaUpdateParams) error {
	it, err := s.item(&p.Record)
	if err != nil {
		return err
	}
	in := &dynamodb.PutItemInput{
		TableName: &s.table, Item: it,
		ConditionExpression:       aws.String("#v = :expected AND attribute_not_exists(#rc)"),
		ExpressionAttributeNames:  map[string]string{"#v": attrVersion, "#rc": attrReceived},
		ExpressionAttributeValues: map[string]types.AttributeValue{":expected": n(p.ExpectedVersion)},
		ReturnConsumedCapacity:    types.ReturnConsumedCapacityTotal,
	}
	if p.ExpectedReceived > 0 {
		in.ConditionExpression = aws.String("#v = :expected AND #rc = :rc")
		in.ExpressionAttributeValues[":rc"] = n(p.ExpectedReceived)
	}
	_, err = s.client.PutItem(ctx, in)
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

// SagaSetResends implements durable.Store: an UpdateItem that sets rs,
// conditional on the version and on rs as read (absent is 0). It writes no
// index entry.
func (s *Store) SagaSetResends(ctx context.Context, p *durable.SagaSetResendsParams) error {
	if p.From < 0 || p.To < 0 {
		return fmt.Errorf("saga %s: re-send counts %d and %d: must not be negative", p.SagaID, p.From, p.To)
	}
	cond := "#v = :v AND #rs = :from"
	if p.From == 0 {
		cond = "#v = :v AND (attribute_not_exists(#rs) OR #rs = :from)"
	}
	_, err := s.client.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName: &s.table, Key: sagaKey(p.SagaID),
		UpdateExpression:          aws.String("SET #rs = :to"),
		ConditionExpression:       aws.String(cond),
		ExpressionAttributeNames:  map[string]string{"#rs": attrResends, "#v": attrVersion},
		ExpressionAttributeValues: map[string]types.AttributeValue{":from": n(uint64(p.From)), ":to": n(uint64(p.To)), ":v": n(p.Version)},
		ReturnConsumedCapacity:    types.ReturnConsumedCapacityTotal,
	})
	err = interpretError(err)
	if errors.Is(err, durable.ErrConflict) {
		if _, gerr := s.SagaGet(ctx, &durable.SagaGetParams{SagaID: p.SagaID}); errors.Is(gerr, durable.ErrNotFound) {
			return gerr
		}
		return fmt.Errorf("saga %s is not at version %d with %d re-sends: %w", p.SagaID, p.Version, p.From, durable.ErrConflict)
	}
	return wrap(err, "set the re-sends of saga %s", p.SagaID)
}

// MaxListLimit is the most sagas one SagaList or SagaListDue page holds
// here.
const MaxListLimit = 1000

// listConcurrency bounds the shard queries one listing runs at once.
const listConcurrency = 8

// pageLimit is a listing's Limit: 100 when not set, at most MaxListLimit.
func pageLimit(limit int) int {
	if limit <= 0 {
		return 100
	}
	return min(limit, MaxListLimit)
}

// SagaList implements durable.Store: a query per shard of each status
// asked for, merged newest first (see the package doc).
func (s *Store) SagaList(ctx context.Context, p *durable.SagaListParams) (*durable.SagaListResult, error) {
	limit := pageLimit(p.Limit)
	if p.Cursor != "" && !durable.ValidListPosition(p.Cursor) {
		return nil, fmt.Errorf("list sagas: bad cursor %q", p.Cursor)
	}
	if p.Status != "" && !p.Status.Valid() {
		return nil, fmt.Errorf("list sagas: unknown status %q", p.Status)
	}
	// Every entry listed sorts below bound: the cursor, the time bound, or both.
	bound := p.Cursor
	if !p.EnteredBefore.IsZero() {
		if b := positionBound(p.EnteredBefore); bound == "" || b < bound {
			bound = b
		}
	}
	statuses := []durable.Status{p.Status}
	if p.Status == "" {
		statuses = durable.Statuses()
	}
	var readers []*shardReader
	for _, st := range statuses {
		for sh := range Shards {
			readers = append(readers, &shardReader{s: s, index: byStatus, key: statusKey(st, sh), below: bound})
		}
	}
	out, err := merge(ctx, readers, limit)
	if err != nil {
		return nil, wrap(err, "list sagas")
	}
	res := &durable.SagaListResult{}
	for _, e := range out[:min(limit, len(out))] {
		id := strings.TrimPrefix(strAttr(e.item, attrPK), "SAGA#")
		since, _ := timeOf(e.pos)
		res.Sagas = append(res.Sagas, durable.SagaSummary{SagaID: id, Name: strAttr(e.item, attrName), Status: durable.Status(strAttr(e.item, attrStatus)),
			DefinitionHash: strAttr(e.item, attrDef), CreatedAt: timeAttr(e.item, attrCreated), StatusSince: since})
	}
	// One more than a page was taken when there is more.
	if len(out) > limit {
		res.NextCursor = out[limit-1].pos
	}
	return res, nil
}

// SagaListDue implements durable.Store: a query per shard of by_due,
// merged earliest first (see the package doc). The cursor is the gsi2sk
// of the last saga returned.
func (s *Store) SagaListDue(ctx context.Context, p *durable.SagaListDueParams) (*durable.SagaListDueResult, error) {
	if p.Before.IsZero() {
		return nil, errors.New("list due timers: a Before time is required")
	}
	if p.Cursor != "" && !durable.ValidListPosition(p.Cursor) {
		return nil, fmt.Errorf("list due timers: bad cursor %q", p.Cursor)
	}
	limit := pageLimit(p.Limit)
	below := positionBound(p.Before)
	res := &durable.SagaListDueResult{}
	if p.Cursor != "" && p.Cursor >= below {
		return res, nil // the cursor is past the bound: nothing is between them
	}
	readers := make([]*shardReader, Shards)
	for sh := range readers {
		readers[sh] = &shardReader{s: s, index: byDue, key: dueKey(sh), forward: true, after: p.Cursor, below: below}
	}
	out, err := merge(ctx, readers, limit)
	if err != nil {
		return nil, wrap(err, "list due timers")
	}
	for _, e := range out[:min(limit, len(out))] {
		at, _ := timeOf(e.pos)
		res.Sagas = append(res.Sagas, durable.SagaDue{SagaID: strings.TrimPrefix(strAttr(e.item, attrPK), "SAGA#"), WakeAt: at})
	}
	if len(out) > limit {
		res.NextCursor = out[limit-1].pos
	}
	return res, nil
}

// positionBound is the least index sort key of time t: "<t>#", below every
// entry of t (an id follows the #) and above every entry before t. An
// entry is before t exactly when its sort key is below it.
func positionBound(t time.Time) string {
	return durable.ListPosition(t, "")
}

// indexKeys names a secondary index and its key attributes.
type indexKeys struct {
	name, pk, sk string
}

var (
	byStatus = indexKeys{IndexByStatus, attrGSI1PK, attrGSI1SK}
	byDue    = indexKeys{IndexByDue, attrGSI2PK, attrGSI2SK}
)

// listed is one index entry read by a listing.
type listed struct {
	pos  string                          // its index sort key, a durable.ListPosition
	item map[string]types.AttributeValue // the entry: the keys and what the index projects
}

// shardReader reads one index partition key in pages, newest first or,
// forward, oldest first, keeping the entries whose sort key is above after
// and below below (either "": unbounded).
type shardReader struct {
	s            *Store
	index        indexKeys
	key          string // the partition key read
	forward      bool   // ascending sort keys
	after, below string
	buf          []listed                        // read, not yet merged
	start        map[string]types.AttributeValue // where the next page starts
	want         int                             // entries the next page asks for
	done         bool                            // read to its end
}

// merge merges the shards' entries in their order (every reader reads the
// same way), up to limit+1 of them: one more than a page tells there is
// more. It reads each shard a few entries at a time: a page reads about
// what it returns plus a few entries per shard, not a page's worth from
// every shard. A shard that runs dry while it still has entries reads
// again, twice as many each time.
func merge(ctx context.Context, readers []*shardReader, limit int) ([]listed, error) {
	chunk := max(2, (limit+1+len(readers)-1)/len(readers))
	for _, r := range readers {
		r.want = chunk
	}
	var out []listed
	for len(out) <= limit {
		if err := fill(ctx, readers); err != nil {
			return nil, err
		}
		var next *shardReader
		for _, r := range readers {
			if len(r.buf) > 0 && (next == nil || r.precedes(next)) {
				next = r
			}
		}
		if next == nil {
			break // every shard read to its end
		}
		out = append(out, next.buf[0])
		next.buf = next.buf[1:]
	}
	return out, nil
}

// precedes reports whether r's next entry comes before o's in the order
// both read.
func (r *shardReader) precedes(o *shardReader) bool {
	if r.forward {
		return r.buf[0].pos < o.buf[0].pos
	}
	return r.buf[0].pos > o.buf[0].pos
}

// fill reads the next page of every shard whose entries are all merged and
// that has more, at most listConcurrency at a time.
func fill(ctx context.Context, readers []*shardReader) error {
	var wg sync.WaitGroup
	sem := make(chan struct{}, listConcurrency)
	errs := make([]error, len(readers))
	for i, r := range readers {
		if len(r.buf) > 0 || r.done {
			continue
		}
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			// A page may come back empty with more behind it: read on.
			for len(r.buf) == 0 && !r.done && errs[i] == nil {
				errs[i] = r.read(ctx)
			}
		})
	}
	wg.Wait()
	return errors.Join(errs...)
}

// read reads the shard's next page. A key condition holds one comparison
// of the sort key, and BETWEEN includes both ends (Developer Guide, "Key
// condition expressions for the Query operation"): with both bounds it
// asks for the closed range and drops an entry equal to either (the
// cursor's own entry, in its shard).
func (r *shardReader) read(ctx context.Context) error {
	in := &dynamodb.QueryInput{
		TableName: &r.s.table, IndexName: aws.String(r.index.name),
		KeyConditionExpression:    aws.String("#pk = :pk"),
		ExpressionAttributeNames:  map[string]string{"#pk": r.index.pk},
		ExpressionAttributeValues: map[string]types.AttributeValue{":pk": &types.AttributeValueMemberS{Value: r.key}},
		ScanIndexForward:          aws.Bool(r.forward),
		Limit:                     aws.Int32(int32(r.want)),
		ExclusiveStartKey:         r.start,
		ReturnConsumedCapacity:    types.ReturnConsumedCapacityTotal,
	}
	var cond string
	switch {
	case r.after != "" && r.below != "":
		cond = " AND #sk BETWEEN :after AND :below"
	case r.after != "":
		cond = " AND #sk > :after"
	case r.below != "":
		cond = " AND #sk < :below"
	}
	if cond != "" {
		in.KeyConditionExpression = aws.String(*in.KeyConditionExpression + cond)
		in.ExpressionAttributeNames["#sk"] = r.index.sk
	}
	if r.after != "" {
		in.ExpressionAttributeValues[":after"] = &types.AttributeValueMemberS{Value: r.after}
	}
	if r.below != "" {
		in.ExpressionAttributeValues[":below"] = &types.AttributeValueMemberS{Value: r.below}
	}
	page, err := r.s.client.Query(ctx, in)
	if err != nil {
		return interpretError(err)
	}
	for _, it := range page.Items {
		sk := strAttr(it, r.index.sk)
		if _, ok := timeOf(sk); !ok {
			return fmt.Errorf("index entry %s: bad sort key %q", r.key, sk)
		}
		if sk == r.after || sk == r.below {
			continue
		}
		r.buf = append(r.buf, listed{pos: sk, item: it})
	}
	r.start = page.LastEvaluatedKey
	r.done = page.LastEvaluatedKey == nil
	r.want = min(2*r.want, MaxListLimit+1)
	return nil
}

// DefinitionPut implements durable.Store. It reads first (eventually
// consistent, half a read unit per 4 KB) and writes only a definition that
// is not there: every process that starts sagas stores its definitions
// once, and a conditional put that fails would bill the stored item's size
// in write units on the definition's one partition, for every process.
func (s *Store) DefinitionPut(ctx context.Context, p *durable.DefinitionPutParams) error {
	stored, err := s.definitionGet(ctx, p.Hash, false)
	switch {
	case err == nil:
		return sameSource(stored, p)
	case !errors.Is(err, durable.ErrNotFound):
		return err
	}
	it := defKey(p.Hash)
	it[attrName] = &types.AttributeValueMemberS{Value: p.Name}
	it[attrSource] = &types.AttributeValueMemberB{Value: p.Source}
	_, err = s.client.PutItem(ctx, &dynamodb.PutItemInput{
		TableName: &s.table, Item: it,
		ConditionExpression:      aws.String("attribute_not_exists(#pk)"),
		ExpressionAttributeNames: map[string]string{"#pk": attrPK},
		ReturnConsumedCapacity:   types.ReturnConsumedCapacityTotal,
	})
	if err = interpretError(err); errors.Is(err, durable.ErrConflict) {
		// Stored since the read: by another starter, or with another source.
		stored, err := s.definitionGet(ctx, p.Hash, true)
		if err != nil {
			return err
		}
		return sameSource(stored, p)
	}
	return wrap(err, "put definition %s", p.Hash)
}

func sameSource(stored *durable.DefinitionRecord, p *durable.DefinitionPutParams) error {
	if string(stored.Source) != string(p.Source) {
		return fmt.Errorf("definition %s: stored with a different source: %w", p.Hash, durable.ErrConflict)
	}
	return nil
}

// DefinitionGet implements durable.Store. Definitions never change once
// written, so it reads eventually consistent (half the read units: a
// worker's first message of a hash reads it, and a burst of new execution
// environments all read the same item), and reads again consistently only
// when that finds nothing: a definition written a moment ago.
func (s *Store) DefinitionGet(ctx context.Context, p *durable.DefinitionGetParams) (*durable.DefinitionRecord, error) {
	d, err := s.definitionGet(ctx, p.Hash, false)
	if errors.Is(err, durable.ErrNotFound) {
		d, err = s.definitionGet(ctx, p.Hash, true)
	}
	return d, err
}

func (s *Store) definitionGet(ctx context.Context, hash string, consistent bool) (*durable.DefinitionRecord, error) {
	out, err := s.client.GetItem(ctx, &dynamodb.GetItemInput{
		TableName: &s.table, Key: defKey(hash), ConsistentRead: aws.Bool(consistent),
		ReturnConsumedCapacity: types.ReturnConsumedCapacityTotal,
	})
	if err != nil {
		return nil, wrap(interpretError(err), "get definition %s", hash)
	}
	if out.Item == nil {
		return nil, fmt.Errorf("definition %s: %w", hash, durable.ErrNotFound)
	}
	d := &durable.DefinitionRecord{Hash: hash, Name: strAttr(out.Item, attrName)}
	if b, ok := out.Item[attrSource].(*types.AttributeValueMemberB); ok {
		d.Source = b.Value
	}
	return d, nil
}

// DefinitionDeploy implements durable.Store. It reads the definition
// (DefinitionGet) and puts the name's item, which holds a copy of its
// source, so that a start by name reads one item. The put is not
// conditional: deploying the current version again writes the same item.
func (s *Store) DefinitionDeploy(ctx context.Context, p *durable.DefinitionDeployParams) error {
	if p.Name == "" {
		return errors.New("deploy: a name is required")
	}
	d, err := s.DefinitionGet(ctx, &durable.DefinitionGetParams{Hash: p.Hash})
	if err != nil {
		return fmt.Errorf("deploy %s: %w", p.Name, err)
	}
	if d.Name != p.Name {
		return fmt.Errorf("deploy %s: definition %s is of saga %s: %w", p.Name, p.Hash, d.Name, durable.ErrConflict)
	}
	it := currentKey(p.Name)
	it[attrDef] = &types.AttributeValueMemberS{Value: p.Hash}
	it[attrSource] = &types.AttributeValueMemberB{Value: d.Source}
	_, err = s.client.PutItem(ctx, &dynamodb.PutItemInput{
		TableName: &s.table, Item: it, ReturnConsumedCapacity: types.ReturnConsumedCapacityTotal,
	})
	return wrap(interpretError(err), "deploy %s", p.Name)
}

// DefinitionCurrent implements durable.Store: one GetItem of the name's
// item, eventually consistent (half a read unit per 4 KB of source) unless
// Consistent, and consistent again when that finds nothing, so that a
// name deployed a moment ago is found.
func (s *Store) DefinitionCurrent(ctx context.Context, p *durable.DefinitionCurrentParams) (*durable.DefinitionRecord, error) {
	d, err := s.definitionCurrent(ctx, p.Name, p.Consistent)
	if errors.Is(err, durable.ErrNotFound) && !p.Consistent {
		d, err = s.definitionCurrent(ctx, p.Name, true)
	}
	return d, err
}

func (s *Store) definitionCurrent(ctx context.Context, name string, consistent bool) (*durable.DefinitionRecord, error) {
	out, err := s.client.GetItem(ctx, &dynamodb.GetItemInput{
		TableName: &s.table, Key: currentKey(name), ConsistentRead: aws.Bool(consistent),
		ReturnConsumedCapacity: types.ReturnConsumedCapacityTotal,
	})
	if err != nil {
		return nil, wrap(interpretError(err), "get current definition of %s", name)
	}
	if out.Item == nil {
		return nil, fmt.Errorf("saga %s: no definition deployed: %w", name, durable.ErrNotFound)
	}
	d := &durable.DefinitionRecord{Hash: strAttr(out.Item, attrDef), Name: name}
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
