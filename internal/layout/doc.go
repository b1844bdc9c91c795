// Package layout holds the tests that keep the module's shape true: the
// README's layout table matches what each package imports, and every row
// imports only rows above it; the contract in durable imports only the
// standard library, adapters compile none of the engine, and the core
// knows nothing of AWS; every exported name is documented; no exported
// signature of a public package names a type from internal/; and the
// README's Go snippets are cut from runnable examples. It has no code of
// its own.
package layout
