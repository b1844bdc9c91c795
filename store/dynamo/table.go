package dynamo

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// CreateTable creates the table this store expects, with its indexes, and
// waits until it is active: for local emulators and tests. In AWS the
// table comes from infra/template.yaml.
func CreateTable(ctx context.Context, client *dynamodb.Client, table string) error {
	_, err := client.CreateTable(ctx, tableInput(table))
	var inUse *types.ResourceInUseException
	if err != nil && !errors.As(err, &inUse) {
		return fmt.Errorf("create table %s: %w", table, err)
	}
	w := dynamodb.NewTableExistsWaiter(client, func(o *dynamodb.TableExistsWaiterOptions) { o.MinDelay = 50 * time.Millisecond })
	if err := w.Wait(ctx, &dynamodb.DescribeTableInput{TableName: &table}, 30*time.Second); err != nil {
		return fmt.Errorf("table %s did not become active: %w", table, err)
	}
	return nil
}

// tableInput is the table CreateTable makes. It must be the table
// infra/template.yaml declares (TestTableMatchesTemplate compares them),
// less what only AWS needs: encryption, point-in-time recovery and the
// time to live on TTLAttribute.
func tableInput(table string) *dynamodb.CreateTableInput {
	str := types.ScalarAttributeTypeS
	return &dynamodb.CreateTableInput{
		TableName:   &table,
		BillingMode: types.BillingModePayPerRequest,
		AttributeDefinitions: []types.AttributeDefinition{
			{AttributeName: aws.String(attrPK), AttributeType: str},
			{AttributeName: aws.String(attrSK), AttributeType: str},
			{AttributeName: aws.String(attrGSI1PK), AttributeType: str},
			{AttributeName: aws.String(attrGSI1SK), AttributeType: str},
			{AttributeName: aws.String(attrGSI2PK), AttributeType: str},
			{AttributeName: aws.String(attrGSI2SK), AttributeType: str},
		},
		KeySchema: []types.KeySchemaElement{
			{AttributeName: aws.String(attrPK), KeyType: types.KeyTypeHash},
			{AttributeName: aws.String(attrSK), KeyType: types.KeyTypeRange},
		},
		GlobalSecondaryIndexes: []types.GlobalSecondaryIndex{{
			IndexName: aws.String(IndexByStatus),
			KeySchema: []types.KeySchemaElement{
				{AttributeName: aws.String(attrGSI1PK), KeyType: types.KeyTypeHash},
				{AttributeName: aws.String(attrGSI1SK), KeyType: types.KeyTypeRange},
			},
			Projection: &types.Projection{
				ProjectionType:   types.ProjectionTypeInclude,
				NonKeyAttributes: []string{attrStatus, attrName, attrDef, attrCreated},
			},
		}, {
			// Sparse: only sagas with a timer have its keys. The keys hold
			// all it gives (the id and the due time).
			IndexName: aws.String(IndexByDue),
			KeySchema: []types.KeySchemaElement{
				{AttributeName: aws.String(attrGSI2PK), KeyType: types.KeyTypeHash},
				{AttributeName: aws.String(attrGSI2SK), KeyType: types.KeyTypeRange},
			},
			Projection: &types.Projection{ProjectionType: types.ProjectionTypeKeysOnly},
		}},
	}
}
