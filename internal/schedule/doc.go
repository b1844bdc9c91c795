// Package schedule reads Amazon EventBridge Scheduler's schedule
// expressions, in their time zone, and lists when a schedule fires; and it
// derives the saga id a scheduled start carries, so that a delivery
// EventBridge Scheduler repeats starts the saga once.
//
// The expressions are those of the EventBridge Scheduler User Guide,
// "Schedule types in EventBridge Scheduler"
// (https://docs.aws.amazon.com/scheduler/latest/UserGuide/schedule-types.html),
// with the cron fields of the EventBridge User Guide, "Cron expressions
// reference"
// (https://docs.aws.amazon.com/eventbridge/latest/userguide/eb-cron-expressions.html):
//
//   - cron(minutes hours day-of-month month day-of-week year): minutes
//     0-59, hours 0-23, day-of-month 1-31, month 1-12 or JAN-DEC,
//     day-of-week 1-7 or SUN-SAT (1 is Sunday), year 1970-2199. Every field
//     takes ',' (a list), '-' (a range) and '*' (all); minutes, hours,
//     day-of-month, month and year take '/' (an increment: 0/15 is every
//     fifteenth minute from 0, and */15 the same). Exactly one of
//     day-of-month and day-of-week is '?': the other chooses the days.
//     day-of-month also takes L (the month's last day) and nW (the weekday
//     nearest day n, within the month); day-of-week takes L (Saturday, the
//     week's last day), nL (the month's last day n, 6L its last Friday) and
//     n#k (its k-th day n, 3#2 its second Tuesday; the field then holds
//     nothing else). L, nW and nL stand alone in their field too. A range
//     runs upwards (no 5-1), an increment is 1 at least and at most the
//     field's largest value; names are read in any case.
//   - rate(value unit): value a positive whole number, unit minute,
//     minutes, hour, hours, day or days (the CreateSchedule API Reference
//     lists the six; the singular-for-1 rule of EventBridge rules is not a
//     Scheduler rule). A rate schedule fires at its start (its StartDate,
//     or the moment it was created) and every period after; a day is 24
//     hours whatever the clocks do.
//   - at(yyyy-mm-ddThh:mm:ss): once, at that wall-clock time in the
//     schedule's time zone.
//
// The time zone is an IANA name (ScheduleExpressionTimezone; UTC when
// empty). Daylight saving time, as the User Guide's "Daylight saving time
// on EventBridge Scheduler" and the knowledge-center article
// https://repost.aws/knowledge-center/eventbridge-scheduler-adjust-dst say:
// a cron time that the clocks skip when they move forward does not fire
// that day; a cron time that happens twice when they move back fires once.
// Which of the two the documents do not say: this package takes the first.
// An at time that does not exist in its zone is refused.
//
// The saga id (SagaID, Request): EventBridge Scheduler replaces
// <aws.scheduler.scheduled-time> in a target's Input with the time the
// schedule was due, in UTC to the second, as 2022-03-22T18:59:43Z
// (EventBridge Scheduler User Guide, "Adding context attributes",
// https://docs.aws.amazon.com/scheduler/latest/UserGuide/managing-schedule-context-attributes.html).
// It is the same on every delivery and retry of one firing, so a start
// request whose id is a prefix and that time names one saga per firing,
// and the start queue runs a repeated start of an id once.
package schedule
