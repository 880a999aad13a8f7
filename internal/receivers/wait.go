package receivers

import (
	"context"
	"fmt"
	"time"

	"github.com/google/uuid"

	"github.com/mailwatch/mailwatch/internal/dbsqlc"
	"github.com/mailwatch/mailwatch/internal/dbutil"
)

// WaitRequest is a long poll on a receiver.
type WaitRequest struct {
	AccountID, ReceiverID uuid.UUID
	// After, when set, is the last message seen (ErrNotAMessage when it is
	// none of the receiver's); the answer is the oldest message after it.
	After   *uuid.UUID
	Timeout time.Duration
	Now     func() time.Time
}

// Wait returns the oldest message of the receiver after req.After at once
// if there is one, otherwise as soon as one arrives; nil when none arrives
// within req.Timeout. It fails as Get (also when the receiver expires or is
// deleted during the wait), with ErrHubClosed when the hub stops, and with
// ctx's error. It registers with the hub before it looks at the database,
// so a message committed between the look and the wait still wakes it, and
// holds no database connection while it waits.
func Wait(ctx context.Context, db dbsqlc.DBTX, hub *Hub, req WaitRequest) (*Message, error) {
	w, err := hub.Register(req.ReceiverID)
	if err != nil {
		return nil, err
	}
	defer w.Close()
	deadline := time.NewTimer(req.Timeout)
	defer deadline.Stop()

	r, err := Get(ctx, db, req.AccountID, req.ReceiverID, req.Now())
	if err != nil {
		return nil, err
	}
	var afterSeq int64
	if req.After != nil {
		if afterSeq, err = MessageSeq(ctx, db, r.ID, *req.After); err != nil {
			return nil, err
		}
	}
	expiry := time.NewTimer(time.Until(r.ExpiresAt) + time.Millisecond)
	defer expiry.Stop()
	for {
		msg, err := nextMessage(ctx, db, req.AccountID, req.ReceiverID, afterSeq, req.Now())
		if err != nil || msg != nil {
			return msg, err
		}
		select {
		case <-w.C:
		case <-expiry.C:
			expiry.Reset(time.Second) // re-check until the clocks agree
		case <-deadline.C:
			return nil, nil
		case <-hub.Done():
			return nil, ErrHubClosed
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

// nextMessage returns the oldest message after afterSeq, nil when there is
// none yet, or the error a wait ends with (as Get).
func nextMessage(ctx context.Context, db dbsqlc.DBTX, account, receiverID uuid.UUID, afterSeq int64, now time.Time) (*Message, error) {
	m, err := dbsqlc.New().MessageNextForWait(ctx, db, dbsqlc.MessageNextForWaitParams{ReceiverID: receiverID, AccountID: account, AfterSeq: afterSeq})
	if dbutil.IsNotFound(err) {
		_, err := Get(ctx, db, account, receiverID, now)
		return nil, err
	}
	if err != nil {
		return nil, fmt.Errorf("reading the next message: %w", err)
	}
	if !now.Before(m.ExpiresAt) {
		return nil, &GoneError{ExpiresAt: m.ExpiresAt}
	}
	return messageFromRow(dbsqlc.MessageGetRow{
		ID: m.ID, ReceiverID: m.ReceiverID, AccountID: m.AccountID, Seq: m.Seq, Channel: m.Channel, Sender: m.Sender,
		Subject: m.Subject, TextBody: m.TextBody, HtmlBody: m.HtmlBody, Parsed: m.Parsed, SizeBytes: m.SizeBytes, ReceivedAt: m.ReceivedAt,
	})
}
