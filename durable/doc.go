// Package durable is the contract between lambdasaga's core and the adapters
// that keep its sagas: what a store, a queue and an object store must do,
// and the values they exchange. Statuses, saga and definition records with
// the params of every store call, the queue message and its encoding,
// deliveries, objects and their keys, the sentinel errors adapters return,
// and the clock they are given.
//
// It imports only the standard library, so an adapter compiles none of the
// engine (no CEL, no YAML). store/storetest, queue/queuetest and
// objects/objectstest are the conformance suites every Store, Queue and
// Objects must pass; docs/PROTOCOL.md says how package engine uses them to
// make every transition durable.
package durable
