// Package samtemplate reads infra/template.yaml (SAM, with CloudFormation's
// short-form tags) into what lambdasaga needs to know of it: the table, the
// queues and their dead-letter queues, the functions with their SQS event
// sources and schedules, the log groups they write to. Local mode creates resources from
// it, so the template stays the one source of truth, and Check holds it to
// the rules a deployment must keep.
package samtemplate

import (
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"
)

// Template is a parsed SAM template.
type Template struct {
	File       string
	Parameters map[string]string // parameter -> default
	Tables     []Table
	Queues     []Queue
	Functions  []Function
	LogGroups  []LogGroup
	Buckets    []Bucket
	allowed    map[string][]string   // parameter -> its AllowedValues, if it lists any
	resources  map[string]*yaml.Node // logical id -> resource node
	conditions map[string]*yaml.Node // condition name -> its expression
	rootNode   *yaml.Node
	order      []string
	globals    *yaml.Node // Globals.Function
}

// Table is an AWS::DynamoDB::Table.
type Table struct {
	Name                 string // logical id
	AttributeDefinitions []Attribute
	KeySchema            []Key
	GlobalIndexes        []Index
	BillingMode          string
	SSE                  bool
	PointInTimeRecovery  bool
	TTLAttribute         string
}

// Bucket is an AWS::S3::Bucket.
type Bucket struct {
	Name string // logical id
	// SSE: BucketEncryption has a default encryption.
	SSE bool
	// PublicAccessBlocked: all four settings of the public access block
	// are true.
	PublicAccessBlocked bool
	// Expiration is an enabled lifecycle rule's ExpirationInDays, on the
	// whole bucket, unconditional; zero Value: none. A rule under !If is
	// not read: it is an option.
	Expiration Value
	// EndedExpiration is an enabled lifecycle rule's ExpirationInDays on
	// the objects tagged EndedTag=1 alone, those of sagas that ended for
	// good (s3objects.EndedTag); zero Value: none.
	EndedExpiration Value
}

// EndedTag is the tag the objects of an ended saga carry
// (objects/s3objects.EndedTag, with the value "1").
const EndedTag = "lambdasaga-ended"

// Attribute is a key attribute definition.
type Attribute struct{ Name, Type string }

// Key is one element of a key schema.
type Key struct{ Name, KeyType string }

// Index is a global secondary index.
type Index struct {
	Name             string
	KeySchema        []Key
	ProjectionType   string
	NonKeyAttributes []string
}

// Queue is an AWS::SQS::Queue.
type Queue struct {
	Name              string // logical id
	VisibilityTimeout int    // seconds; 30 when unset, as in SQS
	DeadLetterQueue   string // logical id of its dead-letter queue, "" for none
	MaxReceiveCount   int
	Encrypted         bool
	// Retention is MessageRetentionPeriod in seconds; 345600 (4 days)
	// when unset, as in SQS.
	Retention int
}

// LogGroup is an AWS::Logs::LogGroup.
type LogGroup struct {
	Name string // logical id
	// RetentionInDays is the days its events are kept, a !Ref to a
	// parameter resolved to its default; 0 when unset: kept forever.
	RetentionInDays int
	// RetentionParameter is the parameter RetentionInDays refers to, ""
	// for a literal.
	RetentionParameter string
}

// Function is an AWS::Serverless::Function, with Globals applied.
type Function struct {
	Name        string // logical id
	CodeURI     string // relative to the template's directory
	Timeout     int    // seconds
	MemorySize  int
	Runtime     string
	Arch        string
	Environment map[string]Value
	Events      []EventSource // SQS event sources
	Schedules   []Schedule    // Schedule and ScheduleV2 events
	Policies    []Statement
	// AsyncRetries is EventInvokeConfig.MaximumRetryAttempts: how often
	// Lambda retries a failed asynchronous invocation (a schedule's); 2
	// when unset, as in Lambda.
	AsyncRetries int
	// LogGroup is LoggingConfig.LogGroup (the function's, else Globals'):
	// a !Ref to a log group of the template, a literal name, or nothing,
	// when Lambda writes to /aws/lambda/<function name>, creating it
	// without a retention.
	LogGroup Value
}

// EventSource is an SQS event of a function.
type EventSource struct {
	Name                    string
	Queue                   string // logical id of the queue
	BatchSize               int
	WindowSeconds           int
	ReportBatchItemFailures bool
}

// Schedule is a Schedule event of a function (an EventBridge rule that
// invokes it on a schedule), or a ScheduleV2 event (an EventBridge
// Scheduler schedule).
type Schedule struct {
	Name string
	// Expression is the schedule as written: rate(1 minute), cron(...), at(...).
	Expression string
	// Every is the period of a rate expression; 0 for cron and at
	// expressions, which name times rather than a period.
	Every time.Duration
	// Input is the JSON the function gets as its event; nil when unset,
	// when EventBridge sends its own scheduled event instead.
	Input json.RawMessage
	// Enabled is false for a schedule declared but switched off (Enabled:
	// false, or State: DISABLED).
	Enabled bool
	// V2 marks a ScheduleV2 event (EventBridge Scheduler).
	V2 bool
}

// Scheduled reports whether the function has a schedule.
func (f Function) Scheduled() bool { return len(f.Schedules) > 0 }

// Statement is one IAM policy statement.
type Statement struct {
	Sid       string
	Effect    string
	Actions   []string
	Resources []Value
}

// Value is a template value: a literal, or a reference to a parameter or
// resource (!Ref X, !GetAtt X.Attr), or something more (Other holds the tag).
type Value struct {
	Literal string
	Ref     string // !Ref target
	GetAtt  string // !GetAtt target, "X.Arn"
	Other   string // any other intrinsic, by tag
}

func (v Value) String() string {
	switch {
	case v.Ref != "":
		return "!Ref " + v.Ref
	case v.GetAtt != "":
		return "!GetAtt " + v.GetAtt
	case v.Other != "":
		return v.Other
	}
	return v.Literal
}

// Load reads and parses a template file.
func Load(file string) (*Template, error) {
	src, err := os.ReadFile(file)
	if err != nil {
		return nil, err
	}
	return Parse(file, src)
}

// Parse parses a template.
func Parse(file string, src []byte) (*Template, error) {
	var doc yaml.Node
	if err := yaml.Unmarshal(src, &doc); err != nil {
		return nil, fmt.Errorf("%s: %w", file, err)
	}
	if len(doc.Content) == 0 || doc.Content[0].Kind != yaml.MappingNode {
		return nil, fmt.Errorf("%s: not a template", file)
	}
	root := doc.Content[0]
	t := &Template{File: file, Parameters: map[string]string{}, allowed: map[string][]string{}, resources: map[string]*yaml.Node{}, conditions: map[string]*yaml.Node{}}
	t.rootNode = root
	for name, c := range pairs(get(root, "Conditions")) {
		t.conditions[name] = c
	}
	if g := get(get(root, "Globals"), "Function"); g != nil {
		t.globals = g
	}
	for name, p := range pairs(get(root, "Parameters")) {
		if d := get(p, "Default"); d != nil {
			t.Parameters[name] = d.Value
		}
		for _, v := range list(get(p, "AllowedValues")) {
			t.allowed[name] = append(t.allowed[name], scalar(v))
		}
	}
	res := get(root, "Resources")
	if res == nil {
		return nil, fmt.Errorf("%s: no Resources", file)
	}
	for name, r := range pairs(res) {
		t.resources[name] = r
		t.order = append(t.order, name)
		props := get(r, "Properties")
		var err error
		switch scalar(get(r, "Type")) {
		case "AWS::DynamoDB::Table":
			t.Tables = append(t.Tables, t.table(name, props))
		case "AWS::SQS::Queue":
			var q Queue
			q, err = t.queue(name, props)
			t.Queues = append(t.Queues, q)
		case "AWS::Serverless::Function":
			var f Function
			f, err = t.function(name, props)
			t.Functions = append(t.Functions, f)
		case "AWS::S3::Bucket":
			t.Buckets = append(t.Buckets, bucket(name, props))
		case "AWS::Logs::LogGroup":
			var lg LogGroup
			lg, err = t.logGroup(name, props)
			t.LogGroups = append(t.LogGroups, lg)
		}
		if err != nil {
			return nil, fmt.Errorf("%s: resource %s: %w", file, name, err)
		}
	}
	return t, nil
}

// bucket reads a bucket's encryption, public access block and the
// lifecycle rule that expires its objects.
func bucket(name string, props *yaml.Node) Bucket {
	b := Bucket{Name: name}
	for _, r := range list(get(get(props, "BucketEncryption"), "ServerSideEncryptionConfiguration")) {
		if scalar(get(get(r, "ServerSideEncryptionByDefault"), "SSEAlgorithm")) != "" {
			b.SSE = true
		}
	}
	pab := get(props, "PublicAccessBlockConfiguration")
	b.PublicAccessBlocked = true
	for _, k := range []string{"BlockPublicAcls", "BlockPublicPolicy", "IgnorePublicAcls", "RestrictPublicBuckets"} {
		if scalar(get(pab, k)) != "true" {
			b.PublicAccessBlocked = false
		}
	}
	for _, r := range list(get(get(props, "LifecycleConfiguration"), "Rules")) {
		if scalar(get(r, "Status")) != "Enabled" || get(r, "Prefix") != nil || get(r, "Filter") != nil {
			continue
		}
		e := value(get(r, "ExpirationInDays"))
		if e == (Value{}) {
			continue
		}
		tags := list(get(r, "TagFilters"))
		switch {
		case len(tags) == 0:
			b.Expiration = e
		case len(tags) == 1 && scalar(get(tags[0], "Key")) == EndedTag && scalar(get(tags[0], "Value")) == "1":
			b.EndedExpiration = e
		}
	}
	return b
}

// get returns the value of key in a mapping node, or nil.
func get(n *yaml.Node, key string) *yaml.Node {
	if n == nil || n.Kind != yaml.MappingNode {
		return nil
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		if n.Content[i].Value == key {
			return n.Content[i+1]
		}
	}
	return nil
}

// pairs iterates a mapping node in order.
func pairs(n *yaml.Node) func(func(string, *yaml.Node) bool) {
	return func(yield func(string, *yaml.Node) bool) {
		if n == nil || n.Kind != yaml.MappingNode {
			return
		}
		for i := 0; i+1 < len(n.Content); i += 2 {
			if !yield(n.Content[i].Value, n.Content[i+1]) {
				return
			}
		}
	}
}

func scalar(n *yaml.Node) string {
	if n == nil || n.Kind != yaml.ScalarNode {
		return ""
	}
	return n.Value
}

// value reads a scalar or a short-form intrinsic.
func value(n *yaml.Node) Value {
	if n == nil {
		return Value{}
	}
	switch n.Tag {
	case "!Ref":
		return Value{Ref: n.Value}
	case "!GetAtt":
		if n.Kind == yaml.SequenceNode && len(n.Content) == 2 {
			return Value{GetAtt: n.Content[0].Value + "." + n.Content[1].Value}
		}
		return Value{GetAtt: n.Value}
	}
	if n.Tag == "!Sub" && n.Kind == yaml.ScalarNode {
		return Value{Other: "!Sub", Literal: n.Value} // the text is checked for wildcards
	}
	if strings.HasPrefix(n.Tag, "!") && !strings.HasPrefix(n.Tag, "!!") { // "!!int" and the like are YAML's own
		return Value{Other: n.Tag}
	}
	if n.Kind == yaml.MappingNode && len(n.Content) == 2 {
		switch n.Content[0].Value {
		case "Ref":
			return Value{Ref: n.Content[1].Value}
		case "Fn::GetAtt":
			v := n.Content[1]
			if v.Kind == yaml.SequenceNode && len(v.Content) == 2 {
				return Value{GetAtt: v.Content[0].Value + "." + v.Content[1].Value}
			}
			return Value{GetAtt: v.Value}
		}
		return Value{Other: n.Content[0].Value}
	}
	return Value{Literal: n.Value}
}

// number resolves a number that may be a !Ref to a parameter's default.
func (t *Template) number(n *yaml.Node, dflt int) (int, error) {
	if n == nil {
		return dflt, nil
	}
	v := value(n)
	s := v.Literal
	if v.Ref != "" {
		d, ok := t.Parameters[v.Ref]
		if !ok {
			return 0, fmt.Errorf("!Ref %s: no such parameter with a default", v.Ref)
		}
		s = d
	}
	i, err := strconv.Atoi(s)
	if err != nil {
		return 0, fmt.Errorf("%q is not a number", v)
	}
	return i, nil
}

func list(n *yaml.Node) []*yaml.Node {
	if n == nil {
		return nil
	}
	if n.Kind == yaml.SequenceNode {
		return n.Content
	}
	return []*yaml.Node{n}
}

func keys(n *yaml.Node) []Key {
	var out []Key
	for _, k := range list(n) {
		out = append(out, Key{Name: scalar(get(k, "AttributeName")), KeyType: scalar(get(k, "KeyType"))})
	}
	return out
}

func (t *Template) table(name string, p *yaml.Node) Table {
	tb := Table{Name: name, BillingMode: scalar(get(p, "BillingMode")), KeySchema: keys(get(p, "KeySchema"))}
	for _, a := range list(get(p, "AttributeDefinitions")) {
		tb.AttributeDefinitions = append(tb.AttributeDefinitions, Attribute{Name: scalar(get(a, "AttributeName")), Type: scalar(get(a, "AttributeType"))})
	}
	for _, g := range list(get(p, "GlobalSecondaryIndexes")) {
		ix := Index{Name: scalar(get(g, "IndexName")), KeySchema: keys(get(g, "KeySchema"))}
		proj := get(g, "Projection")
		ix.ProjectionType = scalar(get(proj, "ProjectionType"))
		for _, a := range list(get(proj, "NonKeyAttributes")) {
			ix.NonKeyAttributes = append(ix.NonKeyAttributes, scalar(a))
		}
		tb.GlobalIndexes = append(tb.GlobalIndexes, ix)
	}
	tb.SSE = scalar(get(get(p, "SSESpecification"), "SSEEnabled")) == "true"
	tb.PointInTimeRecovery = scalar(get(get(p, "PointInTimeRecoverySpecification"), "PointInTimeRecoveryEnabled")) == "true"
	if ttl := get(p, "TimeToLiveSpecification"); scalar(get(ttl, "Enabled")) == "true" {
		tb.TTLAttribute = scalar(get(ttl, "AttributeName"))
	}
	return tb
}

func (t *Template) logGroup(name string, p *yaml.Node) (LogGroup, error) {
	lg := LogGroup{Name: name, RetentionParameter: value(get(p, "RetentionInDays")).Ref}
	var err error
	if lg.RetentionInDays, err = t.number(get(p, "RetentionInDays"), 0); err != nil {
		return lg, fmt.Errorf("RetentionInDays: %w", err)
	}
	return lg, nil
}

func (t *Template) queue(name string, p *yaml.Node) (Queue, error) {
	q := Queue{Name: name}
	var err error
	if q.VisibilityTimeout, err = t.number(get(p, "VisibilityTimeout"), 30); err != nil {
		return q, fmt.Errorf("VisibilityTimeout: %w", err)
	}
	if q.Retention, err = t.number(get(p, "MessageRetentionPeriod"), 345600); err != nil {
		return q, fmt.Errorf("MessageRetentionPeriod: %w", err)
	}
	q.Encrypted = scalar(get(p, "SqsManagedSseEnabled")) == "true" || get(p, "KmsMasterKeyId") != nil
	if rp := get(p, "RedrivePolicy"); rp != nil {
		target := value(get(rp, "deadLetterTargetArn"))
		q.DeadLetterQueue, _, _ = strings.Cut(target.GetAtt, ".")
		if q.MaxReceiveCount, err = t.number(get(rp, "maxReceiveCount"), 0); err != nil {
			return q, fmt.Errorf("RedrivePolicy.maxReceiveCount: %w", err)
		}
	}
	return q, nil
}

// prop reads a function property, falling back to Globals.Function.
func (t *Template) prop(p *yaml.Node, key string) *yaml.Node {
	if v := get(p, key); v != nil {
		return v
	}
	return get(t.globals, key)
}

func (t *Template) function(name string, p *yaml.Node) (Function, error) {
	f := Function{Name: name, CodeURI: scalar(get(p, "CodeUri")), Runtime: scalar(t.prop(p, "Runtime")), Environment: map[string]Value{}}
	var err error
	if f.Timeout, err = t.number(t.prop(p, "Timeout"), 3); err != nil {
		//lint:ignore ST1005 the template's property, spelled as in the template
		return f, fmt.Errorf("Timeout: %w", err)
	}
	if f.Timeout < 1 || f.Timeout > 900 {
		//lint:ignore ST1005 the template's property, spelled as in the template
		return f, fmt.Errorf("Timeout: %d seconds, outside Lambda's 1 to 900", f.Timeout)
	}
	if f.AsyncRetries, err = t.number(get(t.prop(p, "EventInvokeConfig"), "MaximumRetryAttempts"), 2); err != nil {
		return f, fmt.Errorf("EventInvokeConfig.MaximumRetryAttempts: %w", err)
	}
	if f.MemorySize, err = t.number(t.prop(p, "MemorySize"), 128); err != nil {
		return f, fmt.Errorf("MemorySize: %w", err)
	}
	// SAM merges a function's LoggingConfig into Globals' key by key.
	f.LogGroup = value(get(get(p, "LoggingConfig"), "LogGroup"))
	if f.LogGroup == (Value{}) {
		f.LogGroup = value(get(get(t.globals, "LoggingConfig"), "LogGroup"))
	}
	if archs := list(t.prop(p, "Architectures")); len(archs) > 0 {
		f.Arch = scalar(archs[0])
	}
	for _, env := range []*yaml.Node{get(get(t.globals, "Environment"), "Variables"), get(get(p, "Environment"), "Variables")} {
		for k, v := range pairs(env) {
			f.Environment[k] = value(v)
		}
	}
	for evName, ev := range pairs(get(p, "Events")) {
		if typ := scalar(get(ev, "Type")); typ == "Schedule" || typ == "ScheduleV2" {
			sc, err := schedule(evName, typ == "ScheduleV2", get(ev, "Properties"))
			if err != nil {
				return f, fmt.Errorf("event %s: %w", evName, err)
			}
			f.Schedules = append(f.Schedules, sc)
			continue
		}
		if scalar(get(ev, "Type")) != "SQS" {
			continue
		}
		ep := get(ev, "Properties")
		es := EventSource{Name: evName}
		es.Queue, _, _ = strings.Cut(value(get(ep, "Queue")).GetAtt, ".")
		if es.BatchSize, err = t.number(get(ep, "BatchSize"), 10); err != nil {
			return f, err
		}
		if es.WindowSeconds, err = t.number(get(ep, "MaximumBatchingWindowInSeconds"), 0); err != nil {
			return f, err
		}
		for _, rt := range list(get(ep, "FunctionResponseTypes")) {
			if scalar(rt) == "ReportBatchItemFailures" {
				es.ReportBatchItemFailures = true
			}
		}
		f.Events = append(f.Events, es)
	}
	for _, pol := range list(get(p, "Policies")) {
		f.Policies = append(f.Policies, statements(pol)...)
	}
	return f, nil
}

// schedule reads a Schedule or ScheduleV2 event's properties.
func schedule(name string, v2 bool, p *yaml.Node) (Schedule, error) {
	sc := Schedule{Name: name, V2: v2, Enabled: true}
	key := "Schedule"
	if v2 {
		key = "ScheduleExpression"
	}
	sc.Expression = strings.TrimSpace(scalar(get(p, key)))
	var err error
	if sc.Every, err = ScheduleEvery(sc.Expression); err != nil {
		return sc, fmt.Errorf("%s: %w", key, err)
	}
	if in := get(p, "Input"); in != nil {
		// A string of JSON text, as CloudFormation's Input wants: EventBridge
		// refuses anything else.
		if in.Kind != yaml.ScalarNode || !json.Valid([]byte(in.Value)) {
			return sc, fmt.Errorf("the Input %q is not JSON text", scalar(in))
		}
		sc.Input = json.RawMessage(in.Value)
	}
	if scalar(get(p, "Enabled")) == "false" || strings.EqualFold(scalar(get(p, "State")), "DISABLED") {
		sc.Enabled = false
	}
	return sc, nil
}

// ScheduleEvery returns the period of an EventBridge rate expression,
// rate(VALUE UNIT): VALUE a positive whole number, UNIT minute, hour or day,
// singular for a VALUE of 1 and plural otherwise (EventBridge User Guide,
// "Rate expressions reference": rate(1 hours) and rate(5 hour) are not
// valid). A cron(...) or at(...) expression has no period: 0, no error.
// Anything else is an error.
func ScheduleEvery(expr string) (time.Duration, error) {
	if (strings.HasPrefix(expr, "cron(") || strings.HasPrefix(expr, "at(")) && strings.HasSuffix(expr, ")") {
		return 0, nil
	}
	inner, isRate := strings.CutPrefix(expr, "rate(")
	inner, closed := strings.CutSuffix(inner, ")")
	if !isRate || !closed {
		return 0, fmt.Errorf("%q is not a rate(...), cron(...) or at(...) expression", expr)
	}
	fields := strings.Fields(inner)
	if len(fields) != 2 {
		return 0, fmt.Errorf("%q: want rate(VALUE UNIT), e.g. rate(5 minutes)", expr)
	}
	n, err := strconv.Atoi(fields[0])
	if err != nil || n < 1 {
		return 0, fmt.Errorf("%q: the value %q is not a positive whole number", expr, fields[0])
	}
	units := map[string]time.Duration{"minute": time.Minute, "hour": time.Hour, "day": 24 * time.Hour}
	unit, plural := strings.CutSuffix(fields[1], "s")
	d, known := units[unit]
	switch {
	case !known:
		return 0, fmt.Errorf("%q: unit %q is not minute(s), hour(s) or day(s)", expr, fields[1])
	case n == 1 && plural:
		return 0, fmt.Errorf("%q: a value of 1 takes the singular, %s", expr, unit)
	case n > 1 && !plural:
		return 0, fmt.Errorf("%q: a value over 1 takes the plural, %ss", expr, unit)
	case n > int(time.Duration(1<<63-1)/d):
		return 0, fmt.Errorf("%q: too long a period", expr)
	}
	return time.Duration(n) * d, nil
}

// statements collects IAM statements from a policy, looking inside !If.
func statements(pol *yaml.Node) []Statement {
	var out []Statement
	if pol.Tag == "!If" && pol.Kind == yaml.SequenceNode {
		for _, branch := range pol.Content[1:] {
			out = append(out, statements(branch)...)
		}
		return out
	}
	for _, s := range list(get(pol, "Statement")) {
		st := Statement{Sid: scalar(get(s, "Sid")), Effect: scalar(get(s, "Effect"))}
		for _, a := range list(get(s, "Action")) {
			st.Actions = append(st.Actions, scalar(a))
		}
		res := get(s, "Resource")
		if res != nil && res.Kind == yaml.SequenceNode && res.Tag == "!!seq" { // a list, not a sequence-form intrinsic
			for _, r := range res.Content {
				st.Resources = append(st.Resources, value(r))
			}
		} else if res != nil {
			st.Resources = append(st.Resources, value(res))
		}
		out = append(out, st)
	}
	return out
}

// LogGroup returns the log group with the logical id.
func (t *Template) LogGroup(name string) (LogGroup, bool) {
	i := slices.IndexFunc(t.LogGroups, func(lg LogGroup) bool { return lg.Name == name })
	if i < 0 {
		return LogGroup{}, false
	}
	return t.LogGroups[i], true
}

// Queue returns the queue with the logical id.
func (t *Template) Queue(name string) (Queue, bool) {
	i := slices.IndexFunc(t.Queues, func(q Queue) bool { return q.Name == name })
	if i < 0 {
		return Queue{}, false
	}
	return t.Queues[i], true
}
