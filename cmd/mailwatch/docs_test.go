package main

// Tests that hold the documentation to the tree: the order in which its
// examples run (docs/README.md's "Run order"), the README's "Where does X
// live" table, and every relative link.

import (
	"image"
	_ "image/png"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// runOrderHeading opens the list, in docs/README.md, of the docs files whose
// ```sh blocks run after the README's, in order.
const runOrderHeading = "## Run order"

// mdLink matches a Markdown inline link and captures its target.
var mdLink = regexp.MustCompile(`\]\(([^)\s]+)\)`)

// docsRunOrder returns the files docs/README.md lists under "## Run order"
// (relative to the repository's root, in list order): the target of each
// list item's link, up to the next heading.
func docsRunOrder(t *testing.T) []string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(repoRoot, "docs", "README.md"))
	require.NoError(t, err)
	_, section, found := strings.Cut(string(data), "\n"+runOrderHeading+"\n")
	require.True(t, found, "docs/README.md has no %q section", runOrderHeading)
	if next := strings.Index(section, "\n#"); next >= 0 {
		section = section[:next]
	}
	var order []string
	for _, line := range strings.Split(section, "\n") {
		line = strings.TrimSpace(line)
		if !strings.HasPrefix(line, "1. ") && !strings.HasPrefix(line, "- ") {
			continue
		}
		m := mdLink.FindStringSubmatch(line)
		require.NotNil(t, m, "docs/README.md run order: %q is not a link to a file", line)
		order = append(order, path.Join("docs", m[1]))
	}
	require.NotEmpty(t, order, "docs/README.md's run order lists no file")
	return order
}

// docsMarkdownFiles returns every Markdown file under docs/, relative to
// the repository's root, with forward slashes.
func docsMarkdownFiles(t *testing.T) []string {
	t.Helper()
	var files []string
	err := filepath.WalkDir(filepath.Join(repoRoot, "docs"), func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(p, ".md") {
			return err
		}
		rel, err := filepath.Rel(repoRoot, p)
		files = append(files, filepath.ToSlash(rel))
		return err
	})
	require.NoError(t, err)
	return files
}

// checkRunOrder returns what is wrong with order, given which docs files
// hold ```sh blocks and which exist: a file with blocks that is not listed,
// a listed file that does not exist, a file listed twice.
func checkRunOrder(order []string, withBlocks, existing map[string]bool) []string {
	var problems []string
	listed := map[string]bool{}
	for _, f := range order {
		switch {
		case !existing[f]:
			problems = append(problems, f+" is in the run order but does not exist")
		case listed[f]:
			problems = append(problems, f+" is in the run order twice")
		}
		listed[f] = true
	}
	for f := range withBlocks {
		if !listed[f] {
			problems = append(problems, f+" has ```sh blocks but is not in docs/README.md's run order")
		}
	}
	return problems
}

// docsShBlocks returns the ```sh blocks of README.md, then of each file of
// the run order, after checking the order against the docs that exist.
func docsShBlocks(t *testing.T) []shBlock {
	t.Helper()
	order := docsRunOrder(t)
	withBlocks, existing := map[string]bool{}, map[string]bool{}
	for _, f := range docsMarkdownFiles(t) {
		existing[f] = true
		if len(markdownShBlocks(t, f)) > 0 {
			withBlocks[f] = true
		}
	}
	require.Empty(t, checkRunOrder(order, withBlocks, existing))
	blocks := markdownShBlocks(t, "README.md")
	for _, f := range order {
		blocks = append(blocks, markdownShBlocks(t, f)...)
	}
	return blocks
}

// TestDocsRunOrder holds docs/README.md's run order to the docs that exist,
// and checks that the check itself catches a file left out, a file that
// does not exist and a file listed twice.
func TestDocsRunOrder(t *testing.T) {
	t.Parallel()
	blocks := docsShBlocks(t)
	require.Equal(t, "README.md", blocks[0].file, "the README's walk-through runs first")
	require.NotEqual(t, "README.md", blocks[len(blocks)-1].file, "the docs' examples run after the walk-through")

	existing := map[string]bool{"docs/a.md": true, "docs/b.md": true}
	require.Empty(t, checkRunOrder([]string{"docs/a.md"}, map[string]bool{"docs/a.md": true}, existing))
	require.Equal(t, []string{"docs/b.md has ```sh blocks but is not in docs/README.md's run order"},
		checkRunOrder([]string{"docs/a.md"}, existing, existing))
	require.Equal(t, []string{"docs/gone.md is in the run order but does not exist"},
		checkRunOrder([]string{"docs/a.md", "docs/gone.md"}, nil, existing))
	require.Equal(t, []string{"docs/a.md is in the run order twice"},
		checkRunOrder([]string{"docs/a.md", "docs/a.md"}, nil, existing))
}

// whereTablePaths returns the paths and patterns (in backquotes) of the
// README's "Where does X live" table, from its Where and Example columns.
func whereTablePaths(t *testing.T) []string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(repoRoot, "README.md"))
	require.NoError(t, err)
	_, section, found := strings.Cut(string(data), "\n### Where does X live\n")
	require.True(t, found, "README.md has no \"Where does X live\" section")
	code := regexp.MustCompile("`([^`]+)`")
	var paths []string
	rows := 0
	for _, line := range strings.Split(section, "\n") {
		if !strings.HasPrefix(line, "|") {
			if rows > 0 {
				break
			}
			continue
		}
		cells := strings.Split(strings.Trim(line, "|"), "|")
		if len(cells) != 3 || strings.HasPrefix(strings.TrimSpace(cells[0]), "---") || strings.TrimSpace(cells[0]) == "What" {
			continue
		}
		rows++
		for _, cell := range cells[1:] {
			for _, m := range code.FindAllStringSubmatch(cell, -1) {
				paths = append(paths, m[1])
			}
		}
	}
	require.GreaterOrEqual(t, rows, 7, "route, rule, job, page, query, migration, test helper")
	return paths
}

// whereGlob turns a path pattern of the table into a filepath.Match
// pattern: <name> is one path element, NNNN four digits.
func whereGlob(p string) string {
	p = regexp.MustCompile(`<[^>]+>`).ReplaceAllString(p, "*")
	p = strings.ReplaceAll(p, "NNNN", "[0-9][0-9][0-9][0-9]")
	return strings.TrimSuffix(p, "/")
}

// TestWhereDoesXLiveTable checks that every path and pattern of the README's
// "Where does X live" table names something in the tree.
func TestWhereDoesXLiveTable(t *testing.T) {
	t.Parallel()
	require.Equal(t, "internal/*", whereGlob("internal/<capability>/"))
	require.Equal(t, "schema/[0-9][0-9][0-9][0-9]_*.sql", whereGlob("schema/NNNN_*.sql"))
	var missing []string
	for _, p := range whereTablePaths(t) {
		matches, err := filepath.Glob(filepath.Join(repoRoot, filepath.FromSlash(whereGlob(p))))
		require.NoError(t, err, p)
		if len(matches) == 0 {
			missing = append(missing, p)
		}
	}
	require.Empty(t, missing, "README.md's \"Where does X live\" table names paths that do not exist")
}

// TestDocsLinksResolve checks that every relative link of README.md and
// docs/ names a file or folder that exists.
func TestDocsLinksResolve(t *testing.T) {
	t.Parallel()
	var broken []string
	for _, f := range append([]string{"README.md"}, docsMarkdownFiles(t)...) {
		data, err := os.ReadFile(filepath.Join(repoRoot, filepath.FromSlash(f)))
		require.NoError(t, err)
		for _, m := range mdLink.FindAllStringSubmatch(string(data), -1) {
			target, _, _ := strings.Cut(m[1], "#")
			if target == "" || strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
				continue
			}
			p := path.Join(path.Dir(f), target)
			if _, err := os.Stat(filepath.Join(repoRoot, filepath.FromSlash(p))); err != nil {
				broken = append(broken, f+": "+m[1])
			}
		}
	}
	require.Empty(t, broken, "links to files that do not exist")
}

// The README shows the dashboard's overview and a domain page as the
// browser test took them (MW_DOC_IMAGES=1): both pictures are referenced
// and are desktop-wide PNGs.
func TestDocImages(t *testing.T) {
	t.Parallel()
	readme, err := os.ReadFile(filepath.Join(repoRoot, "README.md"))
	require.NoError(t, err)
	for _, name := range []string{"overview", "domain"} {
		rel := "docs/images/" + name + ".png"
		require.Contains(t, string(readme), "]("+rel+")", "the README shows %s", rel)
		f, err := os.Open(filepath.Join(repoRoot, filepath.FromSlash(rel)))
		require.NoError(t, err)
		cfg, format, err := image.DecodeConfig(f)
		_ = f.Close()
		require.NoError(t, err, rel)
		require.Equal(t, "png", format)
		require.Equal(t, 1280, cfg.Width, "%s is a desktop screenshot", rel)
	}
}
