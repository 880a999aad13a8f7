// Package browsertest finds the Chromium that browser tests drive through
// chromedp. Only tests import it.
package browsertest

import (
	"os"
	"os/exec"
	"testing"
)

// Chromium returns the path of Debian's Chromium (scripts/test installs it).
// Without one the calling test skips, unless DASHBOARD_TEST_REQUIRED is set
// (as scripts/test sets it): then it fails.
func Chromium(t testing.TB) string {
	t.Helper()
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	if os.Getenv("DASHBOARD_TEST_REQUIRED") != "" {
		t.Fatal("no chromium found and DASHBOARD_TEST_REQUIRED is set: install the chromium package (scripts/test does)")
	}
	t.Skip("no chromium found; set DASHBOARD_TEST_REQUIRED=1 to make this a failure")
	return ""
}
