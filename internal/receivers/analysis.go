package receivers

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river"

	"github.com/mailwatch/mailwatch/internal/dbsqlc"
	"github.com/mailwatch/mailwatch/internal/dbutil"
	"github.com/mailwatch/mailwatch/internal/deliverability"
	"github.com/mailwatch/mailwatch/internal/events"
	"github.com/mailwatch/mailwatch/internal/queues"
)

// AnalyzeArgs asks for the deliverability analysis of one message received
// over SMTP. It is queued in the delivery's transaction, so the SMTP reply
// and the waiters' wake-up do not wait for it.
type AnalyzeArgs struct {
	MessageID uuid.UUID `json:"message_id"`
	// AccountID is the message's account, for the workers' per-account
	// bound; jobs queued before it was added have none and are not bounded.
	AccountID uuid.UUID `json:"account_id,omitempty"`
}

// Kind implements river.JobArgs.
func (AnalyzeArgs) Kind() string { return "receiver_message_analyze" }

// InsertOpts implements river.JobArgsWithInsertOpts. A DNS failure is
// part of the result (temperror), not a reason to retry; attempts only
// cover a database error or a crash.
func (AnalyzeArgs) InsertOpts() river.InsertOpts {
	return river.InsertOpts{Queue: queues.Analysis, MaxAttempts: 3}
}

// AnalysisTimeout bounds one analysis: at most DefaultMaxDNSLookups lookups
// of DefaultLookupTimeout each would be far longer, so a slow resolver
// makes the rest of the lookups temperror instead.
const AnalysisTimeout = 60 * time.Second

// AnalyzeMessage runs the deliverability analysis of a stored message and,
// in one transaction, stores its report, emits receiver_message_analyzed
// and notifies the receiver's waiters (assertions waiting for it). It
// returns nil without doing anything for a message that did not come over
// SMTP or was analysed already (so a retried job emits no second event),
// and dbutil's not-found error for one that no longer exists.
func AnalyzeMessage(ctx context.Context, db dbutil.Executor, em *events.Emitter, r deliverability.Resolver, opts deliverability.Options, messageID uuid.UUID, now time.Time) (*deliverability.Report, error) {
	store := &Store{DB: db}
	raw, sess, err := store.MessageSession(ctx, messageID)
	if err != nil || sess == nil {
		return nil, err
	}
	actx, cancel := context.WithTimeout(ctx, AnalysisTimeout)
	defer cancel()
	rep := deliverability.Analyze(actx, r, raw, *sess, opts)
	doc, err := json.Marshal(rep)
	if err != nil {
		return nil, fmt.Errorf("error encoding the analysis: %w", err)
	}
	// The report quotes outside text (header values, DNS records); should
	// one hold a NUL character, jsonb would refuse its \u0000 escape (Go's
	// encoder writes no other escape jsonb refuses, and no invalid UTF-8).
	doc = bytes.ReplaceAll(doc, []byte(`\u0000`), []byte(`\ufffd`))
	err = dbutil.WithTx(ctx, db, func(ctx context.Context, tx dbutil.Tx) error {
		q := dbsqlc.New()
		row, err := q.MessageAnalysisSet(ctx, tx, dbsqlc.MessageAnalysisSetParams{ID: messageID, Analysis: doc, AnalyzedAt: now.UTC()})
		if dbutil.IsNotFound(err) {
			// Analysed already (a retried job whose commit landed): the
			// stored report and its event stand; or the message is gone.
			if _, err := q.MessageAnalysisGet(ctx, tx, messageID); err == nil {
				rep = nil
				return nil
			}
			return fmt.Errorf("message %s: %w", messageID, pgx.ErrNoRows)
		}
		if err != nil {
			return fmt.Errorf("error storing the analysis: %w", err)
		}
		_, err = em.Emit(ctx, tx, events.Event{
			AccountID: row.AccountID,
			Type:      events.TypeReceiverMessageAnalyzed,
			Payload: map[string]any{
				"receiver_id": row.ReceiverID, "message_id": messageID, "grade": rep.Grade, "score": rep.Score,
				"spf": rep.Verdicts.SPF, "dkim": rep.Verdicts.DKIM, "dmarc": rep.Verdicts.DMARC,
			},
			At: now,
		})
		if err != nil {
			return fmt.Errorf("emitting %s: %w", events.TypeReceiverMessageAnalyzed, err)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return rep, nil
}
