package awscall_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"

	"github.com/lambdasaga/lambdasaga/internal/awscall"
)

func request(method, url, target, body string) *http.Request {
	r := httptest.NewRequest(method, url, strings.NewReader(body))
	r.Header.Set("Authorization", "AWS4-HMAC-SHA256 Credential=AdvanceFunction/20261201/us-east-1/svc/aws4_request, SignedHeaders=host, Signature=00")
	if target != "" {
		r.Header.Set("X-Amz-Target", target)
	}
	return r
}

func sagaTable(table string) (awscall.TableSchema, bool) {
	return awscall.TableSchema{Table: table, HashKey: "pk", Indexes: map[string]string{"by_status": "gsi1pk"}}, true
}

// Each request is read as the action IAM authorizes it as, with the
// resource it names and the condition keys a policy can test.
func TestParseReadsCallsAsIAMSeesThem(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name    string
		service awscall.Service
		req     *http.Request
		want    awscall.Call
	}{
		{"a fork's count: the attributes its expressions name, ALL_OLD", awscall.DynamoDB,
			request("POST", "/", "DynamoDB_20120810.UpdateItem", `{"TableName":"T","Key":{"pk":{"S":"FORK#a"},"sk":{"S":"FORK"}},
				"UpdateExpression":"SET #l = :next, #f = if_not_exists(#f, :child) ADD #s :lane","ConditionExpression":"#l = :m",
				"ExpressionAttributeNames":{"#l":"l3","#f":"fail","#s":"stop"},"ReturnValues":"ALL_OLD"}`),
			awscall.Call{Principal: "AdvanceFunction", Operation: "UpdateItem", Action: "dynamodb:UpdateItem", Table: "T",
				Conditions: map[string]any{"dynamodb:Attributes": []string{"fail", "l3", "pk", "sk", "stop"}, "dynamodb:LeadingKeys": []string{"FORK#a"}, "dynamodb:ReturnValues": "ALL_OLD"}}},
		{"a path's later parts are not top-level names", awscall.DynamoDB,
			request("POST", "/", "DynamoDB_20120810.GetItem", `{"TableName":"T","Key":{"pk":{"S":"S#1"}},"ProjectionExpression":"a.b, c[0].d"}`),
			awscall.Call{Principal: "AdvanceFunction", Operation: "GetItem", Action: "dynamodb:GetItem", Table: "T",
				Conditions: map[string]any{"dynamodb:Attributes": []string{"a", "c", "pk"}, "dynamodb:LeadingKeys": []string{"S#1"}}}},
		{"a query of an index: its partition key's value, the default Select", awscall.DynamoDB,
			request("POST", "/", "DynamoDB_20120810.Query", `{"TableName":"T","IndexName":"by_status","KeyConditionExpression":"gsi1pk = :p AND gsi1sk > :s",
				"ExpressionAttributeValues":{":p":{"S":"ST#running#3"},":s":{"S":"x"}}}`),
			awscall.Call{Principal: "AdvanceFunction", Operation: "Query", Action: "dynamodb:Query", Table: "T", Index: "by_status",
				Conditions: map[string]any{"dynamodb:Attributes": []string{"gsi1pk", "gsi1sk"}, "dynamodb:LeadingKeys": []string{"ST#running#3"}, "dynamodb:Select": "ALL_PROJECTED_ATTRIBUTES"}}},
		{"SendMessageBatch is authorized as sqs:SendMessage", awscall.SQS,
			request("POST", "/", "AmazonSQS.SendMessageBatch", `{"QueueUrl":"http://127.0.0.1:1/000000000000/e2e-AdvanceQueue","Entries":[]}`),
			awscall.Call{Principal: "AdvanceFunction", Operation: "SendMessageBatch", Action: "sqs:SendMessage", Queue: "e2e-AdvanceQueue"}},
		{"an alias in the name is the qualifier", awscall.Lambda,
			request("POST", "/2015-03-31/functions/payments%3Alive/invocations", "", `{}`),
			awscall.Call{Principal: "AdvanceFunction", Operation: "Invoke", Action: "lambda:InvokeFunction", Function: "payments", Qualifier: "live"}},
		{"an ARN and ?Qualifier", awscall.Lambda,
			request("POST", "/2015-03-31/functions/arn%3Aaws%3Alambda%3Aus-east-1%3A1%3Afunction%3Apayments/invocations?Qualifier=7", "", `{}`),
			awscall.Call{Principal: "AdvanceFunction", Operation: "Invoke", Action: "lambda:InvokeFunction", Function: "payments", Qualifier: "7"}},
		{"an object put, path-style: the bucket and the key", awscall.S3,
			request("PUT", "/e2e-valuesbucket/saga-1/ab12?x-id=PutObject", "", "body"),
			awscall.Call{Principal: "AdvanceFunction", Operation: "PutObject", Action: "s3:PutObject", Bucket: "e2e-valuesbucket", Object: "saga-1/ab12"}},
		{"HeadObject is authorized as s3:GetObject", awscall.S3,
			request("HEAD", "/b/k", "", ""),
			awscall.Call{Principal: "AdvanceFunction", Operation: "HeadObject", Action: "s3:GetObject", Bucket: "b", Object: "k"}},
		{"a listing is s3:ListBucket on the bucket", awscall.S3,
			request("GET", "/b?list-type=2&prefix=saga-1%2F", "", ""),
			awscall.Call{Principal: "AdvanceFunction", Operation: "ListObjectsV2", Action: "s3:ListBucket", Bucket: "b"}},
	} {
		body, _ := io.ReadAll(tc.req.Body)
		got, schema, err := awscall.Parse(tc.service, tc.req, body, sagaTable)
		if err != nil || schema != nil {
			t.Fatalf("%s: %v %v", tc.name, schema, err)
		}
		if !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%s:\ngot  %+v\nwant %+v", tc.name, got, tc.want)
		}
	}
}

// A CopyObject is authorized as s3:PutObject on the copy and
// s3:GetObject on its source, and s3:PutObjectTagging on the copy when it
// sets tags: ParseAll reads all of them.
func TestParseAllReadsACopyAsEveryActionItNeeds(t *testing.T) {
	t.Parallel()
	req := request("PUT", "/e2e-valuesbucket/saga-1/ab12?x-id=CopyObject", "", "")
	req.Header.Set("X-Amz-Copy-Source", "e2e-valuesbucket/saga-1%2Fab12")
	req.Header.Set("X-Amz-Tagging", "lambdasaga-ended=1")
	req.Header.Set("X-Amz-Tagging-Directive", "REPLACE")
	calls, _, err := awscall.ParseAll(awscall.S3, req, nil, sagaTable)
	if err != nil {
		t.Fatal(err)
	}
	put := awscall.Call{Principal: "AdvanceFunction", Operation: "CopyObject", Action: "s3:PutObject", Bucket: "e2e-valuesbucket", Object: "saga-1/ab12"}
	get, tag := put, put
	get.Action, tag.Action = "s3:GetObject", "s3:PutObjectTagging"
	if !reflect.DeepEqual(calls, []awscall.Call{put, get, tag}) {
		t.Fatalf("calls %+v", calls)
	}
	req.Header.Del("X-Amz-Tagging")
	req.Header.Del("X-Amz-Tagging-Directive")
	if calls, _, err := awscall.ParseAll(awscall.S3, req, nil, sagaTable); err != nil || !reflect.DeepEqual(calls, []awscall.Call{put, get}) {
		t.Fatalf("without tags: %+v %v", calls, err)
	}
}

// An S3 request this package cannot name the action of (a subresource, a
// copy of no object, no bucket) is an error, which the recorder keeps as
// unread and the IAM check fails on, never a call taken for another.
func TestParseRefusesS3CallsItCannotName(t *testing.T) {
	t.Parallel()
	copyReq := request("PUT", "/b/k", "", "")
	copyReq.Header.Set("X-Amz-Copy-Source", "/b")
	for name, req := range map[string]*http.Request{
		"a subresource":  request("PUT", "/b/k?tagging", "", ""),
		"no bucket":      request("GET", "/", "", ""),
		"a bucket's ACL": request("GET", "/b?acl", "", ""),
		"a multipart":    request("POST", "/b/k?uploads", "", ""),
	} {
		if call, _, err := awscall.Parse(awscall.S3, req, nil, sagaTable); err == nil {
			t.Errorf("%s: read as %s, want an error", name, call)
		}
	}
	if calls, _, err := awscall.ParseAll(awscall.S3, copyReq, nil, sagaTable); err == nil {
		t.Errorf("a copy of no object: read as %+v, want an error", calls)
	}
}
