package identity

import (
	"time"

	"github.com/riverqueue/river"

	"github.com/mailwatch/mailwatch/internal/queues"
)

// SigningKeyRotateArgs converges the JWT signing keys: a next and a current
// key exist, the current one is rotated out when due, and retired keys whose
// tokens have all expired are deleted.
type SigningKeyRotateArgs struct {
	// Force rotates now, whatever the current key's age (the maintenance
	// task rotate-signing-keys): the next key, published since it was
	// made, becomes current and the current one is retired.
	Force bool `json:"force,omitempty"`
}

// Kind implements river.JobArgs.
func (SigningKeyRotateArgs) Kind() string { return "signing_key_rotate" }

// InsertOpts implements river.JobArgsWithInsertOpts.
func (SigningKeyRotateArgs) InsertOpts() river.InsertOpts {
	return river.InsertOpts{Queue: queues.Maintenance, UniqueOpts: river.UniqueOpts{ByPeriod: 10 * time.Minute}}
}
