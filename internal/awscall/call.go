// Package awscall records the AWS calls that lambdasaga's code makes, as
// IAM sees them: the action a request is authorized as, the resource it
// names, and the condition keys a policy can test. The emulators check no
// IAM, so a call a deployed function would be denied passes every test on
// them; recorded here, each call is evaluated against the template's
// policies by a real policy engine (internal/iamcheck).
//
// Calls are attributed to a principal by the access key id they are signed
// with: the local harness gives each function the key of its logical id
// (AdvanceFunction, ...), and the client and operator tools sign as the
// managed policy a deployment would attach to them (awslocal.ConfigAs).
// Calls signed with any other key are not recorded.
package awscall

import (
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"sort"
	"strings"
)

// Call is one AWS call, as IAM evaluates it.
type Call struct {
	Principal string `json:"principal"`
	// Operation is the API operation (SendMessageBatch), Action the IAM
	// action it is authorized as (sqs:SendMessage).
	Operation string `json:"operation"`
	Action    string `json:"action"`
	// The resource named, by its kind: a table (and an index of it), a
	// queue, a function (and its qualifier, a version or an alias), a
	// bucket (and an object's key in it).
	Table     string `json:"table,omitempty"`
	Index     string `json:"index,omitempty"`
	Queue     string `json:"queue,omitempty"`
	Function  string `json:"function,omitempty"`
	Qualifier string `json:"qualifier,omitempty"`
	Bucket    string `json:"bucket,omitempty"`
	Object    string `json:"object,omitempty"`
	// Conditions are the service's condition keys this request carries
	// (dynamodb:Attributes, dynamodb:LeadingKeys, dynamodb:ReturnValues,
	// dynamodb:Select), with IAM's value types: a string or a list of them.
	Conditions map[string]any `json:"conditions,omitempty"`
}

// Shape identifies calls that a policy of ours cannot tell apart: the same
// principal, action, resource and condition values, but for the partition
// key values (every saga has its own, and no statement of the template
// tests them), so that a run records each shape once.
//
// A key's kind stays in the shape: its text up to its first '#' (SAGA#,
// FORK#), which a statement does test (ForkRecords grants FORK#* only).
// An object's key goes too (every value has its own, and the template
// grants a bucket's objects as a whole), but not that the call names an
// object rather than its bucket.
func (c Call) Shape() string {
	if c.Object != "" {
		c.Object = "*"
	}
	if lk, ok := c.Conditions["dynamodb:LeadingKeys"].([]string); ok {
		kinds := make([]string, len(lk))
		for i, k := range lk {
			if j := strings.IndexByte(k, '#'); j >= 0 {
				k = k[:j+1]
			}
			kinds[i] = k
		}
		c.Conditions = maps.Clone(c.Conditions)
		c.Conditions["dynamodb:LeadingKeys"] = kinds
	}
	b, _ := json.Marshal(c)
	return string(b)
}

// String names the call for a test's message.
func (c Call) String() string {
	var res string
	switch {
	case c.Index != "":
		res = "table " + c.Table + " index " + c.Index
	case c.Table != "":
		res = "table " + c.Table
	case c.Queue != "":
		res = "queue " + c.Queue
	case c.Qualifier != "":
		res = "function " + c.Function + ":" + c.Qualifier
	case c.Function != "":
		res = "function " + c.Function
	case c.Object != "":
		res = "object " + c.Bucket + "/" + c.Object
	case c.Bucket != "":
		res = "bucket " + c.Bucket
	}
	s := c.Operation + " (" + c.Action + ") on " + res
	if len(c.Conditions) > 0 {
		keys := make([]string, 0, len(c.Conditions))
		for k := range c.Conditions {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		var parts []string
		for _, k := range keys {
			parts = append(parts, fmt.Sprintf("%s=%v", k, c.Conditions[k]))
		}
		s += " with " + strings.Join(parts, ", ")
	}
	return s
}

// Service is the AWS service an endpoint serves.
type Service string

const (
	DynamoDB Service = "dynamodb"
	SQS      Service = "sqs"
	Lambda   Service = "lambda"
	S3       Service = "s3"
)

// TableSchema is what a CreateTable request says of a table's keys: which
// attribute is the partition key of the table and of each index (for
// dynamodb:LeadingKeys), and which indexes it has (a saga table has
// by_status and by_due).
type TableSchema struct {
	Table   string            `json:"table"`
	HashKey string            `json:"hash_key"`
	Indexes map[string]string `json:"indexes,omitempty"` // index -> its partition key
}

// principalOf returns the access key id a SigV4-signed request names.
func principalOf(r *http.Request) string {
	auth := r.Header.Get("Authorization")
	_, cred, ok := strings.Cut(auth, "Credential=")
	if !ok {
		return ""
	}
	key, _, _ := strings.Cut(cred, "/")
	return key
}

// Parse reads a request to service into the call it makes, or a table's
// schema when it creates a table. ok is false for a request IAM would not
// see as a call of lambdasaga's (unsigned, or of an API this package does
// not read).
func Parse(service Service, r *http.Request, body []byte, schemas func(table string) (TableSchema, bool)) (call Call, schema *TableSchema, err error) {
	call.Principal = principalOf(r)
	switch service {
	case DynamoDB:
		return parseDynamoDB(call, r, body, schemas)
	case SQS:
		return parseSQS(call, r, body)
	case Lambda:
		return parseLambda(call, r)
	case S3:
		return parseS3(call, r)
	}
	return call, nil, fmt.Errorf("unknown service %q", service)
}

// ParseAll is Parse with every action a request is authorized as: one
// for most, three for an S3 CopyObject that sets tags (s3:PutObject on
// the copy, s3:GetObject on the source, s3:PutObjectTagging on the copy:
// Amazon S3 API Reference, CopyObject, "Permissions"), two without tags.
func ParseAll(service Service, r *http.Request, body []byte, schemas func(table string) (TableSchema, bool)) ([]Call, *TableSchema, error) {
	call, schema, err := Parse(service, r, body, schemas)
	if err != nil || schema != nil || call.Operation != "CopyObject" {
		return []Call{call}, schema, err
	}
	src, err := url.PathUnescape(strings.TrimPrefix(r.Header.Get("X-Amz-Copy-Source"), "/"))
	if err != nil {
		return []Call{call}, nil, fmt.Errorf("s3: copy source %q: %w", r.Header.Get("X-Amz-Copy-Source"), err)
	}
	src, _, _ = strings.Cut(src, "?") // ?versionId=
	srcBucket, srcKey, _ := strings.Cut(src, "/")
	if srcBucket == "" || srcKey == "" {
		return []Call{call}, nil, fmt.Errorf("s3: copy source %q names no object", src)
	}
	get := call
	get.Operation, get.Action, get.Bucket, get.Object = "CopyObject", "s3:GetObject", srcBucket, srcKey
	calls := []Call{call, get}
	if r.Header.Get("X-Amz-Tagging") != "" || strings.EqualFold(r.Header.Get("X-Amz-Tagging-Directive"), "REPLACE") {
		tag := call
		tag.Action = "s3:PutObjectTagging"
		calls = append(calls, tag)
	}
	return calls, nil, nil
}

func target(r *http.Request) string {
	_, op, _ := strings.Cut(r.Header.Get("X-Amz-Target"), ".")
	return op
}

// ddbRequest holds the fields of a DynamoDB request that name its resource
// or its condition keys.
type ddbRequest struct {
	TableName                 string
	IndexName                 string
	Key                       map[string]json.RawMessage
	Item                      map[string]json.RawMessage
	UpdateExpression          string
	ConditionExpression       string
	ProjectionExpression      string
	KeyConditionExpression    string
	FilterExpression          string
	ExpressionAttributeNames  map[string]string
	ExpressionAttributeValues map[string]map[string]any
	ReturnValues              string
	Select                    string
	AttributesToGet           []string
	// The legacy parameters name attributes as map keys.
	AttributeUpdates       map[string]json.RawMessage
	Expected               map[string]json.RawMessage
	KeyConditions          map[string]json.RawMessage
	QueryFilter            map[string]json.RawMessage
	ScanFilter             map[string]json.RawMessage
	KeySchema              []struct{ AttributeName, KeyType string }
	GlobalSecondaryIndexes []struct {
		IndexName string
		KeySchema []struct{ AttributeName, KeyType string }
	}
}

func hashKey(ks []struct{ AttributeName, KeyType string }) string {
	for _, k := range ks {
		if k.KeyType == "HASH" {
			return k.AttributeName
		}
	}
	return ""
}

func parseDynamoDB(call Call, r *http.Request, body []byte, schemas func(string) (TableSchema, bool)) (Call, *TableSchema, error) {
	call.Operation = target(r)
	call.Action = "dynamodb:" + call.Operation
	var req ddbRequest
	if err := json.Unmarshal(body, &req); err != nil {
		return call, nil, fmt.Errorf("dynamodb %s: %w", call.Operation, err)
	}
	call.Table, call.Index = req.TableName, req.IndexName
	if call.Operation == "CreateTable" {
		s := &TableSchema{Table: req.TableName, HashKey: hashKey(req.KeySchema), Indexes: map[string]string{}}
		for _, g := range req.GlobalSecondaryIndexes {
			s.Indexes[g.IndexName] = hashKey(g.KeySchema)
		}
		return call, s, nil
	}
	cond := map[string]any{}
	// dynamodb:Attributes: the top-level attribute names the request
	// reads or writes: its key, its item, and every name its expressions
	// use (AWS: "a list of the top-level attribute names accessed by a
	// request").
	attrs := map[string]bool{}
	for k := range req.Key {
		attrs[k] = true
	}
	for k := range req.Item {
		attrs[k] = true
	}
	for _, a := range req.AttributesToGet {
		attrs[a] = true
	}
	for _, m := range []map[string]json.RawMessage{req.AttributeUpdates, req.Expected, req.KeyConditions, req.QueryFilter, req.ScanFilter} {
		for k := range m {
			attrs[k] = true
		}
	}
	for _, e := range []string{req.UpdateExpression, req.ConditionExpression, req.ProjectionExpression, req.KeyConditionExpression, req.FilterExpression} {
		for _, n := range attributeNames(e, req.ExpressionAttributeNames) {
			attrs[n] = true
		}
	}
	if len(attrs) > 0 {
		cond["dynamodb:Attributes"] = sortedKeys(attrs)
	}
	if lk := leadingKeys(call, req, schemas); len(lk) > 0 {
		cond["dynamodb:LeadingKeys"] = lk
	}
	if req.ReturnValues != "" {
		cond["dynamodb:ReturnValues"] = req.ReturnValues
	}
	switch {
	case req.Select != "":
		cond["dynamodb:Select"] = req.Select
	case call.Operation == "Query" || call.Operation == "Scan":
		// DynamoDB's defaults when Select is not given.
		switch {
		case req.ProjectionExpression != "" || len(req.AttributesToGet) > 0:
			cond["dynamodb:Select"] = "SPECIFIC_ATTRIBUTES"
		case req.IndexName != "":
			cond["dynamodb:Select"] = "ALL_PROJECTED_ATTRIBUTES"
		default:
			cond["dynamodb:Select"] = "ALL_ATTRIBUTES"
		}
	}
	if len(cond) > 0 {
		call.Conditions = cond
	}
	return call, nil, nil
}

// leadingKeys returns the partition key values the request names: its
// key's or item's, or the value a query's key condition sets the table's
// or index's partition key to.
func leadingKeys(call Call, req ddbRequest, schemas func(string) (TableSchema, bool)) []string {
	s, known := schemas(call.Table)
	if !known {
		return nil
	}
	if call.Operation == "Query" {
		hk := s.HashKey
		if call.Index != "" {
			hk = s.Indexes[call.Index]
		}
		for _, m := range equality.FindAllStringSubmatch(req.KeyConditionExpression, -1) {
			name := m[1]
			if real, ok := req.ExpressionAttributeNames[name]; ok {
				name = real
			}
			if name != hk {
				continue
			}
			if v, ok := req.ExpressionAttributeValues[m[2]]["S"].(string); ok {
				return []string{v}
			}
		}
		return nil
	}
	for _, m := range []map[string]json.RawMessage{req.Key, req.Item} {
		var v struct{ S string }
		if raw, ok := m[s.HashKey]; ok && json.Unmarshal(raw, &v) == nil && v.S != "" {
			return []string{v.S}
		}
	}
	return nil
}

var (
	equality = regexp.MustCompile(`(#?[A-Za-z0-9_]+)\s*=\s*(:[A-Za-z0-9_]+)`)
	// A name in an expression: an attribute name placeholder (#n) or a
	// plain name, not a value placeholder (:v), a keyword or a function.
	token = regexp.MustCompile(`#[A-Za-z0-9_]+|:[A-Za-z0-9_]+|[A-Za-z_][A-Za-z0-9_]*`)
)

// Words of DynamoDB's expression grammar that are not attribute names.
var keywords = map[string]bool{
	"SET": true, "REMOVE": true, "ADD": true, "DELETE": true, "AND": true, "OR": true, "NOT": true,
	"BETWEEN": true, "IN": true, "attribute_exists": true, "attribute_not_exists": true,
	"attribute_type": true, "begins_with": true, "contains": true, "size": true,
	"if_not_exists": true, "list_append": true,
}

// attributeNames returns the top-level attribute names an expression
// uses, placeholders resolved: in a.b[0].c, only a.
func attributeNames(expr string, names map[string]string) []string {
	var out []string
	prev := byte(0)
	for _, loc := range token.FindAllStringIndex(expr, -1) {
		t := expr[loc[0]:loc[1]]
		// A path's later parts (after '.') are not top-level names.
		if loc[0] > 0 {
			prev = expr[loc[0]-1]
		} else {
			prev = 0
		}
		switch {
		case prev == '.':
			continue
		case strings.HasPrefix(t, ":"):
			continue
		case strings.HasPrefix(t, "#"):
			if n, ok := names[t]; ok {
				out = append(out, n)
			}
		case keywords[t] || keywords[strings.ToUpper(t)]:
			continue
		default:
			out = append(out, t)
		}
	}
	return out
}

func sortedKeys(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// sqsActions maps the batch operations to the action IAM authorizes them
// as (Amazon SQS API Reference: "the permission for SendMessageBatch is
// sqs:SendMessage", and likewise for the other batch APIs).
var sqsActions = map[string]string{
	"SendMessageBatch":             "SendMessage",
	"DeleteMessageBatch":           "DeleteMessage",
	"ChangeMessageVisibilityBatch": "ChangeMessageVisibility",
}

func parseSQS(call Call, r *http.Request, body []byte) (Call, *TableSchema, error) {
	call.Operation = target(r)
	var req struct{ QueueUrl, QueueName, SourceArn string }
	if call.Operation == "" { // the query protocol: Action=... in a form
		form, err := url.ParseQuery(string(body))
		if err != nil {
			return call, nil, fmt.Errorf("sqs: %w", err)
		}
		call.Operation, req.QueueUrl, req.QueueName = form.Get("Action"), form.Get("QueueUrl"), form.Get("QueueName")
	} else if err := json.Unmarshal(body, &req); err != nil {
		return call, nil, fmt.Errorf("sqs %s: %w", call.Operation, err)
	}
	action := call.Operation
	if a, ok := sqsActions[action]; ok {
		action = a
	}
	call.Action = "sqs:" + action
	switch {
	case req.QueueUrl != "":
		call.Queue = req.QueueUrl[strings.LastIndex(req.QueueUrl, "/")+1:]
	case req.QueueName != "":
		call.Queue = req.QueueName
	case req.SourceArn != "":
		call.Queue = req.SourceArn[strings.LastIndex(req.SourceArn, ":")+1:]
	}
	return call, nil, nil
}

// invokePath is Lambda's Invoke: POST /2015-03-31/functions/NAME/invocations.
var invokePath = regexp.MustCompile(`^/2015-03-31/functions/([^/]+)/invocations$`)

func parseLambda(call Call, r *http.Request) (Call, *TableSchema, error) {
	m := invokePath.FindStringSubmatch(r.URL.EscapedPath())
	if m == nil {
		return call, nil, fmt.Errorf("lambda: %s %s is not an Invoke", r.Method, r.URL.Path)
	}
	call.Operation, call.Action = "Invoke", "lambda:InvokeFunction"
	name, _ := url.PathUnescape(m[1])
	// NAME is a name, a partial ARN (ACCOUNT:function:NAME) or an ARN,
	// each with an optional :QUALIFIER; ?Qualifier= names one too.
	if i := strings.Index(name, "function:"); i >= 0 {
		name = name[i+len("function:"):]
	}
	name, qualifier, _ := strings.Cut(name, ":")
	if q := r.URL.Query().Get("Qualifier"); q != "" {
		qualifier = q
	}
	call.Function, call.Qualifier = name, qualifier
	return call, nil, nil
}

// s3Operations are the S3 calls read here, path-style (/BUCKET/KEY: an
// emulator on 127.0.0.1 has no bucket host names), by method and by
// whether they name an object, with the action IAM authorizes each as
// (HeadObject as s3:GetObject, HeadBucket and ListObjectsV2 as
// s3:ListBucket). Any other request is not read: the check then fails on
// it rather than miss it.
var s3Operations = map[[2]string][2]string{
	{http.MethodPut, "object"}:    {"PutObject", "s3:PutObject"},
	{http.MethodGet, "object"}:    {"GetObject", "s3:GetObject"},
	{http.MethodHead, "object"}:   {"HeadObject", "s3:GetObject"},
	{http.MethodDelete, "object"}: {"DeleteObject", "s3:DeleteObject"},
	{http.MethodPut, "bucket"}:    {"CreateBucket", "s3:CreateBucket"},
	{http.MethodHead, "bucket"}:   {"HeadBucket", "s3:ListBucket"},
	{http.MethodGet, "bucket"}:    {"ListObjectsV2", "s3:ListBucket"},
}

func parseS3(call Call, r *http.Request) (Call, *TableSchema, error) {
	path := strings.TrimPrefix(r.URL.Path, "/")
	bucket, key, _ := strings.Cut(path, "/")
	if bucket == "" {
		return call, nil, fmt.Errorf("s3: %s %s names no bucket", r.Method, r.URL.Path)
	}
	kind := "bucket"
	if key != "" {
		kind = "object"
	}
	// A subresource (?acl, ?tagging, ?uploads, ...) is another operation,
	// authorized as another action; the SDK's x-id names the operation
	// and changes nothing.
	for q := range r.URL.Query() {
		if q == "x-id" || kind == "bucket" && r.Method == http.MethodGet && listParams[q] {
			continue
		}
		return call, nil, fmt.Errorf("s3: %s %s?%s is not read here", r.Method, r.URL.Path, r.URL.RawQuery)
	}
	if r.Header.Get("X-Amz-Copy-Source") != "" {
		if r.Method != http.MethodPut || kind != "object" {
			return call, nil, fmt.Errorf("s3: a copy to %s is not read here", r.URL.Path)
		}
		// CopyObject is authorized as PutObject on the copy (and
		// GetObject on the source, PutObjectTagging for its tags:
		// ParseAll): this is the copy's own call.
		call.Operation, call.Action, call.Bucket, call.Object = "CopyObject", "s3:PutObject", bucket, key
		return call, nil, nil
	}
	op, ok := s3Operations[[2]string{r.Method, kind}]
	if !ok {
		return call, nil, fmt.Errorf("s3: %s of a %s (%s) is not read here", r.Method, kind, r.URL.Path)
	}
	call.Operation, call.Action, call.Bucket, call.Object = op[0], op[1], bucket, key
	return call, nil, nil
}

// listParams are ListObjectsV2's query parameters.
var listParams = map[string]bool{
	"list-type": true, "prefix": true, "delimiter": true, "max-keys": true, "continuation-token": true,
	"start-after": true, "encoding-type": true, "fetch-owner": true,
}
