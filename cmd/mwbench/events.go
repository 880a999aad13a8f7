package main

import (
	"context"
	"errors"
)

// benchEvents lands with the events issue.
func benchEvents(ctx context.Context, env *benchEnv) error {
	return errors.New("not implemented yet")
}
