package sqshandler_test

import (
	"bytes"
	"encoding/json"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/lambdasaga/lambdasaga/durable"
	"github.com/lambdasaga/lambdasaga/internal/emf"
	"github.com/lambdasaga/lambdasaga/internal/engine"
	"github.com/lambdasaga/lambdasaga/internal/lang"
	"github.com/lambdasaga/lambdasaga/internal/memqueue"
	"github.com/lambdasaga/lambdasaga/internal/memstore"
	"github.com/lambdasaga/lambdasaga/internal/saga"
	"github.com/lambdasaga/lambdasaga/internal/samtemplate"
)

const templateFile = "../../infra/template.yaml"

// Every metric of the namespace lambdasaga that the template's alarms and
// dashboard name, with its dimensions, is one the functions emit: the
// metric lines of real batches (sagas that succeed, retry, compensate and
// park, a malformed record), of a caught step, of a held saga, and of the
// sweep are
// collected and the template is held to them. A metric renamed in the
// code and not in the template, or the other way round, fails here rather
// than as an alarm that never fires.
func TestTemplateNamesOnlyEmittedMetrics(t *testing.T) {
	emitted := emittedMetrics(t)
	named := templateMetrics(t)
	if len(named) < 15 {
		t.Fatalf("found %d metrics of lambdasaga in the alarms and the dashboard: the parse missed some", len(named))
	}
	for _, m := range named {
		if !emitted[m.key()] {
			t.Errorf("%s names metric %s with dimensions [%s], which the functions do not emit (they emit %v)", m.where, m.name, strings.Join(m.dims, ","), slices.Sorted(func(yield func(string) bool) {
				for k := range emitted {
					if !yield(k) {
						return
					}
				}
			}))
		}
	}
}

type namedMetric struct {
	where, name string
	dims        []string // sorted
}

func (m namedMetric) key() string { return m.name + "[" + strings.Join(m.dims, ",") + "]" }

// emittedMetrics runs the emitter and returns every metric it wrote, by
// name and dimension set.
func emittedMetrics(t *testing.T) map[string]bool {
	t.Helper()
	clock := durable.NewManualClock(time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC))
	r := newMetricsRig(t, memstore.New(), memqueue.New(memqueue.Config{Clock: clock}), clock)
	r.start(t, "s-1", "s-2", "s-3", "s-4")
	r.charge["s-2"] = saga.Permanent(saga.NewError("CardDeclined", "no"))
	r.charge["s-3"] = saga.NewError("Unavailable", "later")
	r.charge["s-4"] = saga.Permanent(saga.NewError("CardDeclined", "no"))
	r.release["s-2"] = saga.Permanent(saga.NewError("Gone", "cannot release"))
	var lines []string
	lines = append(lines, r.handle(t, r.batch(t, durable.QueueAdvance, "not a message"))...)
	lines = append(lines, r.handle(t, r.batch(t, durable.QueueAdvance))...)
	lines = append(lines, r.handle(t, r.batch(t, durable.QueueCompensate))...)
	// A step that failed and was caught: the shop saga has no catch.
	var out bytes.Buffer
	rec := emf.New(emf.Config{Out: &out, Function: "f", MemoryMB: 256}) // with EstimatedCost
	rec.OnStep(engine.StepEvent{SagaID: "c-1", SagaName: "caught", Version: 3, Status: durable.StatusRunning,
		StepRecord: saga.StepRecord{Step: "charge", Kind: lang.KindAction, Outcome: saga.OutcomeCaught}})
	// A step that failed in a saga that holds: the shop saga compensates.
	rec.OnStep(engine.StepEvent{SagaID: "h-1", SagaName: "held", Version: 3, Status: durable.StatusHeld,
		StepRecord: saga.StepRecord{Step: "charge", Kind: lang.KindAction, Outcome: saga.OutcomeFailed}})
	if err := rec.Flush(); err != nil {
		t.Fatal(err)
	}
	if err := emf.WriteSweep(&out, "sweep-fn", clock.Now(), &engine.SweepResult{}); err != nil {
		t.Fatal(err)
	}
	lines = append(lines, strings.SplitAfter(strings.TrimSuffix(out.String(), "\n"), "\n")...)
	emitted := map[string]bool{}
	for _, l := range lines {
		var doc struct {
			AWS struct {
				CloudWatchMetrics []struct {
					Namespace  string
					Dimensions [][]string
					Metrics    []struct{ Name string }
				}
			} `json:"_aws"`
		}
		if err := json.Unmarshal([]byte(l), &doc); err != nil {
			t.Fatalf("%s: %v", l, err)
		}
		for _, d := range doc.AWS.CloudWatchMetrics {
			for _, set := range d.Dimensions {
				for _, m := range d.Metrics {
					emitted[namedMetric{name: m.Name, dims: slices.Sorted(slices.Values(set))}.key()] = true
				}
			}
		}
	}
	return emitted
}

// searchMetric reads a SEARCH expression's schema and metric name.
var searchMetric = regexp.MustCompile(`\{lambdasaga((?:,\w+)*)\}\s+MetricName="(\w+)"`)

// templateMetrics returns the metrics of the namespace lambdasaga that the
// template's alarms and dashboards name.
func templateMetrics(t *testing.T) []namedMetric {
	t.Helper()
	tpl, err := samtemplate.Load(templateFile)
	if err != nil {
		t.Fatal(err)
	}
	src, err := os.ReadFile(templateFile)
	if err != nil {
		t.Fatal(err)
	}
	var raw struct {
		Resources map[string]struct {
			Type string `yaml:"Type"`
		} `yaml:"Resources"`
	}
	if err := yaml.Unmarshal(src, &raw); err != nil {
		t.Fatal(err)
	}
	var named []namedMetric
	alarms, dashboards := 0, 0
	for _, id := range slices.Sorted(func(yield func(string) bool) {
		for id := range raw.Resources {
			if !yield(id) {
				return
			}
		}
	}) {
		typ := raw.Resources[id].Type
		if typ != "AWS::CloudWatch::Alarm" && typ != "AWS::CloudWatch::Dashboard" {
			continue
		}
		props, err := tpl.Properties(id)
		if err != nil {
			t.Fatal(err)
		}
		if typ == "AWS::CloudWatch::Alarm" {
			alarms++
			metrics := []any{props} // a metric, or metric math's
			for _, q := range listOf(props["Metrics"]) {
				stat, _ := q.(map[string]any)["MetricStat"].(map[string]any)
				metrics = append(metrics, stat["Metric"])
			}
			for _, v := range metrics {
				metric, _ := v.(map[string]any)
				if metric["Namespace"] != emf.Namespace {
					continue
				}
				m := namedMetric{where: id, name: metric["MetricName"].(string)}
				for _, d := range listOf(metric["Dimensions"]) {
					m.dims = append(m.dims, d.(map[string]any)["Name"].(string))
				}
				slices.Sort(m.dims)
				named = append(named, m)
			}
			continue
		}
		dashboards++
		body, ok := props["DashboardBody"].(samtemplate.Value)
		if !ok || body.Other != "!Sub" {
			t.Fatalf("%s: DashboardBody is %#v, want a !Sub string", id, props["DashboardBody"])
		}
		// What !Sub substitutes is known at deploy time only; here a
		// placeholder, so the body parses.
		text := regexp.MustCompile(`\$\{[^}]+\}`).ReplaceAllString(body.Literal, "X")
		var dash struct {
			Widgets []struct {
				Properties struct{ Metrics [][]any }
			}
		}
		if err := json.Unmarshal([]byte(text), &dash); err != nil {
			t.Fatalf("%s: DashboardBody is not JSON: %v", id, err)
		}
		for _, w := range dash.Widgets {
			var prev []any
			for _, row := range w.Properties.Metrics {
				if expr, ok := row[0].(map[string]any); ok {
					for _, sm := range searchMetric.FindAllStringSubmatch(expr["expression"].(string), -1) {
						m := namedMetric{where: id, name: sm[2], dims: strings.Split(strings.TrimPrefix(sm[1], ","), ",")}
						if sm[1] == "" {
							m.dims = nil
						}
						slices.Sort(m.dims)
						named = append(named, m)
					}
					continue
				}
				var parts []string
				for i, v := range row {
					s, ok := v.(string)
					if !ok {
						break // the rendering options
					}
					if s == "." && i < len(prev) { // the row before's value
						s = prev[i].(string)
					}
					parts = append(parts, s)
				}
				prev = row
				if len(parts) < 2 || parts[0] != emf.Namespace {
					continue
				}
				m := namedMetric{where: id, name: parts[1]}
				for i := 2; i+1 < len(parts); i += 2 {
					m.dims = append(m.dims, parts[i])
				}
				slices.Sort(m.dims)
				named = append(named, m)
			}
		}
	}
	if alarms < 4 || dashboards != 1 {
		t.Fatalf("%d alarms and %d dashboards: want the two dead-letter alarms, the two on parked sagas, and a dashboard", alarms, dashboards)
	}
	return named
}

func listOf(v any) []any {
	l, _ := v.([]any)
	return l
}
