// Package engine is the domain core of lambdasaga: saga definitions and their
// validation, the compiled Plan (CEL programs compiled once), run State and its
// binary encoding, the pure Advance transition with retries and compensation,
// and the Store and Queue interfaces with the Coordinator that drives them.
//
// It knows nothing of AWS: adapters in store/ and queue/ implement its
// interfaces, and the Lambda functions and sagactl wire them together.
package engine
