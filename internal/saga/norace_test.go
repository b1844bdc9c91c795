//go:build !race

package saga

const raceEnabled = false
