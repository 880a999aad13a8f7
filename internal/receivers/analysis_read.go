package receivers

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/google/uuid"

	"github.com/mailwatch/mailwatch/internal/dbsqlc"
	"github.com/mailwatch/mailwatch/internal/dbutil"
	"github.com/mailwatch/mailwatch/internal/deliverability"
)

// Statuses of a message's analysis.
const (
	// AnalysisPending: the message came over SMTP and its analysis job has
	// not stored a report yet.
	AnalysisPending = "pending"
	// AnalysisDone: the report is stored.
	AnalysisDone = "done"
	// AnalysisNotApplicable: the message did not come over SMTP (an ingress
	// webhook or SMS), so there is no session to judge it by.
	AnalysisNotApplicable = "not_applicable"
)

// Reasons given with AnalysisNotApplicable.
const (
	reasonWebhook = "the message came through the email ingress webhook, not over SMTP: without the SMTP session " +
		"(client IP, HELO, MAIL FROM, TLS) there is nothing to judge it by as its receiver"
	reasonSMS = "SMS messages are not analysed"
)

// Analysis is the state of a message's deliverability analysis.
type Analysis struct {
	Status string
	// Reason says why the analysis is not applicable.
	Reason string
	// Report and AnalyzedAt are set when Status is AnalysisDone.
	Report     *deliverability.Report
	AnalyzedAt *time.Time
}

// AnalysisSummary is what listings show of an analysis: the status, and
// once done the grade, score and verdicts.
type AnalysisSummary struct {
	Status   string
	Reason   string
	Grade    *string
	Score    *int
	Verdicts *deliverability.Verdicts
}

func notApplicableReason(channel string) string {
	if channel == ChannelSMS {
		return reasonSMS
	}
	return reasonWebhook
}

// GetAnalysis returns the analysis of a message of the account's live
// receiver (errors as GetMessage).
func GetAnalysis(ctx context.Context, db dbsqlc.DBTX, accountID, receiverID, id uuid.UUID, now time.Time) (*Analysis, error) {
	r, err := Get(ctx, db, accountID, receiverID, now)
	if err != nil {
		return nil, err
	}
	row, err := dbsqlc.New().MessageAnalysisForAccount(ctx, db, dbsqlc.MessageAnalysisForAccountParams{ID: id, ReceiverID: r.ID, AccountID: r.AccountID})
	if dbutil.IsNotFound(err) {
		return nil, ErrMessageNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("reading the message analysis: %w", err)
	}
	switch {
	case !row.HasSession:
		return &Analysis{Status: AnalysisNotApplicable, Reason: notApplicableReason(row.Channel)}, nil
	case row.Analysis == nil || row.AnalyzedAt == nil:
		return &Analysis{Status: AnalysisPending}, nil
	}
	var rep deliverability.Report
	if err := json.Unmarshal(row.Analysis, &rep); err != nil {
		return nil, fmt.Errorf("decoding the stored analysis: %w", err)
	}
	at := row.AnalyzedAt.UTC()
	return &Analysis{Status: AnalysisDone, Report: &rep, AnalyzedAt: &at}, nil
}

// AnalysisSummaries returns the analysis summaries of some messages of a
// receiver (already known to be the caller's), by message id.
func AnalysisSummaries(ctx context.Context, db dbsqlc.DBTX, receiverID uuid.UUID, ids []uuid.UUID) (map[uuid.UUID]AnalysisSummary, error) {
	out := make(map[uuid.UUID]AnalysisSummary, len(ids))
	if len(ids) == 0 {
		return out, nil
	}
	rows, err := dbsqlc.New().MessageAnalysisSummaries(ctx, db, dbsqlc.MessageAnalysisSummariesParams{ReceiverID: receiverID, Ids: ids})
	if err != nil {
		return nil, fmt.Errorf("reading analysis summaries: %w", err)
	}
	for _, row := range rows {
		s := AnalysisSummary{Status: AnalysisPending}
		switch {
		case !row.HasSession:
			s = AnalysisSummary{Status: AnalysisNotApplicable, Reason: notApplicableReason(row.Channel)}
		case row.AnalyzedAt != nil:
			var v struct {
				Grade    *string                  `json:"grade"`
				Score    *int                     `json:"score"`
				Verdicts *deliverability.Verdicts `json:"verdicts"`
			}
			if err := json.Unmarshal(row.Summary, &v); err != nil {
				return nil, fmt.Errorf("decoding an analysis summary: %w", err)
			}
			s = AnalysisSummary{Status: AnalysisDone, Grade: v.Grade, Score: v.Score, Verdicts: v.Verdicts}
		}
		out[row.ID] = s
	}
	return out, nil
}

// WaitAnalysis returns the analysis of a message as GetAnalysis does, but
// while it is pending waits up to timeout for the analysis job to store it
// (the job's transaction notifies the receiver's waiters through the hub).
// It registers with the hub before it reads, and holds no database
// connection while it waits; at the timeout it returns the pending state.
func WaitAnalysis(ctx context.Context, db dbsqlc.DBTX, hub *Hub, accountID, receiverID, id uuid.UUID, timeout time.Duration, now func() time.Time) (*Analysis, error) {
	w, err := hub.Register(receiverID)
	if err != nil {
		return nil, err
	}
	defer w.Close()
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	for {
		a, err := GetAnalysis(ctx, db, accountID, receiverID, id, now())
		if err != nil || a.Status != AnalysisPending {
			return a, err
		}
		select {
		case <-w.C:
		case <-deadline.C:
			return a, nil
		case <-hub.Done():
			return nil, ErrHubClosed
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}
