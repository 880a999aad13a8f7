package accounts

import (
	"github.com/google/uuid"
	"github.com/riverqueue/river"

	"github.com/mailwatch/mailwatch/internal/queues"
)

// DeleteArgs removes everything an account marked for deletion owns
// (Purge), then the account. The args live here, beside MarkDeleting that
// inserts them; the worker is in jobs/.
type DeleteArgs struct {
	AccountID uuid.UUID `json:"account_id"`
}

// Kind implements river.JobArgs.
func (DeleteArgs) Kind() string { return "account_delete" }

// InsertOpts implements river.JobArgsWithInsertOpts: one queued run per
// account.
func (DeleteArgs) InsertOpts() river.InsertOpts {
	return river.InsertOpts{Queue: queues.Maintenance, UniqueOpts: river.UniqueOpts{ByArgs: true}}
}
