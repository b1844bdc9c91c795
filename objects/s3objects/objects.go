// Package s3objects is durable.Objects on Amazon S3: one bucket, an object
// per offloaded value under its content-addressed key
// (durable.ObjectKey). The bucket's encryption, public access block and
// the lifecycle that expires objects with their sagas' retention are the
// template's (infra/template.yaml); this package puts and gets, and marks
// the objects of a saga that ended (ObjectsEnd) with the tag
// EndedTag=EndedValue that the lifecycle's rule expires.
package s3objects

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/aws/smithy-go"

	"github.com/lambdasaga/lambdasaga/durable"
)

var (
	_ durable.Objects      = (*Objects)(nil)
	_ durable.ObjectsEnder = (*Objects)(nil)
)

// The tag (and the user metadata) ObjectsEnd gives the objects of a saga
// that ended for good: the bucket's lifecycle expires objects that carry
// it, RetentionDays after they were marked, and no others.
const (
	EndedTag   = "lambdasaga-ended"
	EndedValue = "1"
)

// contentType is every object's: a value's encoding, opaque to S3.
const contentType = "application/octet-stream"

// listPage is how many keys one LIST asks for (S3 returns at most 1,000).
const listPage = 1000

// endCopies bounds the COPYs of one ObjectsEnd in flight.
const endCopies = 8

// Config says where objects go.
type Config struct {
	Client *s3.Client // makes the S3 calls; required
	Bucket string     // the bucket; required
	// Prefix goes before every key (say "sagas/"), so that one bucket can
	// serve several deployments, or a lifecycle rule can name them.
	Prefix string
}

// Objects puts and gets objects in one S3 bucket.
type Objects struct {
	client   *s3.Client
	bucket   string
	prefix   string
	listPage int32
}

// New returns an Objects on cfg's bucket.
func New(cfg Config) (*Objects, error) {
	if cfg.Client == nil || cfg.Bucket == "" {
		return nil, errors.New("s3 objects: a Client and a Bucket are required")
	}
	return &Objects{client: cfg.Client, bucket: cfg.Bucket, prefix: cfg.Prefix, listPage: listPage}, nil
}

// ObjectPut stores p.Body under p.Key with one PutObject.
func (o *Objects) ObjectPut(ctx context.Context, p *durable.ObjectPutParams) error {
	if len(p.Body) > durable.MaxObjectBytes {
		return fmt.Errorf("object %s: %d bytes, over %d", p.Key, len(p.Body), durable.MaxObjectBytes)
	}
	_, err := o.client.PutObject(ctx, &s3.PutObjectInput{
		Bucket:        &o.bucket,
		Key:           aws.String(o.prefix + p.Key),
		Body:          bytes.NewReader(p.Body),
		ContentLength: aws.Int64(int64(len(p.Body))),
		ContentType:   aws.String(contentType),
	})
	if err != nil {
		return fmt.Errorf("put object %s: %w", p.Key, interpretError(err))
	}
	return nil
}

// ObjectGet reads the body under p.Key with one GetObject.
func (o *Objects) ObjectGet(ctx context.Context, p *durable.ObjectGetParams) ([]byte, error) {
	out, err := o.client.GetObject(ctx, &s3.GetObjectInput{Bucket: &o.bucket, Key: aws.String(o.prefix + p.Key)})
	if err != nil {
		return nil, fmt.Errorf("get object %s: %w", p.Key, interpretError(err))
	}
	defer out.Body.Close()
	n := aws.ToInt64(out.ContentLength)
	if n > durable.MaxObjectBytes {
		return nil, fmt.Errorf("get object %s: %d bytes, over %d", p.Key, n, durable.MaxObjectBytes)
	}
	buf := bytes.NewBuffer(make([]byte, 0, max(n, 0)+bytes.MinRead))
	if _, err := buf.ReadFrom(io.LimitReader(out.Body, durable.MaxObjectBytes+1)); err != nil {
		return nil, fmt.Errorf("get object %s: %w", p.Key, interpretError(err))
	}
	if buf.Len() > durable.MaxObjectBytes {
		return nil, fmt.Errorf("get object %s: over %d bytes", p.Key, durable.MaxObjectBytes)
	}
	return buf.Bytes(), nil
}

// ObjectsEnd marks each object under p.SagaID's prefix: a LIST per page
// of its keys (ListObjectsV2), then a CopyObject of each onto itself that
// replaces its tags with EndedTag=EndedValue (and its user metadata, since
// S3 refuses a copy onto itself that changes nothing else). The copy
// restarts the object's age, which the lifecycle counts from: a tag alone
// (PutObjectTagging) would leave an object put a year before its saga
// ended to expire at once. The copy happens inside S3, whatever the
// object's size; it keeps the bucket's default encryption. An object gone
// between the LIST and its COPY (expired) is passed over.
func (o *Objects) ObjectsEnd(ctx context.Context, p *durable.ObjectsEndParams) error {
	prefix := o.prefix + durable.ObjectPrefix(p.SagaID)
	in := &s3.ListObjectsV2Input{Bucket: &o.bucket, Prefix: &prefix, MaxKeys: aws.Int32(o.listPage)}
	for {
		out, err := o.client.ListObjectsV2(ctx, in)
		if err != nil {
			return fmt.Errorf("end objects of saga %s: list: %w", p.SagaID, interpretError(err))
		}
		if err := o.endAll(ctx, out.Contents); err != nil {
			return fmt.Errorf("end objects of saga %s: %w", p.SagaID, err)
		}
		if !aws.ToBool(out.IsTruncated) || aws.ToString(out.NextContinuationToken) == "" {
			return nil
		}
		in.ContinuationToken = out.NextContinuationToken
	}
}

// endAll marks the objects of one page, endCopies at once.
func (o *Objects) endAll(ctx context.Context, objs []types.Object) error {
	errs := make([]error, len(objs))
	sem := make(chan struct{}, endCopies)
	var wg sync.WaitGroup
	for i := range objs {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			errs[i] = o.end(ctx, aws.ToString(objs[i].Key))
		})
	}
	wg.Wait()
	return errors.Join(errs...)
}

// end copies the object under key (the bucket's key, prefix included)
// onto itself with the ended tag.
func (o *Objects) end(ctx context.Context, key string) error {
	_, err := o.client.CopyObject(ctx, &s3.CopyObjectInput{
		Bucket:            &o.bucket,
		Key:               &key,
		CopySource:        aws.String(url.PathEscape(o.bucket) + "/" + escapeKey(key)),
		MetadataDirective: types.MetadataDirectiveReplace,
		Metadata:          map[string]string{EndedTag: EndedValue},
		ContentType:       aws.String(contentType),
		TaggingDirective:  types.TaggingDirectiveReplace,
		Tagging:           aws.String(EndedTag + "=" + EndedValue),
	})
	err = interpretError(err)
	if errors.Is(err, durable.ErrNotFound) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("copy %s: %w", key, err)
	}
	return nil
}

// escapeKey escapes each segment of key for x-amz-copy-source, keeping
// its slashes. Keys are a saga id (letters, digits, "_", ".", ":", "-"),
// a slash and hex digits, and maybe the Config.Prefix.
func escapeKey(key string) string {
	segs := strings.Split(key, "/")
	for i, s := range segs {
		segs[i] = url.PathEscape(s)
	}
	return strings.Join(segs, "/")
}

// interpretError turns S3's errors into the contract's sentinels, so that
// no S3 type leaks inward.
func interpretError(err error) error {
	if err == nil {
		return nil
	}
	var (
		noKey *types.NoSuchKey
		ae    smithy.APIError
	)
	switch {
	case errors.As(err, &noKey):
		return fmt.Errorf("%w: %w", durable.ErrNotFound, err)
	case errors.As(err, &ae):
		switch ae.ErrorCode() {
		case "NoSuchKey", "NotFound":
			return fmt.Errorf("%w: %w", durable.ErrNotFound, err)
		case "SlowDown", "Throttling", "ThrottlingException", "RequestLimitExceeded", "TooManyRequests":
			return fmt.Errorf("%w: %w", durable.ErrThrottled, err)
		}
	}
	return err
}

// PresignGet returns a URL that reads the object under key with a plain
// HTTP GET, without credentials, until ttl has passed (or the credentials
// that signed it expire, whichever comes first: a role's session, as a
// Lambda function's, lasts hours). A `lambda:` action receives its input
// so when the input is over Lambda's invoke payload limit.
func (o *Objects) PresignGet(ctx context.Context, key string, ttl time.Duration) (string, error) {
	req, err := s3.NewPresignClient(o.client).PresignGetObject(ctx, &s3.GetObjectInput{Bucket: &o.bucket, Key: aws.String(o.prefix + key)},
		s3.WithPresignExpires(ttl))
	if err != nil {
		return "", fmt.Errorf("presign object %s: %w", key, err)
	}
	return req.URL, nil
}
