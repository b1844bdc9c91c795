package saga

// For the external tests: the retry delay and the definition hash, which
// users see through Event outcomes and Plan.Hash.
var (
	Backoff        = backoff
	DefinitionHash = definitionHash
)

// AllowForks returns opts with parallel, foreach and saga steps allowed to
// compile, as they will be once their runtime lands.
func AllowForks(opts Options) Options {
	opts.allowForks = true
	return opts
}
