package cost

import (
	"math"
	"time"

	"github.com/lambdasaga/lambdasaga/durable"
)

// Usage is billed work in the units AWS bills it: what a walk's path
// takes, or what a function measured while it handled one saga's
// messages (package emf's EstimatedCost). Prices.USD prices it, the walk
// and the functions with the same expressions, so the two agree to the
// last bit for the same counts.
type Usage struct {
	// Invocations are Lambda requests: a record of a batch of n is 1/n of
	// its invocation.
	Invocations float64
	// GBSeconds is Lambda compute: seconds billed times memory in GB.
	GBSeconds float64
	// SQSRequests are billed SQS requests (each 64 KB chunk of a payload
	// one, a batch of up to 10 messages one).
	SQSRequests float64
	// WRU and RRU are DynamoDB on-demand write and read request units, as
	// billed: WriteUnits and ReadUnits per request, indexes' writes
	// included.
	WRU, RRU float64
	// S3Puts are S3 requests billed at the PUT price (PUT, COPY, LIST);
	// S3Gets those billed at the GET price.
	S3Puts, S3Gets float64
}

// Add adds v's counts to u.
func (u *Usage) Add(v Usage) {
	u.Invocations += v.Invocations
	u.GBSeconds += v.GBSeconds
	u.SQSRequests += v.SQSRequests
	u.WRU += v.WRU
	u.RRU += v.RRU
	u.S3Puts += v.S3Puts
	u.S3Gets += v.S3Gets
}

// Zero reports whether u counts nothing.
func (u Usage) Zero() bool { return u == Usage{} }

// USD is what u costs at p, the parts summed in Parts order (storage,
// which Usage does not count, aside).
func (p Prices) USD(u Usage) float64 {
	var b [6]float64
	p.parts(u, &b)
	sum := 0.0
	for _, v := range b {
		sum += v
	}
	return sum
}

// parts prices u by part, in Parts order without "s3 storage".
func (p Prices) parts(u Usage, b *[6]float64) {
	b[0] = u.Invocations * p.LambdaPerMillionRequests / 1e6
	b[1] = u.GBSeconds * p.LambdaArmPerGBSecond
	b[2] = u.SQSRequests * p.SQSPerMillionRequests / 1e6
	b[3] = u.WRU * p.DynamoPerMillionWRU / 1e6
	b[4] = u.RRU * p.DynamoPerMillionRRU / 1e6
	b[5] = u.S3Puts*p.S3PerThousandPuts/1e3 + u.S3Gets*p.S3PerThousandGets/1e3
}

// GBSeconds is Lambda compute for d at memoryMB: duration times the
// memory in GB, 1,024 MB each (https://aws.amazon.com/lambda/pricing/;
// Lambda rounds an invocation's duration up to the millisecond, which a
// share of one does not).
func GBSeconds(d time.Duration, memoryMB int) float64 {
	return d.Seconds() * float64(memoryMB) / 1024
}

// WriteUnits is what one write of an item (or an index entry) of n bytes
// bills on demand: 1 unit per KB, rounded up (DynamoDB Developer Guide,
// "Read and write operations": a write of up to 1 KB is one unit). A
// conditional write that fails bills the same.
func WriteUnits(n int) float64 { return math.Max(1, math.Ceil(float64(n)/1024)) }

// ReadUnits is what one strongly consistent read of an item of n bytes
// bills on demand: 1 unit per 4 KB, rounded up (the same page).
func ReadUnits(n int) float64 { return math.Max(1, math.Ceil(float64(n)/4096)) }

// SagaItemBytes is the size DynamoDB gives the saga item of r, as
// store/dynamo writes it (itemBytes; its state's bytes, a ttl once the
// saga ended for good), and IndexEntryBytes its by_status entry.
func SagaItemBytes(r *durable.SagaRecord) int {
	p := Params{SagaIDBytes: len(r.SagaID)}
	final := r.Status == durable.StatusSucceeded || r.Status == durable.StatusCompensated
	return len(r.State) + itemBytes(p, r.Name, string(r.Status), final)
}

// IndexEntryBytes is the by_status entry of r (indexEntryBytes).
func IndexEntryBytes(r *durable.SagaRecord) int {
	return indexEntryBytes(Params{SagaIDBytes: len(r.SagaID)}, r.Name, string(r.Status))
}
