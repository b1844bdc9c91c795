// Package bench holds the measurements that need the emulators: the
// request economy of whole sagas, how cost and latency grow with the size
// of a saga's variables, and end-to-end throughput next to the floor of the
// same raw DynamoDB and SQS calls. Engine benchmarks live beside the engine.
// Results, with the commands that produce them, are in README.md.
package bench
