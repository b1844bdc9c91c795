// Package ddbmeter is a meter on the wire for DynamoDB emulators: an HTTP
// proxy that sits between an application and the emulator (dynalite),
// reads the DynamoDB JSON protocol, and computes what DynamoDB would bill
// for each request, index writes included, which the emulators leave out
// of their ConsumedCapacity.
//
// It gathers the items before and after each write itself, independently
// of any SDK middleware: its own strongly consistent GetItem on the
// backend before a write and, for an UpdateItem or a transaction's
// Update, after it; the request's item is the item after a PutItem. The
// writes to one item are serialised through the meter so no other write
// falls between its reads and the write. The size and unit rules are
// package accounting's, so both meters bill by the same rules.
//
// The meter's own requests reuse the client's Authorization and X-Amz-Date
// headers, which the emulators check for form only: it meters emulators,
// not DynamoDB.
package ddbmeter

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/lambdasaga/lambdasaga/internal/accounting"
)

const targetPrefix = "DynamoDB_20120810."

// Config sets up a Meter.
type Config struct {
	// Backend is the emulator's endpoint, e.g. http://127.0.0.1:4567;
	// required.
	Backend string
	// Client makes the requests to the backend; default a client that
	// passes bodies through untouched (no compression).
	Client *http.Client
}

// Meter is the proxy, an http.Handler. It is safe for concurrent use.
type Meter struct {
	backend *url.URL
	client  *http.Client

	mu     sync.Mutex
	stats  map[string]*accounting.Stat
	writes []Write
	tables map[string]accounting.TableSchema
	locks  map[string]*itemLock
}

// Write is one item write the meter billed, with the items it saw.
type Write struct {
	Op     string // "PutItem", "UpdateItem", "DeleteItem", "BatchWriteItem", "TransactWriteItems"
	Table  string
	Before map[string]types.AttributeValue // nil: no item
	After  map[string]types.AttributeValue // nil: no item (deleted, or the condition failed)
	// ConditionFailed: the write did not happen, its condition failed.
	ConditionFailed bool
	Bill            accounting.Bill
}

type itemLock struct {
	mu    sync.Mutex
	users int
}

// New checks cfg and returns a meter.
func New(cfg Config) (*Meter, error) {
	u, err := url.Parse(cfg.Backend)
	if err != nil || u.Scheme == "" || u.Host == "" {
		return nil, fmt.Errorf("ddbmeter: backend %q: want an URL such as http://127.0.0.1:4567", cfg.Backend)
	}
	if cfg.Client == nil {
		cfg.Client = &http.Client{Transport: &http.Transport{DisableCompression: true}}
	}
	return &Meter{backend: u, client: cfg.Client, stats: map[string]*accounting.Stat{},
		tables: map[string]accounting.TableSchema{}, locks: map[string]*itemLock{}}, nil
}

// Snapshot returns the counts so far by "DynamoDB.Operation", as
// accounting.Counter keys them, so the two compare directly. Calls and
// Errors count the requests and those answered with an error; the Billed
// fields and Unbilled are as in accounting.Stat; ReadUnits and WriteUnits
// (what the emulator reports) stay zero.
func (m *Meter) Snapshot() map[string]accounting.Stat {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make(map[string]accounting.Stat, len(m.stats))
	for k, s := range m.stats {
		cp := *s
		cp.BilledIndexes = maps.Clone(s.BilledIndexes)
		out[k] = cp
	}
	return out
}

// Writes returns the item writes billed so far, in the order they ended.
func (m *Meter) Writes() []Write {
	m.mu.Lock()
	defer m.mu.Unlock()
	return slices.Clone(m.writes)
}

// Reset forgets every count and write (not the tables' schemas).
func (m *Meter) Reset() {
	m.mu.Lock()
	m.stats = map[string]*accounting.Stat{}
	m.writes = nil
	m.mu.Unlock()
}

// Report writes the counts, one line per operation, sorted.
func (m *Meter) Report(w io.Writer) {
	snap := m.Snapshot()
	var total accounting.Stat
	for _, op := range slices.Sorted(maps.Keys(snap)) {
		s := snap[op]
		fmt.Fprintf(w, "%-30s %5d calls %4d errors  billed: %8.1f RRU %8.1f WRU (index %.1f%s)  unbilled %d\n",
			op, s.Calls, s.Errors, s.BilledReadUnits, s.BilledWriteUnits, s.BilledIndexWriteUnits, byIndex(s.BilledIndexes), s.Unbilled)
		total.Calls += s.Calls
		total.BilledReadUnits += s.BilledReadUnits
		total.BilledWriteUnits += s.BilledWriteUnits
		total.BilledIndexWriteUnits += s.BilledIndexWriteUnits
		total.Unbilled += s.Unbilled
	}
	fmt.Fprintf(w, "%-30s %5d calls              billed: %8.1f RRU %8.1f WRU (index %.1f)  unbilled %d\n",
		"total", total.Calls, total.BilledReadUnits, total.BilledWriteUnits, total.BilledIndexWriteUnits, total.Unbilled)
}

func byIndex(ix map[string]float64) string {
	var b strings.Builder
	for _, name := range slices.Sorted(maps.Keys(ix)) {
		fmt.Fprintf(&b, ", %s %.1f", name, ix[name])
	}
	return b.String()
}

// exchange is one request passed to the backend and its answer.
type exchange struct {
	header http.Header // the client's headers, reused for the meter's own requests
	status int
	body   []byte
	respH  http.Header
}

// errorType is the answer's error type ("ConditionalCheckFailedException"),
// empty on success.
func (x *exchange) errorType() string {
	if x.status == http.StatusOK {
		return ""
	}
	var e struct {
		Type string `json:"__type"`
	}
	_ = json.Unmarshal(x.body, &e)
	_, t, _ := strings.Cut(e.Type, "#")
	if t == "" {
		t = e.Type
	}
	return t
}

// ServeHTTP implements http.Handler: it passes the request to the backend
// and its answer back untouched, billing it on the way.
func (m *Meter) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	op := strings.TrimPrefix(r.Header.Get("X-Amz-Target"), targetPrefix)
	x := &exchange{header: r.Header}
	forward := func() error { return m.send(r.Context(), r.URL, x, body) }
	var (
		bills    []Write
		unbilled bool
	)
	switch op {
	case "PutItem", "UpdateItem", "DeleteItem":
		bills, unbilled, err = m.single(r.Context(), op, x, body, forward)
	case "BatchWriteItem":
		bills, unbilled, err = m.batch(r.Context(), x, body, forward)
	case "TransactWriteItems":
		bills, unbilled, err = m.transaction(r.Context(), x, body, forward)
	case "GetItem", "Query", "Scan":
		if err = forward(); err == nil {
			var b *accounting.Bill
			b, unbilled = readBill(op, body, x)
			if b != nil {
				bills = []Write{{Op: op, Bill: *b}}
			}
		}
	case "CreateTable", "DeleteTable", "UpdateTable":
		var t struct{ TableName string }
		_ = json.Unmarshal(body, &t)
		m.mu.Lock()
		delete(m.tables, t.TableName)
		m.mu.Unlock()
		err = forward()
	case "":
		err = forward()
	default:
		// Other data-plane calls (BatchGetItem, TransactGetItems, PartiQL)
		// are not metered: unbilled. Control-plane calls bill nothing.
		switch op {
		case "BatchGetItem", "TransactGetItems", "ExecuteStatement", "BatchExecuteStatement", "ExecuteTransaction":
			unbilled = true
		}
		err = forward()
	}
	if err != nil {
		http.Error(w, "ddbmeter: "+err.Error(), http.StatusBadGateway)
		return
	}
	m.record(op, x, bills, unbilled)
	for k, v := range x.respH {
		w.Header()[k] = v
	}
	w.WriteHeader(x.status)
	_, _ = w.Write(x.body)
}

func (m *Meter) record(op string, x *exchange, bills []Write, unbilled bool) {
	if op == "" {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	s := m.stats["DynamoDB."+op]
	if s == nil {
		s = &accounting.Stat{}
		m.stats["DynamoDB."+op] = s
	}
	s.Calls++
	if x.status != http.StatusOK {
		s.Errors++
	}
	if unbilled {
		s.Unbilled++
		return
	}
	for _, b := range bills {
		s.AddBill(b.Bill)
		if b.Table != "" {
			m.writes = append(m.writes, b)
		}
	}
}

// send passes a request to the backend, filling x with the answer.
func (m *Meter) send(ctx context.Context, path *url.URL, x *exchange, body []byte) error {
	u := *m.backend
	u.Path, u.RawQuery = path.Path, path.RawQuery
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, u.String(), bytes.NewReader(body))
	if err != nil {
		return err
	}
	for k, v := range x.header {
		if k != "Content-Length" && k != "Host" {
			req.Header[k] = v
		}
	}
	resp, err := m.client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	x.body, err = io.ReadAll(resp.Body)
	x.status, x.respH = resp.StatusCode, resp.Header
	return err
}

// call makes the meter's own request of op to the backend, with the
// client's credentials headers, and decodes a successful answer into out.
func (m *Meter) call(ctx context.Context, client http.Header, op string, in, out any) error {
	body, err := json.Marshal(in)
	if err != nil {
		return err
	}
	h := http.Header{"Content-Type": {"application/x-amz-json-1.0"}, "X-Amz-Target": {targetPrefix + op}}
	for _, k := range []string{"Authorization", "X-Amz-Date", "X-Amz-Security-Token"} {
		if v := client.Get(k); v != "" {
			h.Set(k, v)
		}
	}
	x := &exchange{header: h}
	if err := m.send(ctx, &url.URL{Path: "/"}, x, body); err != nil {
		return err
	}
	if x.status != http.StatusOK {
		return fmt.Errorf("%s: %d %s", op, x.status, x.body)
	}
	return json.Unmarshal(x.body, out)
}

// schema is the table's key and indexes, from the meter's own
// DescribeTable the first time the table is written.
func (m *Meter) schema(ctx context.Context, client http.Header, table string) (accounting.TableSchema, error) {
	m.mu.Lock()
	s, ok := m.tables[table]
	m.mu.Unlock()
	if ok {
		return s, nil
	}
	var out struct{ Table json.RawMessage }
	if err := m.call(ctx, client, "DescribeTable", map[string]string{"TableName": table}, &out); err != nil {
		return s, err
	}
	var d types.TableDescription
	if err := decodeDescription(out.Table, &d); err != nil {
		return s, err
	}
	s = accounting.SchemaFromDescription(&d)
	m.mu.Lock()
	m.tables[table] = s
	m.mu.Unlock()
	return s, nil
}

// decodeDescription reads the parts of a table description billing
// needs; the JSON field names are the SDK's field names.
func decodeDescription(raw json.RawMessage, d *types.TableDescription) error {
	var t struct {
		KeySchema []struct{ AttributeName, KeyType string }
		Indexes   []index `json:"GlobalSecondaryIndexes"`
		Locals    []index `json:"LocalSecondaryIndexes"`
	}
	if err := json.Unmarshal(raw, &t); err != nil {
		return err
	}
	d.KeySchema = keySchema(t.KeySchema)
	for _, ix := range t.Indexes {
		d.GlobalSecondaryIndexes = append(d.GlobalSecondaryIndexes, types.GlobalSecondaryIndexDescription{IndexName: &ix.IndexName, KeySchema: keySchema(ix.KeySchema), Projection: ix.projection()})
	}
	for _, ix := range t.Locals {
		d.LocalSecondaryIndexes = append(d.LocalSecondaryIndexes, types.LocalSecondaryIndexDescription{IndexName: &ix.IndexName, KeySchema: keySchema(ix.KeySchema), Projection: ix.projection()})
	}
	return nil
}

type index struct {
	IndexName  string
	KeySchema  []struct{ AttributeName, KeyType string }
	Projection struct {
		ProjectionType   string
		NonKeyAttributes []string
	}
}

func (ix index) projection() *types.Projection {
	return &types.Projection{ProjectionType: types.ProjectionType(ix.Projection.ProjectionType), NonKeyAttributes: ix.Projection.NonKeyAttributes}
}

func keySchema(ks []struct{ AttributeName, KeyType string }) []types.KeySchemaElement {
	out := make([]types.KeySchemaElement, len(ks))
	for i, k := range ks {
		out[i] = types.KeySchemaElement{AttributeName: &k.AttributeName, KeyType: types.KeyType(k.KeyType)}
	}
	return out
}

// getItem is the meter's own strongly consistent read of one item.
func (m *Meter) getItem(ctx context.Context, client http.Header, table string, key json.RawMessage) (map[string]types.AttributeValue, error) {
	var out struct{ Item json.RawMessage }
	if err := m.call(ctx, client, "GetItem", map[string]any{"TableName": table, "Key": key, "ConsistentRead": true}, &out); err != nil {
		return nil, err
	}
	return decodeItem(out.Item)
}

// lock takes the locks of the named items, in order, and returns their
// release.
func (m *Meter) lock(names []string) func() {
	names = slices.Compact(slices.Sorted(slices.Values(names)))
	held := make([]*itemLock, len(names))
	for i, n := range names {
		m.mu.Lock()
		l := m.locks[n]
		if l == nil {
			l = &itemLock{}
			m.locks[n] = l
		}
		l.users++
		m.mu.Unlock()
		l.mu.Lock()
		held[i] = l
	}
	return func() {
		for i, l := range held {
			l.mu.Unlock()
			m.mu.Lock()
			if l.users--; l.users == 0 {
				delete(m.locks, names[i])
			}
			m.mu.Unlock()
		}
	}
}

// target is one item a write request touches.
type target struct {
	kind   string // Put, Update, Delete or ConditionCheck
	table  string
	key    json.RawMessage
	item   json.RawMessage // Put: the item written
	lock   string
	before map[string]types.AttributeValue
}

// newTarget reads the table, key and item of one write.
func (m *Meter) newTarget(ctx context.Context, client http.Header, kind, table string, key, item json.RawMessage) (*target, error) {
	t := &target{kind: kind, table: table, key: key, item: item}
	if kind == "Put" {
		s, err := m.schema(ctx, client, table)
		if err != nil {
			return nil, err
		}
		var fields map[string]json.RawMessage
		if err := json.Unmarshal(item, &fields); err != nil {
			return nil, err
		}
		if t.key, err = keyJSON(fields, s.Key); err != nil {
			return nil, err
		}
	}
	var k map[string]json.RawMessage
	if err := json.Unmarshal(t.key, &k); err != nil {
		return nil, fmt.Errorf("key: %w", err)
	}
	t.lock = lockName(table, k)
	return t, nil
}

// bill is what the write of t billed once it succeeded: the item after is
// the item put, none, or (an update) the meter's own read.
func (m *Meter) bill(ctx context.Context, client http.Header, op string, t *target) (Write, error) {
	w := Write{Op: op, Table: t.table, Before: t.before}
	s, err := m.schema(ctx, client, t.table)
	if err != nil {
		return w, err
	}
	switch t.kind {
	case "Put":
		w.After, err = decodeItem(t.item)
	case "Update":
		w.After, err = m.getItem(ctx, client, t.table, t.key)
	case "ConditionCheck":
		// writes nothing; billed as a write of the item's size
		w.After = t.before
		w.Bill = accounting.FailedConditionBill(t.before)
		return w, nil
	}
	if err != nil {
		return w, err
	}
	w.Bill = s.WriteBill(w.Before, w.After)
	return w, nil
}

// withBefore locks the targets, reads each item before the write, runs
// forward and unlocks.
func (m *Meter) withBefore(ctx context.Context, client http.Header, ts []*target, forward func() error, after func() error) error {
	names := make([]string, len(ts))
	for i, t := range ts {
		names[i] = t.lock
	}
	unlock := m.lock(names)
	defer unlock()
	for _, t := range ts {
		var err error
		if t.before, err = m.getItem(ctx, client, t.table, t.key); err != nil {
			// The client gets the backend's answer (a missing table, say);
			// the call is unbilled.
			if ferr := forward(); ferr != nil {
				return ferr
			}
			return err
		}
	}
	if err := forward(); err != nil {
		return err
	}
	return after()
}

// single meters PutItem, UpdateItem and DeleteItem.
func (m *Meter) single(ctx context.Context, op string, x *exchange, body []byte, forward func() error) ([]Write, bool, error) {
	var in struct {
		TableName string
		Item, Key json.RawMessage
	}
	if err := json.Unmarshal(body, &in); err != nil {
		return nil, true, forward()
	}
	t, err := m.newTarget(ctx, x.header, strings.TrimSuffix(op, "Item"), in.TableName, in.Key, in.Item)
	if err != nil {
		return nil, true, forward()
	}
	var w Write
	err = m.withBefore(ctx, x.header, []*target{t}, forward, func() error {
		switch x.errorType() {
		case "":
			var err error
			w, err = m.bill(ctx, x.header, op, t)
			return err
		case "ConditionalCheckFailedException":
			w = Write{Op: op, Table: t.table, Before: t.before, ConditionFailed: true, Bill: accounting.FailedConditionBill(t.before)}
		}
		return nil
	})
	if err != nil || w.Op == "" {
		return nil, err != nil, errIfUnsent(err, x)
	}
	return []Write{w}, false, nil
}

// batch meters BatchWriteItem: each put or delete the backend processed,
// as its own PutItem or DeleteItem.
func (m *Meter) batch(ctx context.Context, x *exchange, body []byte, forward func() error) ([]Write, bool, error) {
	type request struct {
		PutRequest    *struct{ Item json.RawMessage }
		DeleteRequest *struct{ Key json.RawMessage }
	}
	var in struct{ RequestItems map[string][]request }
	if err := json.Unmarshal(body, &in); err != nil {
		return nil, true, forward()
	}
	var ts []*target
	for _, table := range slices.Sorted(maps.Keys(in.RequestItems)) {
		for _, r := range in.RequestItems[table] {
			var t *target
			var err error
			switch {
			case r.PutRequest != nil:
				t, err = m.newTarget(ctx, x.header, "Put", table, nil, r.PutRequest.Item)
			case r.DeleteRequest != nil:
				t, err = m.newTarget(ctx, x.header, "Delete", table, r.DeleteRequest.Key, nil)
			}
			if err != nil || t == nil {
				return nil, true, forward()
			}
			ts = append(ts, t)
		}
	}
	var ws []Write
	err := m.withBefore(ctx, x.header, ts, forward, func() error {
		if x.errorType() != "" {
			return nil
		}
		var out struct{ UnprocessedItems map[string][]request }
		if err := json.Unmarshal(x.body, &out); err != nil {
			return err
		}
		left := map[string]bool{}
		for table, rs := range out.UnprocessedItems {
			for _, r := range rs {
				var t *target
				if r.PutRequest != nil {
					t, _ = m.newTarget(ctx, x.header, "Put", table, nil, r.PutRequest.Item)
				} else if r.DeleteRequest != nil {
					t, _ = m.newTarget(ctx, x.header, "Delete", table, r.DeleteRequest.Key, nil)
				}
				if t != nil {
					left[t.lock] = true
				}
			}
		}
		for _, t := range ts {
			if left[t.lock] {
				continue
			}
			w, err := m.bill(ctx, x.header, "BatchWriteItem", t)
			if err != nil {
				return err
			}
			ws = append(ws, w)
		}
		return nil
	})
	if err != nil {
		return nil, true, errIfUnsent(err, x)
	}
	return ws, false, nil
}

// transaction meters TransactWriteItems: each item written bills twice
// its table units ("Capacity unit consumption for write operations":
// transactional writes take 2 units per KB); index writes are billed as
// for a single write. A cancelled transaction is unbilled.
func (m *Meter) transaction(ctx context.Context, x *exchange, body []byte, forward func() error) ([]Write, bool, error) {
	type action struct {
		TableName string
		Key, Item json.RawMessage
	}
	var in struct {
		TransactItems []struct{ Put, Update, Delete, ConditionCheck *action }
	}
	if err := json.Unmarshal(body, &in); err != nil {
		return nil, true, forward()
	}
	var ts []*target
	for _, it := range in.TransactItems {
		var t *target
		var err error
		switch {
		case it.Put != nil:
			t, err = m.newTarget(ctx, x.header, "Put", it.Put.TableName, nil, it.Put.Item)
		case it.Update != nil:
			t, err = m.newTarget(ctx, x.header, "Update", it.Update.TableName, it.Update.Key, nil)
		case it.Delete != nil:
			t, err = m.newTarget(ctx, x.header, "Delete", it.Delete.TableName, it.Delete.Key, nil)
		case it.ConditionCheck != nil:
			t, err = m.newTarget(ctx, x.header, "ConditionCheck", it.ConditionCheck.TableName, it.ConditionCheck.Key, nil)
		}
		if err != nil || t == nil {
			return nil, true, forward()
		}
		ts = append(ts, t)
	}
	var ws []Write
	err := m.withBefore(ctx, x.header, ts, forward, func() error {
		if x.errorType() != "" {
			return errCancelled
		}
		for _, t := range ts {
			w, err := m.bill(ctx, x.header, "TransactWriteItems", t)
			if err != nil {
				return err
			}
			w.Bill.WriteUnits *= 2
			ws = append(ws, w)
		}
		return nil
	})
	if err != nil {
		return nil, true, errIfUnsent(err, x)
	}
	return ws, false, nil
}

var errCancelled = errors.New("transaction cancelled")

// errIfUnsent keeps an error that stopped the request from reaching the
// backend; once the backend answered, a failure to bill only makes the
// call unbilled.
func errIfUnsent(err error, x *exchange) error {
	if x.status == 0 {
		return err
	}
	return nil
}

// readBill bills a GetItem, Query or Scan from its request and answer, by
// the rules of accounting.Counter: a read of some attributes only, a
// filtered Query or Scan, or a Select other than the default is unbilled.
func readBill(op string, body []byte, x *exchange) (*accounting.Bill, bool) {
	if x.status != http.StatusOK {
		return nil, false
	}
	var in struct {
		ConsistentRead       bool
		ProjectionExpression *string
		AttributesToGet      []string
		Select               string
		IndexName            *string
	}
	if err := json.Unmarshal(body, &in); err != nil {
		return nil, true
	}
	if in.ProjectionExpression != nil || len(in.AttributesToGet) > 0 ||
		in.Select == "COUNT" || in.Select == "SPECIFIC_ATTRIBUTES" || in.Select == "ALL_ATTRIBUTES" && in.IndexName != nil {
		return nil, true
	}
	var out struct {
		Item                json.RawMessage
		Items               []json.RawMessage
		Count, ScannedCount int
	}
	if err := json.Unmarshal(x.body, &out); err != nil || out.Count != out.ScannedCount {
		return nil, true
	}
	size := 0
	if op == "GetItem" {
		out.Items = []json.RawMessage{out.Item}
	}
	for _, raw := range out.Items {
		it, err := decodeItem(raw)
		if err != nil {
			return nil, true
		}
		size += accounting.ItemSize(it)
	}
	return &accounting.Bill{ReadUnits: accounting.ReadUnits(size, in.ConsistentRead)}, false
}
