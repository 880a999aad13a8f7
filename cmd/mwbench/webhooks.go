package main

import (
	"context"
	"errors"
)

// benchWebhooks lands with the webhook delivery issue.
func benchWebhooks(ctx context.Context, env *benchEnv) error {
	return errors.New("not implemented yet")
}
