package sagactl

import (
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"regexp"
	"strings"
	"time"
	"unicode"

	"github.com/lambdasaga/lambdasaga/internal/schedule"
)

// scheduleArgs is the schedule command's usage: two subcommands.
const scheduleArgs = "next EXPR [--tz ZONE] [--n 5] [--after TIME] [--start TIME] [--id-prefix P] | " +
	"snippet --name N --saga S --expr EXPR [--tz ZONE] [--input JSON|@FILE] [--id-prefix P]"

// scheduleUsage follows the schedule command's usage line.
const scheduleUsage = `
EXPR is an EventBridge Scheduler expression, quoted for the shell:
  'cron(minutes hours day-of-month month day-of-week year)', 'rate(5 minutes)', 'at(2027-01-01T09:00:00)'.
next lists when it fires, and with --id-prefix the id of the saga each firing starts.
snippet prints an AWS::Scheduler::Schedule resource and its role for infra/template.yaml:
  the schedule sends {"start": {"saga": S, "id": P<scheduled time>, "input": ...}} to the StartQueue.
docs/DEPLOY.md, "Schedules", says how the id makes a repeated delivery start once, and what
daylight saving time does.
`

func runSchedule(c *Config, args []string) int {
	sub := ""
	if len(args) > 0 {
		sub = args[0]
	}
	switch sub {
	case "next":
		return runScheduleNext(c, args[1:])
	case "snippet":
		return runScheduleSnippet(c, args[1:])
	case "-h", "--help", "help":
		c.commandUsage(flag.NewFlagSet("schedule", flag.ContinueOnError))
		return ExitOK
	case "":
		c.errorf("schedule: name next or snippet (see %s schedule --help)", c.Name)
	default:
		c.errorf("schedule: unknown subcommand %q: next or snippet (see %s schedule --help)", sub, c.Name)
	}
	return ExitUsage
}

func runScheduleNext(c *Config, args []string) int {
	fs := flag.NewFlagSet("schedule", flag.ContinueOnError)
	tz := fs.String("tz", "UTC", "the IANA time zone the expression is read in (the schedule's ScheduleExpressionTimezone)")
	n := fs.Int("n", 5, "how many starts to list, 1 to 1000")
	afterText := fs.String("after", "", "list the starts after TIME: RFC 3339 (2027-01-01T09:00:00Z), or yyyy-mm-ddThh:mm:ss in --tz (default: now)")
	startText := fs.String("start", "", "a rate schedule's start, its StartDate or when it is created, as --after (default: --after)")
	prefix := fs.String("id-prefix", "", "with the id of the saga each start gets, made of this prefix and the scheduled time")
	words, code, ok := c.flags(fs, args)
	if !ok {
		return code
	}
	expr := strings.Join(words, " ") // an unquoted cron(...) comes in words
	if expr == "" {
		c.errorf("schedule next: give an expression, such as 'cron(0 9 ? * MON-FRI *)' (quoted)")
		return ExitUsage
	}
	if *n < 1 || *n > 1000 {
		c.errorf("--n: %d: must be from 1 to 1000", *n)
		return ExitUsage
	}
	if *prefix != "" {
		if err := schedule.CheckIDPrefix(*prefix); err != nil {
			c.errorf("--id-prefix: %q: %v", *prefix, err)
			return ExitUsage
		}
	}
	loc, ok := c.scheduleZone(*tz)
	if !ok {
		return ExitUsage
	}
	after := time.Now()
	if *afterText != "" {
		if after, ok = c.flagTime("after", *afterText, loc); !ok {
			return ExitUsage
		}
	}
	// A rate schedule created at --after fires then: list from just
	// before its start, which its first firing is.
	start, from := after.Truncate(time.Second), after
	if *startText != "" {
		if start, ok = c.flagTime("start", *startText, loc); !ok {
			return ExitUsage
		}
	} else if strings.HasPrefix(expr, "rate(") {
		from = start.Add(-time.Nanosecond)
	}
	s, err := schedule.Parse(expr, schedule.Options{Timezone: *tz, Start: start})
	if err != nil {
		c.errorf("schedule next: %v", err)
		return ExitUsage
	}
	times := s.Next(from, *n)
	switch {
	case s.Kind() == schedule.KindRate && *startText == "":
		fmt.Fprintf(c.Stdout, "%s in %s, created at %s: its first %d start(s)\n", s, s.Location(), start.In(loc).Format(time.RFC3339), len(times))
	case len(times) == 0:
		fmt.Fprintf(c.Stdout, "%s in %s: no start after %s\n", s, s.Location(), after.In(loc).Format(time.RFC3339))
		return ExitOK
	default:
		fmt.Fprintf(c.Stdout, "%s in %s: the next %d start(s) after %s\n", s, s.Location(), len(times), after.In(loc).Format(time.RFC3339))
	}
	for _, at := range times {
		fmt.Fprintf(c.Stdout, "  %-25s  %s", at.Format(time.RFC3339), at.UTC().Format(time.RFC3339))
		if *prefix != "" {
			id, err := schedule.SagaID(*prefix, at)
			if err != nil {
				c.errorf("--id-prefix: %v", err)
				return ExitUsage
			}
			fmt.Fprintf(c.Stdout, "  %s", id)
		}
		fmt.Fprintln(c.Stdout)
	}
	return ExitOK
}

// scheduleZone loads --tz, saying so when it is not a zone.
func (c *Config) scheduleZone(tz string) (*time.Location, bool) {
	loc, err := schedule.Zone(tz)
	if err != nil {
		c.errorf("--tz: %q: %v", tz, err)
		return nil, false
	}
	return loc, true
}

// flagTime reads --NAME as RFC 3339, or as a wall-clock time in loc.
func (c *Config) flagTime(name, text string, loc *time.Location) (time.Time, bool) {
	if t, err := time.Parse(time.RFC3339, text); err == nil {
		return t, true
	}
	if t, err := time.ParseInLocation("2006-01-02T15:04:05", text, loc); err == nil {
		return t, true
	}
	c.errorf("--%s: %q is not a time: use RFC 3339 (2027-01-01T09:00:00Z) or yyyy-mm-ddThh:mm:ss in --tz", name, text)
	return time.Time{}, false
}

// logicalID is what CloudFormation takes as a resource's logical id.
var logicalID = regexp.MustCompile(`^[A-Za-z0-9]{1,200}$`)

func runScheduleSnippet(c *Config, args []string) int {
	fs := flag.NewFlagSet("schedule", flag.ContinueOnError)
	name := fs.String("name", "", "the schedule's logical id in the template (letters and digits); its role is NAME and Role")
	sagaName := fs.String("saga", "", "the name of the deployed definition each firing starts")
	expr := fs.String("expr", "", "the schedule expression: cron(...), rate(...) or at(...)")
	tz := fs.String("tz", "UTC", "the IANA time zone the expression is read in (ScheduleExpressionTimezone)")
	input := fs.String("input", "", "the saga's input: a JSON object, or @FILE (default: {})")
	prefix := fs.String("id-prefix", "", "what each saga id starts with, before the scheduled time (default: the saga's name and '-')")
	rest, code, ok := c.flags(fs, args)
	if !ok {
		return code
	}
	if len(rest) > 0 {
		c.errorf("schedule snippet: unexpected argument %q: give the expression with --expr, quoted", rest[0])
		return ExitUsage
	}
	for _, f := range []struct{ flag, value string }{{"name", *name}, {"saga", *sagaName}, {"expr", *expr}} {
		if f.value == "" {
			c.errorf("--%s: required (see %s schedule --help)", f.flag, c.Name)
			return ExitUsage
		}
	}
	if strings.ContainsFunc(*expr, unicode.IsControl) {
		c.errorf("--expr: holds a line break or another control character")
		return ExitUsage
	}
	if !logicalID.MatchString(*name) {
		c.errorf("--name: %q: a template's logical id is letters and digits only", *name)
		return ExitUsage
	}
	if _, ok := c.scheduleZone(*tz); !ok {
		return ExitUsage
	}
	// A rate schedule starts when it is created: any start parses it.
	if _, err := schedule.Parse(*expr, schedule.Options{Timezone: *tz, Start: time.Unix(0, 0)}); err != nil {
		c.errorf("--expr: %v", err)
		return ExitUsage
	}
	if *prefix == "" {
		*prefix = *sagaName + "-"
	}
	if err := schedule.CheckIDPrefix(*prefix); err != nil {
		c.errorf("--id-prefix: %q: %v", *prefix, err)
		return ExitUsage
	}
	in, ok := c.readInput(*input)
	if !ok {
		return ExitUsage
	}
	raw, err := json.Marshal(in)
	if err != nil {
		c.errorf("--input: %v", err)
		return ExitUsage
	}
	req, err := schedule.Request(*sagaName, *prefix, raw)
	if err != nil {
		c.errorf("--saga: %v", err)
		return ExitUsage
	}
	// An example id: the first firing in 2027 (or none, for a schedule
	// that has fired its last), the same whenever the snippet is made.
	example := *prefix + "<scheduled time>"
	ref := time.Date(2027, 1, 1, 0, 0, 0, 0, time.UTC)
	if s, err := schedule.Parse(*expr, schedule.Options{Timezone: *tz, Start: ref}); err == nil {
		if first := s.Next(ref.Add(-time.Nanosecond), 1); len(first) == 1 {
			example, _ = schedule.SagaID(*prefix, first[0])
		}
	}
	writeScheduleSnippet(c.Stdout, scheduleSnippet{Name: *name, Saga: *sagaName, Expr: *expr, Timezone: *tz, Prefix: *prefix, Example: example, Input: req})
	return ExitOK
}

// scheduleSnippet is what a snippet holds.
type scheduleSnippet struct {
	Name, Saga, Expr, Timezone, Prefix string
	Example                            string // a saga id it gives
	Input                              string // the target's Input: the start request
}

// yamlString quotes s for YAML: single quotes, which escape nothing but
// themselves (doubled), so a JSON text reads back byte for byte.
func yamlString(s string) string { return "'" + strings.ReplaceAll(s, "'", "''") + "'" }

// writeScheduleSnippet prints the schedule and its role as resources to
// paste under Resources: in infra/template.yaml, indented as there. The
// role may send to the start queue (the target) and to its dead-letter
// queue: EventBridge Scheduler delivers a dead-letter event with the
// schedule's execution role (EventBridge Scheduler User Guide,
// "Configuring a dead-letter queue").
func writeScheduleSnippet(w io.Writer, s scheduleSnippet) {
	fmt.Fprintf(w, `  # Starts saga %[2]s at each firing of %[3]s in %[4]s. The saga's id is %[5]s
  # and the scheduled time in UTC (%[11]s): a delivery EventBridge Scheduler
  # repeats carries the same id, and the start queue starts that saga once.
  %[1]s:
    Type: AWS::Scheduler::Schedule
    Properties:
      Description: %[6]s
      ScheduleExpression: %[7]s
      ScheduleExpressionTimezone: %[8]s
      FlexibleTimeWindow:
        Mode: "OFF"
      State: ENABLED
      Target:
        Arn: !GetAtt StartQueue.Arn
        RoleArn: !GetAtt %[1]sRole.Arn
        Input: %[9]s
        # Scheduler's most: a day and 185 attempts. Retries are safe (the
        # same id); what still fails goes to the start queue's dead letters.
        RetryPolicy:
          MaximumEventAgeInSeconds: 86400
          MaximumRetryAttempts: 185
        DeadLetterConfig:
          Arn: !GetAtt StartDeadLetterQueue.Arn

  %[1]sRole:
    Type: AWS::IAM::Role
    Properties:
      Description: %[10]s
      AssumeRolePolicyDocument:
        Version: "2012-10-17"
        Statement:
          - Effect: Allow
            Principal: {Service: scheduler.amazonaws.com}
            Action: sts:AssumeRole
            Condition:
              StringEquals:
                aws:SourceAccount: !Ref AWS::AccountId
      Policies:
        - PolicyName: StartQueueSend
          PolicyDocument:
            Version: "2012-10-17"
            Statement:
              # The start request, and the dead-letter event of one that
              # could not be sent (Scheduler sends it with this role).
              - Sid: StartRequests
                Effect: Allow
                Action: [sqs:SendMessage]
                Resource: [!GetAtt StartQueue.Arn, !GetAtt StartDeadLetterQueue.Arn]
`, s.Name, s.Saga, s.Expr, s.Timezone, s.Prefix,
		yamlString(fmt.Sprintf("Starts saga %s on %s (%s); id %s<scheduled time>", s.Saga, s.Expr, s.Timezone, s.Prefix)),
		yamlString(s.Expr), yamlString(s.Timezone), yamlString(s.Input),
		yamlString(fmt.Sprintf("Lets schedule %s send start requests to the start queue", s.Name)), s.Example)
}
