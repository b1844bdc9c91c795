package dynamo

import (
	"testing"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// TestScaleModelSeesAHotTableKey: the scale model
// must see a hot key on the table as it sees one on the index. Here every
// saga's item shares one partition key (the id moved to the sort key), so
// at 10,000 action steps a second that one key receives about 11,000 write
// units a second, far over a partition's 1,000. (The model once kept, per
// table key, the largest rate of one saga instead of the sum over the
// sagas that share the key, and reported a tenth of a unit.)
func TestScaleModelSeesAHotTableKey(t *testing.T) {
	const n, rate = 100_000, 10_000
	oneTableKey := func(it map[string]types.AttributeValue) {
		id := it[attrPK].(*types.AttributeValueMemberS).Value
		it[attrPK] = &types.AttributeValueMemberS{Value: "SAGAS"}
		it[attrSK] = &types.AttributeValueMemberS{Value: id}
	}
	l := scaleModel(t, shapes[0], n, rate, oneTableKey)
	if w := l.write["table SAGAS"]; w < partitionWriteUnits {
		t.Errorf("every saga's item under one partition key: the model puts %.2f write units/s on it, want at least %.0f (10,000 steps/s, about 1.1 units each)", w, partitionWriteUnits)
	}
	if r := l.read["table SAGAS"]; r < partitionReadUnits {
		t.Errorf("every saga's item under one partition key: the model puts %.2f read units/s on it, want at least %.0f (10,000 consistent reads/s)", r, partitionReadUnits)
	}
}
