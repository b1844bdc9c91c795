package saga

// For the external tests: the retry delay and the definition hash, which
// users see through Event outcomes and Plan.Hash.
var (
	Backoff        = backoff
	DefinitionHash = definitionHash
)

// AllowForks returns opts: parallel, foreach and saga steps compile.
func AllowForks(opts Options) Options { return opts }
