package main

import (
	"os"
	"runtime"
	"sort"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestHelp runs the real binary: every command and subcommand answers -h
// and --help with its own usage on stdout and exit 0, even when the
// environment holds an invalid setting (help needs no configuration).
func TestHelp(t *testing.T) {
	t.Parallel()
	env := append(os.Environ(), "LOG_LEVEL=loud", "DATABASE_URL=")
	var words []string
	for w := range commandHelp {
		words = append(words, w)
	}
	sort.Strings(words)
	for _, w := range words {
		for _, flag := range []string{"-h", "--help"} {
			args := append(strings.Fields(w), flag)
			stdout, stderr, code := runCLI(t, env, args...)
			require.Equal(t, 0, code, "%v: %s", args, stderr)
			require.Empty(t, stderr, "%v", args)
			require.True(t, strings.HasPrefix(stdout, "usage: mailwatch "+w), "%v printed:\n%s", args, stdout)
		}
		stdout, _, code := runCLI(t, env, append([]string{"help"}, strings.Fields(w)...)...)
		require.Equal(t, 0, code)
		require.True(t, strings.HasPrefix(stdout, "usage: mailwatch "+w), "help %s printed:\n%s", w, stdout)
	}
	// A flag after a subcommand's arguments still asks for that subcommand's help.
	stdout, _, code := runCLI(t, env, "jobs", "list", "--state=running", "--help")
	require.Equal(t, 0, code)
	require.True(t, strings.HasPrefix(stdout, "usage: mailwatch jobs list"), stdout)

	for _, args := range [][]string{{"--help"}, {"-h"}, {"help"}} {
		stdout, stderr, code := runCLI(t, env, args...)
		require.Equal(t, 0, code, "%v: %s", args, stderr)
		require.Contains(t, stdout, "usage: mailwatch <command>")
		require.Contains(t, stdout, "from the environment")
		require.Contains(t, stdout, "mailwatch config table")
	}
}

func TestConfigCommand(t *testing.T) {
	t.Parallel()
	env := append(os.Environ(), "DATABASE_URL=postgres://u:hunter2@db.example/mw")
	stdout, _, code := runCLI(t, env, "config", "table")
	require.Equal(t, 0, code)
	require.Contains(t, stdout, "| `DATABASE_URL` |")

	stdout, _, code = runCLI(t, env, "config")
	require.Equal(t, 0, code)
	require.Contains(t, stdout, "LISTEN_ADDR=")
	require.NotContains(t, stdout, "hunter2", "secrets are redacted")

	for _, args := range [][]string{{"config", "bogus"}, {"config", "table", "extra"}} {
		stdout, stderr, code := runCLI(t, env, args...)
		require.Equal(t, 2, code, "%v", args)
		require.Empty(t, stdout)
		require.Contains(t, stderr, "unknown argument")
	}
}

// TestCLINamesLocalEnvWithoutDatabase: an operator command without
// DATABASE_URL says how to reach the database scripts/run started.
func TestCLINamesLocalEnvWithoutDatabase(t *testing.T) {
	t.Parallel()
	_, stderr, code := runCLI(t, append(os.Environ(), "DATABASE_URL="), "jobs", "list")
	require.Equal(t, 1, code)
	require.Contains(t, stderr, "DATABASE_URL is required")
	require.Contains(t, stderr, "source .local/env")
}

// TestVersion: both spellings print the build's module version.
func TestVersion(t *testing.T) {
	t.Parallel()
	for _, arg := range []string{"--version", "version"} {
		stdout, stderr, code := runCLI(t, os.Environ(), arg)
		require.Equal(t, 0, code, "%s: %s", arg, stderr)
		require.True(t, strings.HasPrefix(stdout, "mailwatch "), stdout)
		require.Contains(t, stdout, runtime.Version(), "the build information was read")
		require.Equal(t, 1, strings.Count(stdout, "\n"), stdout)
	}
}

// TestUsageErrorIsOneLine: a wrong command line says what is wrong and
// where the help is, and does not print the help.
func TestUsageErrorIsOneLine(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		args []string
		help string
	}{
		{[]string{"frobnicate"}, "mailwatch help"},
		{[]string{"jobs", "frob"}, "mailwatch jobs --help"},
		{[]string{"jobs", "list", "--bogus=1"}, "mailwatch jobs --help"},
	} {
		stdout, stderr, code := runCLI(t, append(os.Environ(), "DATABASE_URL=postgres://u@127.0.0.1:1/x"), tc.args...)
		require.Equal(t, 2, code, "%v", tc.args)
		require.Empty(t, stdout)
		lines := strings.Split(strings.TrimSuffix(stderr, "\n"), "\n")
		require.Len(t, lines, 2, "%v printed:\n%s", tc.args, stderr)
		require.True(t, strings.HasPrefix(lines[0], "mailwatch: "), stderr)
		require.Equal(t, "Run '"+tc.help+"' for usage.", lines[1])
	}
}

// TestJobsListUnknownKind names the kinds there are.
func TestJobsListUnknownKind(t *testing.T) {
	t.Parallel()
	_, stderr, code := runCLI(t, append(os.Environ(), "DATABASE_URL=postgres://u@127.0.0.1:1/x"), "jobs", "list", "--kind=nope")
	require.Equal(t, 2, code, stderr)
	require.Contains(t, stderr, `unknown kind "nope"`)
	require.Contains(t, stderr, "webhook_delivery")
	require.Contains(t, stderr, "domain_check")
}
