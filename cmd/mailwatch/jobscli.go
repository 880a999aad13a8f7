package main

import (
	"context"
	"errors"
	"io"
	"log/slog"

	"github.com/mailwatch/mailwatch/internal/config"
)

// runJobs is the operator's jobs command; it lands with the webhook issue.
func runJobs(ctx context.Context, cfg *config.Config, logger *slog.Logger, args []string, stdout io.Writer) error {
	return errors.New("the jobs command is not available yet")
}
