package receivers

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"

	"github.com/mailwatch/mailwatch/internal/dbsqlc"
	"github.com/mailwatch/mailwatch/internal/dbutil"
	"github.com/mailwatch/mailwatch/internal/events"
)

var (
	// ErrMessageNotFound: the receiver has no message with the id.
	ErrMessageNotFound = errors.New("message not found")
	// ErrNoRaw: an SMS message has no raw form.
	ErrNoRaw = errors.New("SMS messages have no raw form")
	// ErrNotAMessage: a cursor or an "after" id that is no message of the
	// receiver.
	ErrNotAMessage = errors.New("is no message of this receiver")
)

// Message is a stored message. A listing leaves TextBody and HTMLBody
// empty.
type Message struct {
	ID, ReceiverID, AccountID uuid.UUID
	Seq                       int64
	Channel, Sender, Subject  string
	TextBody, HTMLBody        string
	Details                   Details
	SizeBytes                 int
	ReceivedAt                time.Time
}

// DecodeDetails reads a message's stored details; its lists are never nil.
func DecodeDetails(raw []byte) (Details, error) {
	var d Details
	if err := json.Unmarshal(raw, &d); err != nil {
		return d, fmt.Errorf("decoding stored message details: %w", err)
	}
	d.To, d.Cc, d.Recipients = nonNil(d.To), nonNil(d.Cc), nonNil(d.Recipients)
	d.Headers, d.Attachments = nonNil(d.Headers), nonNil(d.Attachments)
	d.Links, d.Codes, d.Media = nonNil(d.Links), nonNil(d.Codes), nonNil(d.Media)
	return d, nil
}

func messageFromRow(r dbsqlc.MessageGetRow) (*Message, error) {
	d, err := DecodeDetails(r.Parsed)
	if err != nil {
		return nil, err
	}
	return &Message{
		ID: r.ID, ReceiverID: r.ReceiverID, AccountID: r.AccountID, Seq: r.Seq, Channel: r.Channel, Sender: r.Sender,
		Subject: r.Subject, TextBody: r.TextBody, HTMLBody: r.HtmlBody, Details: d, SizeBytes: int(r.SizeBytes),
		ReceivedAt: r.ReceivedAt.UTC(),
	}, nil
}

// MessageSeq is the sequence number of the receiver's message id, or
// ErrNotAMessage.
func MessageSeq(ctx context.Context, db dbsqlc.DBTX, receiverID, id uuid.UUID) (int64, error) {
	seq, err := dbsqlc.New().MessageGetSeq(ctx, db, dbsqlc.MessageGetSeqParams{ID: id, ReceiverID: receiverID})
	if dbutil.IsNotFound(err) {
		return 0, ErrNotAMessage
	}
	if err != nil {
		return 0, fmt.Errorf("reading message sequence: %w", err)
	}
	return seq, nil
}

// MessagePage asks for one page of a receiver's messages.
type MessagePage struct {
	// Asc lists in arrival order; newest first otherwise.
	Asc bool
	// After continues after this message in the chosen order
	// (ErrNotAMessage when it is none of the receiver's).
	After *uuid.UUID
	Limit int
}

// ListMessages lists a page of r's messages (r as Get returned it).
func ListMessages(ctx context.Context, db dbsqlc.DBTX, r dbsqlc.Receiver, p MessagePage) ([]Message, error) {
	var cursorSeq int64
	if p.After != nil {
		seq, err := MessageSeq(ctx, db, r.ID, *p.After)
		if err != nil {
			return nil, err
		}
		cursorSeq = seq
	} else if !p.Asc {
		cursorSeq = r.LastSeq + 1
	}
	var rows []dbsqlc.MessageListAscRow
	q := dbsqlc.New()
	if p.Asc {
		rs, err := q.MessageListAsc(ctx, db, dbsqlc.MessageListAscParams{ReceiverID: r.ID, AfterSeq: cursorSeq, Max: int32(p.Limit)})
		if err != nil {
			return nil, fmt.Errorf("listing messages: %w", err)
		}
		rows = rs
	} else {
		rs, err := q.MessageListDesc(ctx, db, dbsqlc.MessageListDescParams{ReceiverID: r.ID, BeforeSeq: cursorSeq, Max: int32(p.Limit)})
		if err != nil {
			return nil, fmt.Errorf("listing messages: %w", err)
		}
		for _, m := range rs {
			rows = append(rows, dbsqlc.MessageListAscRow(m))
		}
	}
	out := make([]Message, len(rows))
	for i, m := range rows {
		d, err := DecodeDetails(m.Parsed)
		if err != nil {
			return nil, err
		}
		out[i] = Message{
			ID: m.ID, ReceiverID: r.ID, AccountID: r.AccountID, Seq: m.Seq, Channel: m.Channel, Sender: m.Sender,
			Subject: m.Subject, Details: d, SizeBytes: int(m.SizeBytes), ReceivedAt: m.ReceivedAt.UTC(),
		}
	}
	return out, nil
}

// GetMessage returns a message of the account's live receiver (errors as
// Get, and ErrMessageNotFound).
func GetMessage(ctx context.Context, db dbsqlc.DBTX, accountID, receiverID, id uuid.UUID, now time.Time) (*Message, error) {
	r, err := Get(ctx, db, accountID, receiverID, now)
	if err != nil {
		return nil, err
	}
	row, err := dbsqlc.New().MessageGet(ctx, db, dbsqlc.MessageGetParams{ID: id, ReceiverID: r.ID, AccountID: r.AccountID})
	if dbutil.IsNotFound(err) {
		return nil, ErrMessageNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("reading message: %w", err)
	}
	return messageFromRow(row)
}

// GetMessageRaw returns a message's bytes as received (errors as
// GetMessage, and ErrNoRaw for an SMS).
func GetMessageRaw(ctx context.Context, db dbsqlc.DBTX, accountID, receiverID, id uuid.UUID, now time.Time) ([]byte, error) {
	r, err := Get(ctx, db, accountID, receiverID, now)
	if err != nil {
		return nil, err
	}
	raw, err := dbsqlc.New().MessageGetRaw(ctx, db, dbsqlc.MessageGetRawParams{ID: id, ReceiverID: r.ID, AccountID: r.AccountID})
	if dbutil.IsNotFound(err) {
		return nil, ErrMessageNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("reading raw message: %w", err)
	}
	if raw == nil {
		return nil, ErrNoRaw
	}
	return raw, nil
}

// DeleteMessage deletes a message of the account's live receiver and
// writes the audit event message_deleted (with the key identifier) in the
// same transaction.
func DeleteMessage(ctx context.Context, db dbutil.Executor, em *events.Emitter, accountID, receiverID, id uuid.UUID, keyIdentifier string, now time.Time) error {
	r, err := Get(ctx, db, accountID, receiverID, now)
	if err != nil {
		return err
	}
	return dbutil.WithTx(ctx, db, func(ctx context.Context, tx dbutil.Tx) error {
		n, err := dbsqlc.New().MessageDelete(ctx, tx, dbsqlc.MessageDeleteParams{ID: id, ReceiverID: r.ID, AccountID: accountID})
		if err != nil {
			return fmt.Errorf("deleting message: %w", err)
		}
		if n == 0 {
			return ErrMessageNotFound
		}
		_, err = em.Emit(ctx, tx, events.Event{
			AccountID: accountID,
			Type:      events.TypeMessageDeleted,
			Payload:   map[string]any{"receiver_id": r.ID, "message_id": id, "key_identifier": keyIdentifier},
		})
		if err != nil {
			return fmt.Errorf("emitting message_deleted: %w", err)
		}
		return nil
	})
}
