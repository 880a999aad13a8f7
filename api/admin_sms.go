package api

import (
	"context"
	"regexp"
	"strings"
	"time"

	"github.com/mailwatch/mailwatch/internal/dbsqlc"
	"github.com/mailwatch/mailwatch/internal/dbutil"
	"github.com/mailwatch/mailwatch/internal/events"
)

// e164 is an E.164 number: +, a country code not starting with 0, at most
// 15 digits in all (ITU-T E.164 section 6), and at least 7.
var e164 = regexp.MustCompile(`^\+[1-9][0-9]{6,14}$`)

// SMSNumber is one number of the operator's SMS pool.
type SMSNumber struct {
	PhoneNumber string     `json:"phone_number" validate:"required"`
	ReceiverID  *string    `json:"receiver_id" validate:"required" format:"uuid" description:"The live receiver holding the number; null when free."`
	AccountID   *string    `json:"account_id" validate:"required" format:"uuid" description:"The account of that receiver; null when free."`
	HeldUntil   *time.Time `json:"held_until" validate:"required" description:"When the holder expires and the number becomes free; null when free."`
	CreatedAt   time.Time  `json:"created_at" validate:"required"`
}

// AddSMSNumberRequest is the body of POST /api/admin/sms-numbers.
type AddSMSNumberRequest struct {
	PhoneNumber string `json:"phone_number" validate:"required,max=32,e164" example:"+14155550100" description:"E.164, e.g. +14155550100 (spaces, dashes, dots and parentheses are removed)."`
}

// SMSNumberPath names one pool number.
type SMSNumberPath struct {
	PhoneNumber string `path:"phone_number" description:"E.164; URL-encode the + as %2B."`
}

// normalizeE164 strips common separators and checks E.164.
func normalizeE164(field, raw string) (string, error) {
	s := strings.NewReplacer(" ", "", "-", "", ".", "", "(", "", ")", "").Replace(strings.TrimSpace(raw))
	if !e164.MatchString(s) {
		return "", InvalidField(field, "must be an E.164 number such as +14155550100")
	}
	return s, nil
}

func (s *Server) smsNumberFromRow(n dbsqlc.SMSNumberListRow) SMSNumber {
	out := SMSNumber{PhoneNumber: n.PhoneNumber, CreatedAt: n.CreatedAt.UTC()}
	if n.ReceiverID != nil && n.HolderExpiresAt != nil && s.now().Before(*n.HolderExpiresAt) {
		t := n.HolderExpiresAt.UTC()
		rid, aid := n.ReceiverID.String(), n.HolderAccountID.String()
		out.ReceiverID, out.AccountID, out.HeldUntil = &rid, &aid, &t
	}
	return out
}

func (s *Server) adminSMSRoutes() {
	Handle(s.router, Endpoint[AddSMSNumberRequest, SMSNumber]{
		Method: "POST", Path: "/api/admin/sms-numbers", Status: 201, OperationID: "addSMSNumber", Tag: "admin",
		Summary:     "Add a number to the SMS pool",
		Description: "The number must be E.164 (422 otherwise); a number already in the pool is 409. Point its Twilio incoming-message webhook at POST /api/webhooks/sms.",
		Auth:        AuthAdmin,
		Errors:      []int{409},
		Call: func(ctx context.Context, req *AddSMSNumberRequest) (*SMSNumber, error) {
			number, err := normalizeE164("phone_number", req.PhoneNumber)
			if err != nil {
				return nil, err
			}
			row, err := dbutil.WithTxV(ctx, s.db, func(ctx context.Context, tx dbutil.Tx) (dbsqlc.SmsNumber, error) {
				row, err := s.q.SMSNumberInsert(ctx, tx, number)
				if err != nil {
					return row, err
				}
				return row, s.auditSMSPool(ctx, tx, "added", number)
			})
			if dbutil.IsUniqueViolation(err, "sms_numbers_pkey") {
				return nil, Conflict("%s is already in the pool", number)
			}
			if err != nil {
				return nil, err
			}
			return &SMSNumber{PhoneNumber: row.PhoneNumber, CreatedAt: row.CreatedAt.UTC()}, nil
		},
	})
	Handle(s.router, Endpoint[emptyRequest, []SMSNumber]{
		Method: "GET", Path: "/api/admin/sms-numbers", OperationID: "listSMSNumbers", Tag: "admin",
		Summary:     "List the SMS pool",
		Description: "Every number with the live receiver (and account) holding it, if any.",
		Auth:        AuthAdmin,
		Call: func(ctx context.Context, _ *emptyRequest) (*[]SMSNumber, error) {
			rows, err := s.q.SMSNumberList(ctx, s.db)
			if err != nil {
				return nil, err
			}
			out := make([]SMSNumber, len(rows))
			for i, r := range rows {
				out[i] = s.smsNumberFromRow(r)
			}
			return &out, nil
		},
	})
	Handle(s.router, Endpoint[SMSNumberPath, NoContent]{
		Method: "DELETE", Path: "/api/admin/sms-numbers/{phone_number}", Status: 204, OperationID: "removeSMSNumber", Tag: "admin",
		Summary: "Remove a number from the SMS pool",
		Description: "A number held by a live receiver is 409 (delete the receiver or wait until it expires): removing it " +
			"would silently cut the receiver off. A number held by an expired receiver is removed.",
		Auth:   AuthAdmin,
		Errors: []int{409},
		Call: func(ctx context.Context, req *SMSNumberPath) (*NoContent, error) {
			number, err := normalizeE164("phone_number", req.PhoneNumber)
			if err != nil {
				return nil, NotFound("SMS number")
			}
			err = dbutil.WithTx(ctx, s.db, func(ctx context.Context, tx dbutil.Tx) error {
				row, err := s.q.SMSNumberGetForUpdate(ctx, tx, number)
				if dbutil.IsNotFound(err) {
					return NotFound("SMS number")
				}
				if err != nil {
					return err
				}
				if row.ReceiverID != nil && row.HolderExpiresAt != nil && s.now().Before(*row.HolderExpiresAt) {
					return Conflict("%s is held by receiver %s until %s; delete that receiver first or wait",
						number, row.ReceiverID, row.HolderExpiresAt.UTC().Format(time.RFC3339))
				}
				if _, err = s.q.SMSNumberDelete(ctx, tx, number); err != nil {
					return err
				}
				return s.auditSMSPool(ctx, tx, "removed", number)
			})
			if err != nil {
				return nil, err
			}
			return &NoContent{}, nil
		},
	})
}

// auditSMSPool records a change of the pool as sms_pool_changed on the
// calling admin's own account (the pool belongs to no account).
func (s *Server) auditSMSPool(ctx context.Context, tx dbutil.Tx, action, number string) error {
	caller := mustCaller(ctx)
	_, err := s.deps.Emitter.Emit(ctx, tx, events.Event{AccountID: caller.AccountID, Type: events.TypeSMSPoolChanged,
		Payload: map[string]any{"action": action, "phone_number": number, "admin_key_identifier": caller.KeyIdentifier}})
	return err
}
