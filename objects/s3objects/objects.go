// Package s3objects is durable.Objects on Amazon S3: one bucket, an object
// per offloaded value under its content-addressed key
// (durable.ObjectKey). The bucket's encryption, public access block and
// the lifecycle that expires objects with their sagas' retention are the
// template's (infra/template.yaml); this package only puts and gets.
package s3objects

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/aws/smithy-go"

	"github.com/lambdasaga/lambdasaga/durable"
)

var _ durable.Objects = (*Objects)(nil)

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
	client *s3.Client
	bucket string
	prefix string
}

// New returns an Objects on cfg's bucket.
func New(cfg Config) (*Objects, error) {
	if cfg.Client == nil || cfg.Bucket == "" {
		return nil, errors.New("s3 objects: a Client and a Bucket are required")
	}
	return &Objects{client: cfg.Client, bucket: cfg.Bucket, prefix: cfg.Prefix}, nil
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
		ContentType:   aws.String("application/octet-stream"),
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

// interpretError turns S3's errors into the contract's sentinels, so that
// no S3 type leaks inward.
func interpretError(err error) error {
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
