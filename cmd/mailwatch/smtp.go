package main

import (
	"context"
	"errors"
	"log/slog"

	"github.com/mailwatch/mailwatch/internal/config"
)

// runSMTP runs the inbound SMTP listener; it lands with the receivers issue.
func runSMTP(ctx context.Context, cfg *config.Config, logger *slog.Logger) error {
	return errors.New("the smtp role is not available yet")
}
