package durable

// Status is where a saga stands. There are exactly seven.
type Status string

const (
	StatusRunning            Status = "running"             // steps are executing; an action (or its retry) is pending
	StatusWaiting            Status = "waiting"             // paused on a timer or a signal; reserved for wait and await steps, not yet built
	StatusCompensating       Status = "compensating"        // a step failed for good; compensations run, newest first
	StatusHeld               Status = "held"                // a step failed for good in a saga that holds on failure; waits for an operator to retry it or compensate
	StatusSucceeded          Status = "succeeded"           // final: the steps ended or a succeed step ran
	StatusCompensated        Status = "compensated"         // final: the saga failed or was cancelled, and every compensation completed
	StatusCompensationFailed Status = "compensation_failed" // final until resumed: a compensation failed for good; parked for an operator
)

// Statuses lists every status.
func Statuses() []Status {
	return []Status{StatusRunning, StatusWaiting, StatusCompensating, StatusHeld, StatusSucceeded, StatusCompensated, StatusCompensationFailed}
}

// Final reports whether nothing more will happen to a saga in this status
// without an operator: succeeded, compensated, or parked in compensation_failed.
func (s Status) Final() bool {
	return s == StatusSucceeded || s == StatusCompensated || s == StatusCompensationFailed
}

// Valid reports whether s is one of Statuses.
func (s Status) Valid() bool {
	for _, v := range Statuses() {
		if s == v {
			return true
		}
	}
	return false
}
