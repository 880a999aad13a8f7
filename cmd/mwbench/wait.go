package main

import (
	"context"
	"errors"
)

// benchWait lands with the receivers issue.
func benchWait(ctx context.Context, env *benchEnv) error {
	return errors.New("not implemented yet")
}
