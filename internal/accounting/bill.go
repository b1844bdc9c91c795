package accounting

import (
	"bytes"
	"maps"
	"slices"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// Bill is what DynamoDB would bill for one request, as computed from the
// items it read or wrote (the emulators report no index writes, so their
// ConsumedCapacity cannot be trusted for that).
type Bill struct {
	// ReadUnits is a read's units.
	ReadUnits float64
	// WriteUnits is the table's share of a write.
	WriteUnits float64
	// IndexWriteUnits is each secondary index's share, by index name; an
	// index the write did not touch is absent.
	IndexWriteUnits map[string]float64
}

// IndexUnits is the sum of the indexes' shares.
func (b Bill) IndexUnits() float64 {
	var u float64
	for _, name := range slices.Sorted(maps.Keys(b.IndexWriteUnits)) {
		u += b.IndexWriteUnits[name]
	}
	return u
}

// Add adds o to b; a transactional write adds its bill twice.
func (b *Bill) Add(o Bill) {
	b.ReadUnits += o.ReadUnits
	b.WriteUnits += o.WriteUnits
	for name, u := range o.IndexWriteUnits {
		if b.IndexWriteUnits == nil {
			b.IndexWriteUnits = map[string]float64{}
		}
		b.IndexWriteUnits[name] += u
	}
}

// TableSchema is what billing needs to know of a table: its key
// attributes and its secondary indexes.
type TableSchema struct {
	Key     []string      // the partition key's name, then the sort key's if any
	Indexes []IndexSchema // global and local secondary indexes
}

// IndexSchema is one global or local secondary index.
type IndexSchema struct {
	Name string   // the index's name
	Key  []string // the index's partition key, then its sort key if any
	// Projection is ALL, KEYS_ONLY or INCLUDE.
	Projection types.ProjectionType
	// NonKeyAttributes lists, with INCLUDE, the attributes projected
	// besides the keys.
	NonKeyAttributes []string
}

// SchemaFromDescription reads a table's schema from DescribeTable's (or
// CreateTable's) description.
func SchemaFromDescription(d *types.TableDescription) TableSchema {
	var s TableSchema
	if d == nil {
		return s
	}
	s.Key = keyNames(d.KeySchema)
	for _, g := range d.GlobalSecondaryIndexes {
		s.Indexes = append(s.Indexes, indexSchema(g.IndexName, g.KeySchema, g.Projection))
	}
	for _, l := range d.LocalSecondaryIndexes {
		s.Indexes = append(s.Indexes, indexSchema(l.IndexName, l.KeySchema, l.Projection))
	}
	return s
}

// SchemaFromCreateTable reads a table's schema from the request that
// creates it.
func SchemaFromCreateTable(in *dynamodb.CreateTableInput) TableSchema {
	var s TableSchema
	if in == nil {
		return s
	}
	s.Key = keyNames(in.KeySchema)
	for _, g := range in.GlobalSecondaryIndexes {
		s.Indexes = append(s.Indexes, indexSchema(g.IndexName, g.KeySchema, g.Projection))
	}
	for _, l := range in.LocalSecondaryIndexes {
		s.Indexes = append(s.Indexes, indexSchema(l.IndexName, l.KeySchema, l.Projection))
	}
	return s
}

func indexSchema(name *string, key []types.KeySchemaElement, p *types.Projection) IndexSchema {
	ix := IndexSchema{Key: keyNames(key), Projection: types.ProjectionTypeKeysOnly}
	if name != nil {
		ix.Name = *name
	}
	if p != nil {
		if p.ProjectionType != "" {
			ix.Projection = p.ProjectionType
		}
		ix.NonKeyAttributes = slices.Clone(p.NonKeyAttributes)
	}
	return ix
}

// keyNames orders a key schema: HASH first.
func keyNames(ks []types.KeySchemaElement) []string {
	var hash, rng []string
	for _, k := range ks {
		if k.AttributeName == nil {
			continue
		}
		if k.KeyType == types.KeyTypeRange {
			rng = append(rng, *k.AttributeName)
		} else {
			hash = append(hash, *k.AttributeName)
		}
	}
	return append(hash, rng...)
}

// KeyOf is the item's primary key attributes.
func (s *TableSchema) KeyOf(item map[string]types.AttributeValue) map[string]types.AttributeValue {
	k := make(map[string]types.AttributeValue, len(s.Key))
	for _, name := range s.Key {
		if v, ok := item[name]; ok {
			k[name] = v
		}
	}
	return k
}

// WriteBill is what a successful PutItem, UpdateItem or DeleteItem bills
// ("Capacity unit consumption for write operations" in the Developer
// Guide's "DynamoDB read and write operations"): on the table, 1 unit per
// KB of the larger of the item before and after the write (a delete: of
// the item deleted; nothing before and after bills the minimum 1), and on
// each index the writes of IndexWrites. nil is a missing item.
func (s *TableSchema) WriteBill(before, after map[string]types.AttributeValue) Bill {
	b := Bill{WriteUnits: WriteUnits(max(ItemSize(before), ItemSize(after)))}
	for i := range s.Indexes {
		if u := s.IndexWrites(&s.Indexes[i], before, after); u > 0 {
			if b.IndexWriteUnits == nil {
				b.IndexWriteUnits = map[string]float64{}
			}
			b.IndexWriteUnits[s.Indexes[i].Name] += u
		}
	}
	return b
}

// FailedConditionBill is what a write whose condition failed bills: the
// size of the existing item on the table, at least 1 unit (nil: no item),
// and nothing on the indexes. Developer Guide, "Condition expressions"
// ("Conditional writes"): "If the ConditionExpression evaluates to false,
// DynamoDB still consumes write capacity from the table. The amount
// consumed is dependent on the size of the existing item (or a minimum of 1)."
func FailedConditionBill(existing map[string]types.AttributeValue) Bill {
	return Bill{WriteUnits: WriteUnits(ItemSize(existing))}
}

// IndexWrites is what a write of an item from before to after bills on
// one index, by the Developer Guide's "Global secondary indexes"
// ("Provisioned throughput considerations for global secondary indexes",
// writes): an item is in the index when it has every key attribute of the
// index; its entry holds the table's key, the index's key and the
// projected attributes, and each entry written bills 1 unit per KB:
//
//   - in the index neither before nor after: 0;
//   - a new entry: 1 write of the new entry;
//   - the entry removed: 1 write (the delete) of the old entry;
//   - the index key changed: 2 writes, a delete of the old entry and a put
//     of the new one;
//   - same index key, a projected attribute changed: 1 write, of the
//     larger entry;
//   - nothing in the entry changed: 0.
func (s *TableSchema) IndexWrites(ix *IndexSchema, before, after map[string]types.AttributeValue) float64 {
	old, cur := s.entry(ix, before), s.entry(ix, after)
	switch {
	case old == nil && cur == nil:
		return 0
	case old == nil:
		return WriteUnits(ItemSize(cur))
	case cur == nil:
		return WriteUnits(ItemSize(old))
	}
	for _, k := range ix.Key {
		if !EqualValues(old[k], cur[k]) {
			return WriteUnits(ItemSize(old)) + WriteUnits(ItemSize(cur))
		}
	}
	if EqualItems(old, cur) {
		return 0
	}
	return WriteUnits(max(ItemSize(old), ItemSize(cur)))
}

// entry is the item's entry in the index, nil when the item is not in it.
func (s *TableSchema) entry(ix *IndexSchema, item map[string]types.AttributeValue) map[string]types.AttributeValue {
	if item == nil || len(ix.Key) == 0 {
		return nil
	}
	for _, k := range ix.Key {
		if _, ok := item[k]; !ok {
			return nil
		}
	}
	if ix.Projection == types.ProjectionTypeAll {
		return item
	}
	e := map[string]types.AttributeValue{}
	names := slices.Concat(s.Key, ix.Key)
	if ix.Projection == types.ProjectionTypeInclude {
		names = append(names, ix.NonKeyAttributes...)
	}
	for _, n := range names {
		if v, ok := item[n]; ok {
			e[n] = v
		}
	}
	return e
}

// EqualItems reports whether two items hold the same attributes and values.
func EqualItems(a, b map[string]types.AttributeValue) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		w, ok := b[k]
		if !ok || !EqualValues(v, w) {
			return false
		}
	}
	return true
}

// EqualValues reports whether two attribute values are the same (sets in
// any order; numbers compared as text).
func EqualValues(a, b types.AttributeValue) bool {
	switch a := a.(type) {
	case *types.AttributeValueMemberS:
		b, ok := b.(*types.AttributeValueMemberS)
		return ok && a.Value == b.Value
	case *types.AttributeValueMemberN:
		b, ok := b.(*types.AttributeValueMemberN)
		return ok && a.Value == b.Value
	case *types.AttributeValueMemberB:
		b, ok := b.(*types.AttributeValueMemberB)
		return ok && bytes.Equal(a.Value, b.Value)
	case *types.AttributeValueMemberBOOL:
		b, ok := b.(*types.AttributeValueMemberBOOL)
		return ok && a.Value == b.Value
	case *types.AttributeValueMemberNULL:
		_, ok := b.(*types.AttributeValueMemberNULL)
		return ok
	case *types.AttributeValueMemberL:
		b, ok := b.(*types.AttributeValueMemberL)
		return ok && slices.EqualFunc(a.Value, b.Value, EqualValues)
	case *types.AttributeValueMemberM:
		b, ok := b.(*types.AttributeValueMemberM)
		return ok && EqualItems(a.Value, b.Value)
	case *types.AttributeValueMemberSS:
		b, ok := b.(*types.AttributeValueMemberSS)
		return ok && slices.Equal(slices.Sorted(slices.Values(a.Value)), slices.Sorted(slices.Values(b.Value)))
	case *types.AttributeValueMemberNS:
		b, ok := b.(*types.AttributeValueMemberNS)
		return ok && slices.Equal(slices.Sorted(slices.Values(a.Value)), slices.Sorted(slices.Values(b.Value)))
	case *types.AttributeValueMemberBS:
		b, ok := b.(*types.AttributeValueMemberBS)
		return ok && slices.EqualFunc(sortedBytes(a.Value), sortedBytes(b.Value), bytes.Equal)
	}
	return false
}

func sortedBytes(v [][]byte) [][]byte {
	return slices.SortedFunc(slices.Values(v), bytes.Compare)
}
