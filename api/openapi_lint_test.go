package api_test

import (
	"bytes"
	"encoding/json"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestOpenAPILint runs Redocly CLI (pinned in api/testdata/redocly, installed
// by scripts/node-deps) on the document GET /openapi.json serves, with the
// rules of api/testdata/redocly/redocly.yaml: no error and no warning. It is
// skipped only where neither node nor MW_NODE_DEPS is there; with either,
// a missing Redocly fails it.
func TestOpenAPILint(t *testing.T) {
	t.Parallel()
	cli := redoclyCLI(t)
	b := setup(t)
	resp := b.do(t, "GET", "/openapi.json", "", nil)
	require.Equal(t, http.StatusOK, resp.Status)
	doc := filepath.Join(t.TempDir(), "openapi.json")
	require.NoError(t, os.WriteFile(doc, resp.Body, 0o600))
	config, err := filepath.Abs(filepath.Join("testdata", "redocly", "redocly.yaml"))
	require.NoError(t, err)

	cmd := exec.Command("node", cli, "lint", doc, "--config", config, "--format=json")
	// Redocly asks the registry for a newer version and reports usage
	// unless told not to; the lint itself needs no network.
	cmd.Env = append(os.Environ(), "REDOCLY_TELEMETRY=off", "REDOCLY_SUPPRESS_UPDATE_NOTICE=true")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	var report struct {
		Totals struct {
			Errors   int `json:"errors"`
			Warnings int `json:"warnings"`
		} `json:"totals"`
		Version  string            `json:"version"`
		Problems []json.RawMessage `json:"problems"`
	}
	require.NoError(t, json.Unmarshal(out, &report), "redocly lint (%v) printed no report: %s\n%s", err, out, stderr.String())
	problems, _ := json.MarshalIndent(report.Problems, "", "  ")
	require.Zero(t, report.Totals.Errors, "redocly %s: %s", report.Version, problems)
	require.Zero(t, report.Totals.Warnings, "redocly %s: %s", report.Version, problems)
	require.NoError(t, err, "%s", stderr.String())
	t.Logf("redocly %s: no error, no warning", report.Version)
}

// redoclyCLI is the path of Redocly CLI's entry point under the packages
// scripts/node-deps installed.
func redoclyCLI(t *testing.T) string {
	t.Helper()
	dir := os.Getenv("MW_NODE_DEPS")
	_, nodeErr := exec.LookPath("node")
	if nodeErr != nil && dir == "" {
		t.Skip("node is not installed and MW_NODE_DEPS is unset: run scripts/node-deps to lint the document")
	}
	require.NoError(t, nodeErr, "MW_NODE_DEPS is set but node is not on PATH")
	if dir == "" {
		dir = filepath.Join("..", ".local", "node-deps")
	}
	cli, err := filepath.Abs(filepath.Join(dir, "redocly", "node_modules", "@redocly", "cli", "bin", "cli.js"))
	require.NoError(t, err)
	_, err = os.Stat(cli)
	require.NoError(t, err, "Redocly CLI is not installed: run scripts/node-deps (and export MW_NODE_DEPS as it prints)")
	return cli
}
