package dynamo

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/lambdasaga/lambdasaga/durable"
	"github.com/lambdasaga/lambdasaga/internal/accounting"
)

// DynamoDB's per-partition limits (Developer Guide, "Partitions and data
// distribution" and "Burst and adaptive capacity": a single partition
// serves at most 3,000 read units and 1,000 write units per second; a
// partition key of an index counts as on the table).
const (
	partitionWriteUnits = 1000.0
	partitionReadUnits  = 3000.0
)

// shape is a saga's path: the status each of its writes leaves, the
// start's first, and the messages it handles (action steps, compensations
// and timers firing: each reads the item consistently and makes one
// write). timers, when set, tells which writes leave the saga waiting on a
// timer (one per write).
type shape struct {
	name     string
	statuses []durable.Status
	steps    int
	timers   []bool
}

func statuses(runs ...any) []durable.Status {
	var out []durable.Status
	for i := 0; i < len(runs); i += 2 {
		for range runs[i+1].(int) {
			out = append(out, runs[i].(durable.Status))
		}
	}
	return out
}

var shapes = []shape{
	// 10 action steps: the start and 9 results keep running, the 10th succeeds.
	{"10 steps, succeeds", statuses(durable.StatusRunning, 10, durable.StatusSucceeded, 1), 10, nil},
	// One action step: every write changes the status but the start's.
	{"1 step, succeeds", statuses(durable.StatusRunning, 1, durable.StatusSucceeded, 1), 1, nil},
	// The 6th of 10 actions fails for good: 5 compensations follow.
	{"10 steps, the 6th fails, 5 compensations", statuses(durable.StatusRunning, 6, durable.StatusCompensating, 5, durable.StatusCompensated, 1), 11, nil},
	// A wait first: the start enters waiting with a timer (a by_due entry
	// put), the timer fires and the saga runs its one action step (the
	// entry deleted), which succeeds. Every saga passes through by_due.
	{"a wait, then 1 step, succeeds", statuses(durable.StatusWaiting, 1, durable.StatusRunning, 1, durable.StatusSucceeded, 1), 2, []bool{true, false, false}},
}

// load is the units per second each partition key receives.
type load struct {
	write, read map[string]float64
}

func (l load) busiest(m map[string]float64) (string, float64) {
	key, most := "", 0.0
	for _, k := range slices.Sorted(maps.Keys(m)) {
		if m[k] > most {
			key, most = k, m[k]
		}
	}
	return key, most
}

// scaleModel derives the load on every partition key when n sagas of
// shape sh run at rate action steps a second in all, from the items this
// store writes (Store.item) and the table's index (tableInput), billed as
// DynamoDB bills them (accounting). It follows a sample of sagas through
// their writes, puts each unit on the partition key it lands on, and
// scales the sample to the rate: a key that several sampled sagas share
// (an index shard) is shared in the same proportion by all n sagas, so it
// receives the sample's units times the sagas a second each sampled saga
// stands for; a key only one sampled saga touches (its own item) is taken
// as its own, receiving that saga's units over its lifetime. (A key space
// larger than the sample would be taken for keys of their own.) rekey, if
// not nil, rewrites each item first, to model another key design.
func scaleModel(t *testing.T, sh shape, n, rate float64, rekey func(map[string]types.AttributeValue)) load {
	t.Helper()
	if sh.steps != len(sh.statuses)-1 {
		t.Fatalf("%s: %d messages for %d writes after the start", sh.name, sh.steps, len(sh.statuses)-1)
	}
	if sh.timers != nil && len(sh.timers) != len(sh.statuses) {
		t.Fatalf("%s: %d timers for %d writes", sh.name, len(sh.timers), len(sh.statuses))
	}
	const sample = 6400
	schema := accounting.SchemaFromCreateTable(tableInput("sagas"))
	s := &Store{retention: 30 * 24 * time.Hour}
	sagasPerSecond := rate / float64(sh.steps) // = n over a saga's lifetime (n sagas live at once)
	type tally struct {
		units float64
		sagas map[int]bool
	}
	writes, reads := map[string]*tally{}, map[string]*tally{}
	add := func(m map[string]*tally, key string, units float64, saga int) {
		if m[key] == nil {
			m[key] = &tally{sagas: map[int]bool{}}
		}
		m[key].units += units
		m[key].sagas[saga] = true
	}
	state := make([]byte, 480) // a small state, as the order saga's
	t0 := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	for i := range sample {
		id := fmt.Sprintf("order-%08d", i)
		var before map[string]types.AttributeValue
		var since time.Time
		for v, st := range sh.statuses {
			at := t0.Add(time.Duration(v) * time.Second)
			if v == 0 || st != sh.statuses[v-1] {
				since = at
			}
			var wake time.Time
			if sh.timers != nil && sh.timers[v] {
				wake = at.Add(30 * 24 * time.Hour)
			}
			after, err := s.item(&durable.SagaRecord{SagaID: id, Version: uint64(v + 1), Status: st, Name: "order", DefinitionHash: "4f9c2d1e8a7b6c5d4e3f2a1b0c9d8e7f6a5b4c3d2e1f0a9b8c7d6e5f4a3b2c1d",
				CreatedAt: t0, StatusSince: since, UpdatedAt: at, WakeAt: wake, State: state})
			if err != nil {
				t.Fatal(err)
			}
			if rekey != nil {
				rekey(after)
			}
			if v > 0 {
				// The message that made this write read the item first, consistently.
				add(reads, "table "+strAttr(before, attrPK), accounting.ReadUnits(accounting.ItemSize(before), true), i)
			}
			bill := schema.WriteBill(before, after)
			add(writes, "table "+strAttr(after, attrPK), bill.WriteUnits, i)
			// Each index's units land on the partition keys of the entries
			// written: an old entry deleted (it left the index, or its key
			// changed) on its key, the rest on the new entry's.
			for j := range schema.Indexes {
				ix := &schema.Indexes[j]
				u := bill.IndexWriteUnits[ix.Name]
				if u == 0 {
					continue
				}
				if del := schema.IndexWrites(ix, before, nil); del > 0 && (schema.IndexWrites(ix, nil, after) == 0 || !sameKey(ix, before, after)) {
					add(writes, "index "+strAttr(before, ix.Key[0]), del, i)
					u -= del
				}
				if u > 0 {
					add(writes, "index "+strAttr(after, ix.Key[0]), u, i)
				}
			}
			before = after
		}
	}
	rates := func(m map[string]*tally) map[string]float64 {
		out := map[string]float64{}
		for key, t := range m {
			if len(t.sagas) == 1 {
				out[key] = t.units * sagasPerSecond / n // one saga's units over its lifetime
			} else {
				out[key] = t.units * sagasPerSecond / sample
			}
		}
		return out
	}
	return load{write: rates(writes), read: rates(reads)}
}

// sameKey reports whether two items have the same key in the index.
func sameKey(ix *accounting.IndexSchema, a, b map[string]types.AttributeValue) bool {
	for _, k := range ix.Key {
		if !accounting.EqualValues(a[k], b[k]) {
			return false
		}
	}
	return true
}

// only keeps the keys that start with prefix.
func only(m map[string]float64, prefix string) map[string]float64 {
	out := map[string]float64{}
	for k, v := range m {
		if strings.HasPrefix(k, prefix) {
			out[k] = v
		}
	}
	return out
}

// TestScaleModel: no partition key of the table or its indexes receives
// more than DynamoDB serves per partition when 100,000 sagas run 10,000
// action steps a second, whatever their shape; sagas that wait put their
// timers' writes on the by_due shards, and the others none; and the model
// sees a hot key when there is one (by_status unsharded, as before issue
// 12, or by_due unsharded).
func TestScaleModel(t *testing.T) {
	const n, rate = 100_000, 10_000
	for _, sh := range shapes {
		l := scaleModel(t, sh, n, rate, nil)
		wk, w := l.busiest(l.write)
		rk, r := l.busiest(l.read)
		dk, d := l.busiest(only(l.write, "index DUE#"))
		if dk == "" {
			dk = "(none)"
		}
		t.Logf("%s: %.0f sagas/s; busiest write key %s at %.0f units/s; busiest read key %s at %.2f units/s; busiest by_due shard %s at %.0f units/s",
			sh.name, rate/float64(sh.steps), wk, w, rk, r, dk, d)
		if w >= partitionWriteUnits || r >= partitionReadUnits {
			t.Errorf("%s: over a partition's limits (%.0f writes, %.0f reads a second)", sh.name, partitionWriteUnits, partitionReadUnits)
		}
		if waits := slices.Contains(sh.timers, true); waits != (d > 0) {
			t.Errorf("%s: timers %v, yet %.0f write units/s on the busiest by_due shard", sh.name, waits, d)
		}
	}
	unsharded := func(it map[string]types.AttributeValue) {
		st := it[attrStatus].(*types.AttributeValueMemberS).Value
		it[attrGSI1PK] = &types.AttributeValueMemberS{Value: "STATUS#" + st}
	}
	l := scaleModel(t, shapes[1], n, rate, unsharded)
	if k, w := l.busiest(l.write); w < partitionWriteUnits || k != "index STATUS#running" {
		t.Errorf("the model found no hot key in an unsharded index: busiest %s at %.0f units/s", k, w)
	}
	// Every timer under one key: 5,000 sagas a second, each putting and
	// deleting one entry there.
	oneDueKey := func(it map[string]types.AttributeValue) {
		if _, ok := it[attrGSI2PK]; ok {
			it[attrGSI2PK] = &types.AttributeValueMemberS{Value: "DUE"}
		}
	}
	l = scaleModel(t, shapes[3], n, rate, oneDueKey)
	if k, w := l.busiest(l.write); w < partitionWriteUnits || k != "index DUE" {
		t.Errorf("the model found no hot key in an unsharded by_due: busiest %s at %.0f units/s", k, w)
	}
}

// TestDefinitionReadsAtScale: a definition is one item that every new
// execution environment reads once. Lambda scales a function by at most
// 1,000 execution environments every 10 seconds (Lambda Developer Guide,
// "Lambda scaling behavior"); both queue functions scaling at once read
// the item 200 times a second. Eventually consistent, a definition of up to
// MaxDefinitionReadBytes stays under the partition's 3,000 read units.
func TestDefinitionReadsAtScale(t *testing.T) {
	const environmentsPerSecond = 2 * 1000 / 10.0
	perRead := func(sourceBytes int) float64 {
		it := defKey("4f9c2d1e8a7b6c5d4e3f2a1b0c9d8e7f6a5b4c3d2e1f0a9b8c7d6e5f4a3b2c1d")
		it[attrName] = &types.AttributeValueMemberS{Value: "order"}
		it[attrSource] = &types.AttributeValueMemberB{Value: make([]byte, sourceBytes)}
		return accounting.ReadUnits(accounting.ItemSize(it), false)
	}
	if r := environmentsPerSecond * perRead(maxDefinitionReadBytes); r >= partitionReadUnits {
		t.Errorf("a %d-byte definition: %.0f read units a second", maxDefinitionReadBytes, r)
	}
	if r := environmentsPerSecond * perRead(maxDefinitionReadBytes+8<<10); r < partitionReadUnits {
		t.Errorf("the bound is not tight: %d bytes more still reads %.0f units a second", 8<<10, r)
	}
}

// maxDefinitionReadBytes is the largest definition whose reads stay under a
// partition's limit while both queue functions scale up at full speed
// (docs/PROTOCOL.md). Larger ones may be throttled then, and retried.
const maxDefinitionReadBytes = 112 << 10
