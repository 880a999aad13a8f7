package api

import (
	"context"
	"errors"
	"time"

	"github.com/mailwatch/mailwatch/internal/receivers"
)

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

func smsNumberOf(n receivers.PoolNumber) SMSNumber {
	out := SMSNumber{PhoneNumber: n.PhoneNumber, CreatedAt: n.CreatedAt, HeldUntil: n.HeldUntil}
	if n.ReceiverID != nil {
		rid := n.ReceiverID.String()
		out.ReceiverID = &rid
	}
	if n.AccountID != nil {
		aid := n.AccountID.String()
		out.AccountID = &aid
	}
	return out
}

// smsPoolError maps internal/receivers' pool errors to the API's answers.
func smsPoolError(err error) error {
	var exists *receivers.NumberExistsError
	var held *receivers.NumberHeldError
	switch {
	case errors.Is(err, receivers.ErrNotE164):
		return InvalidField("phone_number", err.Error())
	case errors.Is(err, receivers.ErrNumberNotFound):
		return NotFound("SMS number")
	case errors.As(err, &exists), errors.As(err, &held):
		return Conflict("%s", err.Error())
	}
	return err
}

func (s *Server) poolAdmin(ctx context.Context) receivers.PoolAdmin {
	caller := mustCaller(ctx)
	return receivers.PoolAdmin{AccountID: caller.AccountID, KeyIdentifier: caller.KeyIdentifier}
}

func (s *Server) adminSMSRoutes() {
	Handle(s.router, Endpoint[AddSMSNumberRequest, SMSNumber]{
		Method: "POST", Path: "/api/admin/sms-numbers", Status: 201, OperationID: "addSMSNumber", Tag: "admin",
		Summary:     "Add a number to the SMS pool",
		Description: "The number must be E.164 (422 otherwise); a number already in the pool is 409. Point its Twilio incoming-message webhook at POST /api/webhooks/sms.",
		Auth:        AuthAdmin,
		Errors:      []int{409},
		Call:        s.addSMSNumber,
	})
	Handle(s.router, Endpoint[emptyRequest, []SMSNumber]{
		Method: "GET", Path: "/api/admin/sms-numbers", OperationID: "listSMSNumbers", Tag: "admin",
		Summary:     "List the SMS pool",
		Description: "Every number with the live receiver (and account) holding it, if any.",
		Auth:        AuthAdmin,
		Call:        s.listSMSNumbers,
	})
	Handle(s.router, Endpoint[SMSNumberPath, NoContent]{
		Method: "DELETE", Path: "/api/admin/sms-numbers/{phone_number}", Status: 204, OperationID: "removeSMSNumber", Tag: "admin",
		Summary: "Remove a number from the SMS pool",
		Description: "A number held by a live receiver is 409 (delete the receiver or wait until it expires): removing it " +
			"would silently cut the receiver off. A number held by an expired receiver is removed.",
		Auth:   AuthAdmin,
		Errors: []int{409},
		Call:   s.removeSMSNumber,
	})
}

// addSMSNumber serves POST /api/admin/sms-numbers: add a number to the SMS pool.
func (s *Server) addSMSNumber(ctx context.Context, req *AddSMSNumberRequest) (*SMSNumber, error) {
	row, err := receivers.AddNumber(ctx, s.db, s.deps.Emitter, s.poolAdmin(ctx), req.PhoneNumber)
	if err != nil {
		return nil, smsPoolError(err)
	}
	return &SMSNumber{PhoneNumber: row.PhoneNumber, CreatedAt: row.CreatedAt.UTC()}, nil
}

// listSMSNumbers serves GET /api/admin/sms-numbers: list the SMS pool.
func (s *Server) listSMSNumbers(ctx context.Context, _ *emptyRequest) (*[]SMSNumber, error) {
	numbers, err := receivers.ListNumbers(ctx, s.db, s.now())
	if err != nil {
		return nil, err
	}
	out := make([]SMSNumber, len(numbers))
	for i, n := range numbers {
		out[i] = smsNumberOf(n)
	}
	return &out, nil
}

// removeSMSNumber serves DELETE /api/admin/sms-numbers/{phone_number}: remove a number from the SMS pool.
func (s *Server) removeSMSNumber(ctx context.Context, req *SMSNumberPath) (*NoContent, error) {
	if err := receivers.RemoveNumber(ctx, s.db, s.deps.Emitter, s.poolAdmin(ctx), req.PhoneNumber, s.now()); err != nil {
		return nil, smsPoolError(err)
	}
	return &NoContent{}, nil
}
