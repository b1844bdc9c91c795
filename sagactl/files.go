package sagactl

import (
	"bytes"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"time"

	"github.com/lambdasaga/lambdasaga/internal/lang"
)

// definitionFiles is what saga.CompileFile reads a definition and its
// child sagas from: the definition, read already (readFile), under the
// name given on the command line, and every other name from the operating
// system, each through readFile too. Its names are not those of a strict
// fs.FS (they may be absolute or start with ..): the definition's own, and
// its children's paths joined to its directory, so that problems name the
// files as the user would. It reads symbolic links (fs.ReadLinkFS), so
// that saga.CompileFile refuses a child whose link leads out of the
// definition's directory.
type definitionFiles struct {
	name string
	src  []byte
}

var _ fs.ReadLinkFS = definitionFiles{}

// Lstat describes the file name, a link itself rather than its target.
func (d definitionFiles) Lstat(name string) (fs.FileInfo, error) {
	return os.Lstat(filepath.FromSlash(name))
}

// ReadLink returns the target of the link name, with '/' between names.
func (d definitionFiles) ReadLink(name string) (string, error) {
	target, err := os.Readlink(filepath.FromSlash(name))
	return filepath.ToSlash(target), err
}

// Open returns the definition, or reads another file whole.
func (d definitionFiles) Open(name string) (fs.File, error) {
	if name == d.name {
		return &memFile{Reader: bytes.NewReader(d.src), name: name, size: int64(len(d.src))}, nil
	}
	b, err := readFile(filepath.FromSlash(name), lang.MaxBundleBytes, "a child saga")
	if err != nil {
		return nil, err
	}
	return &memFile{Reader: bytes.NewReader(b), name: name, size: int64(len(b))}, nil
}

// memFile is a file read whole.
type memFile struct {
	*bytes.Reader
	name string
	size int64
}

func (f *memFile) Stat() (fs.FileInfo, error) { return fileInfo{f}, nil }
func (f *memFile) Close() error               { return nil }

type fileInfo struct{ f *memFile }

func (i fileInfo) Name() string       { return path.Base(i.f.name) }
func (i fileInfo) Size() int64        { return i.f.size }
func (i fileInfo) Mode() fs.FileMode  { return 0o444 }
func (i fileInfo) ModTime() time.Time { return time.Time{} }
func (i fileInfo) IsDir() bool        { return false }
func (i fileInfo) Sys() any           { return nil }
