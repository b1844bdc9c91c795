package saga

// CheckCompensationWithin is CheckCompensation with a bound of its own on
// the walk, for the external tests of truncation.
func CheckCompensationWithin(p *Plan, maxStates int) *CompensationCheck {
	return p.checkCompensation(maxStates)
}
