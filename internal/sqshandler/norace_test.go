//go:build !race

package sqshandler_test

const raceEnabled = false
