package samtemplate_test

import (
	"os"
	"testing"

	"go.yaml.in/yaml/v3"

	"github.com/lambdasaga/lambdasaga/internal/samtemplate"
)

// The budget alarm exists only with CostBudgetPerDay, sums a day of both
// work functions' EstimatedCost, and notifies the alarm topic.
func TestTemplateBudgetAlarm(t *testing.T) {
	src, err := os.ReadFile(templateFile)
	if err != nil {
		t.Fatal(err)
	}
	var raw struct {
		Parameters map[string]struct {
			Type           string `yaml:"Type"`
			Default        string `yaml:"Default"`
			AllowedPattern string `yaml:"AllowedPattern"`
		} `yaml:"Parameters"`
		Conditions map[string]yaml.Node `yaml:"Conditions"`
		Resources  map[string]struct {
			Condition  string `yaml:"Condition"`
			Properties struct {
				Threshold    yaml.Node `yaml:"Threshold"`
				AlarmActions yaml.Node `yaml:"AlarmActions"`
				Metrics      []struct {
					ID         string `yaml:"Id"`
					Expression string `yaml:"Expression"`
					ReturnData bool   `yaml:"ReturnData"`
					MetricStat *struct {
						Metric struct {
							Namespace  string `yaml:"Namespace"`
							MetricName string `yaml:"MetricName"`
							Dimensions []struct {
								Name  string    `yaml:"Name"`
								Value yaml.Node `yaml:"Value"`
							} `yaml:"Dimensions"`
						} `yaml:"Metric"`
						Period int    `yaml:"Period"`
						Stat   string `yaml:"Stat"`
					} `yaml:"MetricStat"`
				} `yaml:"Metrics"`
			} `yaml:"Properties"`
		} `yaml:"Resources"`
	}
	if err := yaml.Unmarshal(src, &raw); err != nil {
		t.Fatal(err)
	}
	p, ok := raw.Parameters["CostBudgetPerDay"]
	if !ok || p.Default != "" || p.Type != "String" || p.AllowedPattern == "" {
		t.Fatalf("CostBudgetPerDay %+v: want a String parameter, empty by default, with a pattern", p)
	}
	cond := raw.Conditions["HasCostBudget"]
	if b, _ := yaml.Marshal(&cond); string(b) != "!Not [!Equals [!Ref CostBudgetPerDay, \"\"]]\n" {
		t.Errorf("HasCostBudget is %s", b)
	}
	a, ok := raw.Resources["BudgetAlarm"]
	if !ok || a.Condition != "HasCostBudget" {
		t.Fatalf("BudgetAlarm %+v: want it under HasCostBudget", a)
	}
	if a.Properties.Threshold.Tag != "!Ref" || a.Properties.Threshold.Value != "CostBudgetPerDay" {
		t.Errorf("Threshold is %s %s, want !Ref CostBudgetPerDay", a.Properties.Threshold.Tag, a.Properties.Threshold.Value)
	}
	if b, _ := yaml.Marshal(&a.Properties.AlarmActions); string(b) != "!If [HasAlarmTopic, [!Ref AlarmTopicArn], !Ref 'AWS::NoValue']\n" {
		t.Errorf("AlarmActions is %s", b)
	}
	functions := map[string]bool{}
	returned := 0
	for _, m := range a.Properties.Metrics {
		if m.ReturnData {
			returned++
			if m.Expression != "FILL(advance, 0) + FILL(compensate, 0)" {
				t.Errorf("the returned expression is %q", m.Expression)
			}
			continue
		}
		s := m.MetricStat
		if s == nil || s.Metric.Namespace != "lambdasaga" || s.Metric.MetricName != "EstimatedCost" || s.Period != 86400 || s.Stat != "Sum" ||
			len(s.Metric.Dimensions) != 1 || s.Metric.Dimensions[0].Name != "Function" || s.Metric.Dimensions[0].Value.Tag != "!Ref" {
			t.Errorf("metric %s: %+v, want a day's Sum of lambdasaga EstimatedCost by Function", m.ID, s)
			continue
		}
		functions[s.Metric.Dimensions[0].Value.Value] = true
	}
	if returned != 1 || !functions["AdvanceFunction"] || !functions["CompensateFunction"] || len(functions) != 2 {
		t.Errorf("%d expressions returned, functions %v: want one sum of the advance and compensate functions", returned, functions)
	}
	tpl, err := samtemplate.Load(templateFile)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tpl.Properties("BudgetAlarm"); err != nil {
		t.Fatal(err)
	}
}
