package main

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/mailwatch/mailwatch/internal/config"
)

// TestStartLineIsShort: a process's start line names its role, build and
// addresses and a few settings; the full table of settings is at debug.
func TestStartLineIsShort(t *testing.T) {
	t.Parallel()
	cfg := &config.Config{ListenAddr: "127.0.0.1:8080", SMTPAddr: "127.0.0.1:2525", UIAddr: "127.0.0.1:8081", LogLevel: slog.LevelInfo}
	var buf bytes.Buffer
	logStart(slog.New(slog.NewJSONHandler(&buf, &slog.HandlerOptions{Level: slog.LevelInfo})), cfg, "dev")
	line := buf.String()
	require.Equal(t, 1, strings.Count(line, "\n"), line)
	require.Less(t, len(line), 400, line)
	for _, want := range []string{`"role":"dev"`, `"version":"`, `"listen":"127.0.0.1:8080"`, `"smtp":"127.0.0.1:2525"`, `"ui":"127.0.0.1:8081"`} {
		require.Contains(t, line, want)
	}
	require.NotContains(t, line, "DATABASE_URL")

	buf.Reset()
	cfg.LogLevel = slog.LevelDebug
	logStart(slog.New(slog.NewJSONHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug})), cfg, "api")
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	require.Len(t, lines, 2)
	require.NotContains(t, lines[0], `"smtp"`, "an api process does not listen for SMTP")
	require.Contains(t, lines[1], `"msg":"settings"`)
	require.Contains(t, lines[1], `"DATABASE_URL":`)
}
