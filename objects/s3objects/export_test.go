package s3objects

// SetListPage sets how many keys a LIST asks for, so that a test pages
// with a few objects.
func (o *Objects) SetListPage(n int32) { o.listPage = n }

// Bucket is the bucket o keeps objects in.
func (o *Objects) Bucket() *string { return &o.bucket }
