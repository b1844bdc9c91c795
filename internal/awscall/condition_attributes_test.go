package awscall_test

import (
	"io"
	"slices"
	"testing"

	"github.com/lambdasaga/lambdasaga/internal/awscall"
)

// dynamodb:Attributes names every top-level attribute a request writes,
// however the request names it: a placeholder of digits (#0, valid in
// DynamoDB), or the legacy AttributeUpdates and Expected maps. A name
// missed is a grant the check approves and IAM denies (ForAllValues
// tests each name the request carries).
func TestAttributesNamesEveryAttributeARequestWrites(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ name, body string }{
		{"a placeholder of digits", `{"TableName":"T","Key":{"pk":{"S":"FORK#a"},"sk":{"S":"FORK"}},"UpdateExpression":"SET #0 = :v","ExpressionAttributeNames":{"#0":"st"},"ExpressionAttributeValues":{":v":{"S":"x"}}}`},
		{"legacy AttributeUpdates", `{"TableName":"T","Key":{"pk":{"S":"FORK#a"},"sk":{"S":"FORK"}},"AttributeUpdates":{"st":{"Action":"PUT","Value":{"S":"x"}}}}`},
		{"legacy Expected", `{"TableName":"T","Key":{"pk":{"S":"FORK#a"},"sk":{"S":"FORK"}},"UpdateExpression":"SET l0 = :v","ExpressionAttributeValues":{":v":{"N":"1"}},"Expected":{"st":{"Exists":false}}}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := request("POST", "/", "DynamoDB_20120810.UpdateItem", tc.body)
			body, _ := io.ReadAll(r.Body)
			c, _, err := awscall.Parse(awscall.DynamoDB, r, body, sagaTable)
			if err != nil {
				t.Fatal(err)
			}
			attrs, _ := c.Conditions["dynamodb:Attributes"].([]string)
			if !slices.Contains(attrs, "st") {
				t.Fatalf("dynamodb:Attributes = %q: the request writes st", attrs)
			}
		})
	}
}
