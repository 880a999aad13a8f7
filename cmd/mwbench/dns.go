package main

import (
	"context"
	"errors"
)

// benchDNS lands with the domains issue.
func benchDNS(ctx context.Context, env *benchEnv) error {
	return errors.New("not implemented yet")
}
