package saga

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"path"
	"slices"
	"strconv"
	"strings"

	"github.com/lambdasaga/lambdasaga/internal/lang"
)

// A bundle is a definition with its child sagas, as one byte string: what
// a parent's hash covers and what a store keeps under it. It reads
//
//	lambdasaga bundle 1
//	saga <N>
//	<the N bytes of the parent's source>
//	file <N> <path>
//	<the N bytes of that child's source>
//	...
//
// with a newline after each source, and one file entry per child saga
// (children of children included), each once, in byte order of path. A
// path is relative to the parent's directory, with '/' between names. The
// first line is never the start of a definition (a definition is a
// mapping, and that line holds no ':'), so Compile tells the two apart.
// A definition without children is not bundled: its bundle is its source,
// so its hash is the hash of its source, as before bundles.
const bundleHeader = "lambdasaga bundle 1\n"

// isBundle reports whether src is a bundle rather than a definition.
func isBundle(src []byte) bool { return bytes.HasPrefix(src, []byte(bundleHeader)) }

// writeBundle returns the bundle of root and files (path -> source): root
// itself when files is empty.
func writeBundle(root []byte, files map[string][]byte) []byte {
	if len(files) == 0 {
		return root
	}
	var b bytes.Buffer
	b.WriteString(bundleHeader)
	fmt.Fprintf(&b, "saga %d\n", len(root))
	b.Write(root)
	b.WriteByte('\n')
	for _, p := range slices.Sorted(maps.Keys(files)) {
		fmt.Fprintf(&b, "file %d %s\n", len(files[p]), p)
		b.Write(files[p])
		b.WriteByte('\n')
	}
	return b.Bytes()
}

// parseBundle splits a bundle into the parent's source and its children's.
// It checks the framing only; Compile checks that the bundle is the one it
// would write.
func parseBundle(src []byte) (root []byte, files map[string][]byte, err error) {
	if len(src) > lang.MaxBundleBytes {
		return nil, nil, fmt.Errorf("bundle is %d bytes, over the limit of %d", len(src), lang.MaxBundleBytes)
	}
	rest := src[len(bundleHeader):]
	entry := func(want string) (string, []byte, error) {
		line, tail, ok := bytes.Cut(rest, []byte("\n"))
		if !ok {
			return "", nil, errors.New("bundle cut short: a line without its end")
		}
		fields := strings.SplitN(string(line), " ", 3)
		if fields[0] != want || len(fields) < 2 || (want == "file") != (len(fields) == 3) {
			return "", nil, fmt.Errorf("bundle: %q is not a %s line", line, want)
		}
		n, err := strconv.Atoi(fields[1])
		if err != nil || n < 0 || n+1 > len(tail) || tail[n] != '\n' {
			return "", nil, fmt.Errorf("bundle: the %s entry's size %q does not match its content", want, fields[1])
		}
		rest = tail[n+1:]
		name := ""
		if want == "file" {
			name = fields[2]
		}
		return name, tail[:n], nil
	}
	_, root, err = entry("saga")
	if err != nil {
		return nil, nil, err
	}
	files = map[string][]byte{}
	for len(rest) > 0 {
		name, b, err := entry("file")
		if err != nil {
			return nil, nil, err
		}
		if problem := lang.ChildPathProblem(name); problem != "" || !fs.ValidPath(name) {
			return nil, nil, fmt.Errorf("bundle: file %q is not a clean relative path", name)
		}
		if _, dup := files[name]; dup {
			return nil, nil, fmt.Errorf("bundle: file %s twice", name)
		}
		files[name] = b
	}
	return root, files, nil
}

// readSource reads a definition file of fsys, refusing one over
// lang.MaxDefinitionBytes (a bundle over lang.MaxBundleBytes) before it is
// read whole.
func readSource(fsys fs.FS, name string) ([]byte, error) {
	f, err := fsys.Open(name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	limit := max(lang.MaxDefinitionBytes, lang.MaxBundleBytes)
	b, err := io.ReadAll(io.LimitReader(f, int64(limit)+1))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	if len(b) > limit {
		return nil, fmt.Errorf("%s: over the limit of %d bytes for a definition", name, limit)
	}
	return b, nil
}

// childKey is where a saga step of the file at key finds its child: its
// path joined to the directory of key. Keys are relative to the directory
// of the definition being compiled.
func childKey(key, child string) string { return path.Join(path.Dir(key), child) }

// readChild reads the child saga at key, a clean relative path, below dir,
// the directory of the definition being compiled. A child stays in that
// directory, and a symbolic link does not take it out: when fsys can read
// links (fs.ReadLinkFS; os.DirFS can), key is resolved through them, and
// a key that ends outside dir is refused rather than read and bundled.
func readChild(fsys fs.FS, dir, key string) ([]byte, error) {
	name := path.Join(dir, key)
	if lfs, ok := fsys.(fs.ReadLinkFS); ok {
		if err := stayIn(lfs, dir, key); err != nil {
			return nil, err
		}
	}
	return readSource(fsys, name)
}

// maxLinks bounds the symbolic links followed to resolve one name, as an
// operating system does (40 on Linux).
const maxLinks = 40

// stayIn resolves key below dir through the symbolic links of lfs, one name
// at a time as the operating system does (a link's target is read from the
// directory it is in, and ".." leaves the directory a link led to), and
// refuses a key that ends outside dir. A name that cannot be looked up ends
// the walk: reading the file reports why.
func stayIn(lfs fs.ReadLinkFS, dir, key string) error {
	cur, rest := dir, strings.Split(key, "/")
	first := "" // the first link followed, as "name -> target"
	for links := 0; len(rest) > 0; {
		elem := rest[0]
		rest = rest[1:]
		switch elem {
		case "", ".":
			continue
		case "..":
			if cur == "." || cur == ".." || strings.HasSuffix(cur, "/..") {
				cur = path.Join(cur, "..") // above the root of fsys: out of every dir
			} else {
				cur = path.Dir(cur)
			}
			continue
		}
		next := path.Join(cur, elem)
		info, err := lfs.Lstat(next)
		if err != nil {
			cur = path.Join(append([]string{next}, rest...)...)
			break
		}
		if info.Mode()&fs.ModeSymlink == 0 {
			cur = next
			continue
		}
		if links++; links > maxLinks {
			return fmt.Errorf("%s: more than %d symbolic links", path.Join(dir, key), maxLinks)
		}
		target, err := lfs.ReadLink(next)
		if err != nil {
			return err
		}
		if first == "" {
			first = next + " -> " + target
		}
		if path.IsAbs(target) {
			cur = "/"
		}
		rest = append(strings.Split(target, "/"), rest...)
	}
	if !within(dir, cur) {
		return fmt.Errorf("%s leads out of the definition's directory (%s) through the symbolic link %s: a child saga is in the same directory or below it, links included", path.Join(dir, key), dir, first)
	}
	return nil
}

// within reports whether the clean path name is dir or below it.
func within(dir, name string) bool {
	switch {
	case dir == ".":
		return !path.IsAbs(name) && name != ".." && !strings.HasPrefix(name, "../")
	case dir == "/":
		return path.IsAbs(name)
	}
	return name == dir || strings.HasPrefix(name, dir+"/")
}
