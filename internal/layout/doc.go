// Package layout holds the test that keeps the module's dependencies
// pointing one way (see the README's layout table): the contract in
// durable imports only the standard library, adapters compile none of the
// engine, and the core knows nothing of AWS. It has no code of its own.
package layout
