package reports

import (
	"github.com/riverqueue/river"

	"github.com/mailwatch/mailwatch/internal/queues"
)

// ReparseArgs parses again every failed report whose raw bytes are
// kept (the maintenance task reparse-reports, after an upgrade whose parser
// reads more): each goes back to pending with a report_parse job of its
// own, reports.RequeueBatch per transaction.
type ReparseArgs struct{}

// Kind implements river.JobArgs.
func (ReparseArgs) Kind() string { return "report_reparse" }

// InsertOpts implements river.JobArgsWithInsertOpts.
func (ReparseArgs) InsertOpts() river.InsertOpts {
	return river.InsertOpts{Queue: queues.Maintenance}
}
