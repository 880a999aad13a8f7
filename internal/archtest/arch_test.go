// Package archtest holds the tests that keep the tree's shape: which layer
// may import which, where HTML is rendered, how long a function may grow
// and what the jobs package exports. The rules are the architecture map of
// the README, checked by the compiler's own parser.
package archtest

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

const module = "github.com/mailwatch/mailwatch"

// root is the repository's top directory, relative to this package.
const root = "../.."

// goFile is one parsed production (non-test) Go file.
type goFile struct {
	path string // slash-separated, relative to the repository root
	fset *token.FileSet
	file *ast.File
}

// productionFiles parses every non-test Go file of the repository except
// generated code and installed dependencies.
func productionFiles(t *testing.T) []goFile {
	t.Helper()
	var out []goFile
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		name := d.Name()
		if d.IsDir() {
			if p != root && (strings.HasPrefix(name, ".") || name == "node_modules" || name == "testdata") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(name, ".go") || strings.HasSuffix(name, "_test.go") {
			return nil
		}
		rel, err := filepath.Rel(root, p)
		if err != nil {
			return err
		}
		fset := token.NewFileSet()
		f, err := parser.ParseFile(fset, p, nil, parser.ParseComments)
		if err != nil {
			return err
		}
		if ast.IsGenerated(f) {
			return nil
		}
		out = append(out, goFile{path: filepath.ToSlash(rel), fset: fset, file: f})
		return nil
	})
	require.NoError(t, err)
	require.NotEmpty(t, out)
	return out
}

func imports(f *ast.File) []string {
	var out []string
	for _, spec := range f.Imports {
		p, err := strconv.Unquote(spec.Path.Value)
		if err == nil {
			out = append(out, p)
		}
	}
	return out
}

func under(path, dir string) bool { return strings.HasPrefix(path, dir+"/") }

// TestLayers checks the import rules between the adapters and the
// capability packages: the REST adapter reaches rules through internal/
// packages, never through the workers, and renders no HTML (the dashboard
// is web/); the workers call capability packages, never an adapter.
func TestLayers(t *testing.T) {
	for _, f := range productionFiles(t) {
		for _, imp := range imports(f.file) {
			switch {
			case under(f.path, "api") && (imp == module+"/jobs" || strings.HasPrefix(imp, module+"/jobs/")):
				t.Errorf("%s imports %s: the REST adapter calls capability packages, not the workers", f.path, imp)
			case under(f.path, "api") && imp == "html/template":
				t.Errorf("%s imports html/template: pages are the dashboard's (web/)", f.path)
			case under(f.path, "jobs") && (imp == module+"/api" || imp == module+"/web"):
				t.Errorf("%s imports %s: workers call capability packages, not adapters", f.path, imp)
			case under(f.path, "internal") && (imp == module+"/api" || imp == module+"/web" || imp == module+"/jobs"):
				t.Errorf("%s imports %s: capability and protocol packages are below the adapters", f.path, imp)
			}
		}
	}
}

// maxFuncLines is the longest a production function may be.
const maxFuncLines = 100

// longFuncs are the functions allowed to be longer, each a table or a
// linear script whose length is its content. Keyed by "path:function".
var longFuncs = map[string]string{
	"internal/config/config.go:Parse": "one line per environment variable",
}

// TestFunctionLength keeps production functions short enough to read whole.
func TestFunctionLength(t *testing.T) {
	seen := map[string]bool{}
	for _, f := range productionFiles(t) {
		ast.Inspect(f.file, func(n ast.Node) bool {
			fn, ok := n.(*ast.FuncDecl)
			if !ok || fn.Body == nil {
				return true
			}
			lines := f.fset.Position(fn.Body.Rbrace).Line - f.fset.Position(fn.Body.Lbrace).Line - 1
			key := f.path + ":" + fn.Name.Name
			if lines > maxFuncLines {
				seen[key] = true
				if _, ok := longFuncs[key]; !ok {
					t.Errorf("%s is %d lines (at most %d): split it by step", key, lines, maxFuncLines)
				}
			}
			return true
		})
	}
	for key := range longFuncs {
		require.True(t, seen[key], "%s is no longer over %d lines: remove it from longFuncs", key, maxFuncLines)
	}
}

// TestRoutesHoldNoHandlerBodies keeps every route table a table: a
// function that registers routes (a method whose name ends in "Routes")
// names its handlers instead of writing their bodies inline. A literal of
// a single statement (a small adapter) is allowed.
func TestRoutesHoldNoHandlerBodies(t *testing.T) {
	for _, f := range productionFiles(t) {
		if !under(f.path, "api") && !under(f.path, "web") {
			continue
		}
		for _, decl := range f.file.Decls {
			fn, ok := decl.(*ast.FuncDecl)
			if !ok || fn.Body == nil || !strings.HasSuffix(fn.Name.Name, "Routes") {
				continue
			}
			ast.Inspect(fn.Body, func(n ast.Node) bool {
				lit, ok := n.(*ast.FuncLit)
				if ok && len(lit.Body.List) > 1 {
					t.Errorf("%s:%d: %s holds an inline handler of %d statements: make it a named method",
						f.path, f.fset.Position(lit.Pos()).Line, fn.Name.Name, len(lit.Body.List))
				}
				return true
			})
		}
	}
}

// TestJobsExportsWorkersOnly checks that package jobs exports job
// arguments, workers and the client's set-up, and no rule: a rule another
// layer needs lives in a capability package.
func TestJobsExportsWorkersOnly(t *testing.T) {
	allowedFuncs := []string{"NewClient", "Workers", "PeriodicJobs", "SettingsFrom"}
	allowedTypes := []string{"Deps", "Options", "Settings", "Observer",
		// the observer's readiness report is client set-up
		"Health", "QueueHealth"}
	for _, f := range productionFiles(t) {
		if filepath.Dir(f.path) != "jobs" {
			continue
		}
		for _, decl := range f.file.Decls {
			switch d := decl.(type) {
			case *ast.FuncDecl:
				if d.Recv != nil || !d.Name.IsExported() {
					continue
				}
				if !slices.Contains(allowedFuncs, d.Name.Name) && !strings.HasPrefix(d.Name.Name, "New") {
					t.Errorf("jobs exports func %s (%s): move the rule to its capability package", d.Name.Name, f.path)
				}
			case *ast.GenDecl:
				for _, spec := range d.Specs {
					ts, ok := spec.(*ast.TypeSpec)
					if !ok || !ts.Name.IsExported() {
						continue
					}
					n := ts.Name.Name
					if !strings.HasSuffix(n, "Args") && !strings.HasSuffix(n, "Worker") &&
						!slices.Contains(allowedTypes, n) && !strings.HasSuffix(n, "Deps") {
						t.Errorf("jobs exports type %s (%s): workers, their args and the client's set-up only", n, f.path)
					}
				}
			}
		}
	}
}

// TestNoTestHelpersInProduction keeps the test-helper packages out of the
// binaries (the benchmark tool, which drives them on purpose, excepted).
func TestNoTestHelpersInProduction(t *testing.T) {
	helpers := []string{"dbtest", "dnstest", "bindtest", "smtptest", "snstest", "mimetest", "browsertest", "testfactory"}
	for _, f := range productionFiles(t) {
		if under(f.path, "cmd/mwbench") || slices.ContainsFunc(helpers, func(h string) bool {
			return strings.Contains("/"+f.path, "/"+h+"/")
		}) {
			continue
		}
		for _, imp := range imports(f.file) {
			if slices.Contains(helpers, filepath.Base(imp)) && strings.HasPrefix(imp, module+"/") {
				t.Errorf("%s imports the test helper %s", f.path, imp)
			}
		}
	}
}

func TestMain(m *testing.M) {
	if _, err := os.Stat(filepath.Join(root, "go.mod")); err != nil {
		panic("archtest runs from its own directory inside the repository")
	}
	os.Exit(m.Run())
}
