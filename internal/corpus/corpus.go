// Package corpus locates the shared third-party samples (DMARC and TLS
// reports, provider webhooks with their signature vectors, the sender map)
// that tests read. They are not part of the repository: they live in the
// shared/ folder beside the checkout, or wherever MAILWATCH_CORPUS points.
package corpus

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"
)

// Dir returns the corpus folder: MAILWATCH_CORPUS when set, otherwise
// shared/corpus beside the repository root (the folder holding go.mod).
func Dir() (string, error) {
	if d := os.Getenv("MAILWATCH_CORPUS"); d != "" {
		if _, err := os.Stat(d); err != nil {
			return "", fmt.Errorf("corpus: MAILWATCH_CORPUS is set but unreadable: %w", err)
		}
		return d, nil
	}
	wd, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for dir := wd; ; {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			c := filepath.Join(filepath.Dir(dir), "shared", "corpus")
			if _, err := os.Stat(c); err != nil {
				return "", errors.New("corpus: no shared/corpus beside the repository; set MAILWATCH_CORPUS")
			}
			return c, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("corpus: go.mod not found above the working directory")
		}
		dir = parent
	}
}

// RequiredEnv names the variable that makes a missing corpus a failure
// instead of a skip; CI sets it, so a broken set-up there never passes.
const RequiredEnv = "MAILWATCH_CORPUS_REQUIRED"

// Path returns the path of a corpus file. Without the corpus (a plain clone
// of the repository) the test is skipped with one line saying how to
// provide it, unless MAILWATCH_CORPUS_REQUIRED=1, when it fails.
func Path(t testing.TB, rel string) string {
	t.Helper()
	d, err := Dir()
	if err != nil {
		if os.Getenv(RequiredEnv) == "1" {
			t.Fatal(err)
		}
		t.Skipf("%v (point MAILWATCH_CORPUS at the samples folder to run this test)", err)
	}
	return filepath.Join(d, filepath.FromSlash(rel))
}

// Read returns the bytes of a corpus file.
func Read(t testing.TB, rel string) []byte {
	t.Helper()
	b, err := os.ReadFile(Path(t, rel))
	if err != nil {
		t.Fatal(err)
	}
	return b
}
