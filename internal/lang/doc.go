// Package lang is the saga definition language: the syntax tree of a
// definition (steps, values, templates, catches, retries, compensations),
// its YAML and JSON parser, the positions every node keeps, and the
// problems parsing finds, each with file, line, step and field.
//
// It checks what can be checked without types: shape, known fields, step
// kinds, names, durations and limits. Package saga compiles a parsed
// definition (CEL type checking, the step graph) into a plan.
// docs/DEFINITIONS.md is the language's reference.
//
// It imports only durable (the queue's delay limit bounds durations) and a
// YAML parser: no CEL, no engine, nothing of AWS (internal/layout checks it).
package lang
