package layout_test

import (
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
)

var backticked = regexp.MustCompile("`([^`]+)`")

// layoutRow is one row of the README's layout table.
type layoutRow struct {
	paths   []string // module-relative package paths, without a trailing /
	imports []string // the last column; nil for "none"
	noGo    bool     // "no Go packages"
}

func readLayoutTable(t *testing.T) []layoutRow {
	t.Helper()
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(readme), "\n## Layout\n")
	if !ok {
		t.Fatal("README has no Layout section")
	}
	section, _, _ = strings.Cut(section, "\n## ")
	var rows []layoutRow
	for line := range strings.Lines(section) {
		if !strings.HasPrefix(line, "| `") {
			continue
		}
		cells := strings.Split(strings.Trim(strings.TrimSpace(line), "|"), " | ")
		if len(cells) != 3 {
			t.Fatalf("README layout row with %d cells: %s", len(cells), line)
		}
		var r layoutRow
		for _, m := range backticked.FindAllStringSubmatch(cells[0], -1) {
			r.paths = append(r.paths, strings.TrimSuffix(m[1], "/"))
		}
		last := strings.TrimSpace(cells[2])
		switch {
		case last == "no Go packages":
			r.noGo = true
		case strings.HasPrefix(last, "none"):
		default:
			for _, m := range backticked.FindAllStringSubmatch(last, -1) {
				r.imports = append(r.imports, m[1])
			}
		}
		rows = append(rows, r)
	}
	return rows
}

// TestLayoutTableIsTrue: every package of the module has a row in the
// README's layout table; a row's last column is exactly what its packages
// import of the module (besides each other); and every row imports only
// rows above it.
func TestLayoutTableIsTrue(t *testing.T) {
	pkgs := packages(t)
	rows := readLayoutTable(t)
	rowOf := map[string]int{}
	for i, r := range rows {
		for _, p := range r.paths {
			if _, dup := rowOf[p]; dup {
				t.Errorf("README layout: %s has two rows", p)
			}
			rowOf[p] = i
		}
	}
	for path := range pkgs {
		if _, ok := rowOf[path]; !ok {
			t.Errorf("README layout: package %s has no row: add it (a row imports only rows above it)", path)
		}
	}
	for i, r := range rows {
		var got []string
		for _, p := range r.paths {
			pk, ok := pkgs[p]
			switch {
			case r.noGo && ok:
				t.Errorf("README layout: %s says no Go packages, but %s is one", strings.Join(r.paths, ", "), p)
			case !r.noGo && !ok:
				t.Errorf("README layout: %s is not a package of the module", p)
			}
			for _, imp := range pk.imports {
				if o := own(imp); o != "" && !slices.Contains(r.paths, o) && !slices.Contains(got, o) {
					got = append(got, o)
				}
			}
		}
		slices.Sort(got)
		want := slices.Sorted(slices.Values(r.imports))
		if !slices.Equal(got, want) {
			t.Errorf("README layout: %s imports %v of ours, but the table says %v", strings.Join(r.paths, ", "), got, want)
		}
		for _, o := range got {
			if j, ok := rowOf[o]; ok && j >= i {
				t.Errorf("README layout: %s imports %s, which is not in a row above it", strings.Join(r.paths, ", "), o)
			}
		}
	}
}
