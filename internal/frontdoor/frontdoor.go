// Package frontdoor gives the packages behind the module's root package
// (sagactl, the examples' commands, the benchmarks) what the root's types
// hold and keep unexported, without the root exporting the engine's
// types: the action registry of a lambdasaga.Actions. The root package
// sets it as it is initialised; a package that uses it imports the root
// too.
package frontdoor

import "github.com/lambdasaga/lambdasaga/internal/engine"

// Registry returns the engine registry of a *lambdasaga.Actions (nil for
// nil).
var Registry func(actions any) *engine.Registry

// ActionsOf returns a *lambdasaga.Actions over reg, for tests and tools
// that build a registry with the engine's own calls (SetFallback).
var ActionsOf func(reg *engine.Registry) any
