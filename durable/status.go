package durable

// Status is where a saga stands. There are exactly six.
type Status string

const (
	StatusRunning            Status = "running"
	StatusWaiting            Status = "waiting"
	StatusCompensating       Status = "compensating"
	StatusSucceeded          Status = "succeeded"
	StatusCompensated        Status = "compensated"
	StatusCompensationFailed Status = "compensation_failed"
)

// Statuses lists every status.
func Statuses() []Status {
	return []Status{StatusRunning, StatusWaiting, StatusCompensating, StatusSucceeded, StatusCompensated, StatusCompensationFailed}
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
