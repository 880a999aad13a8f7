package reports

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/mailwatch/mailwatch/internal/dbutil"
	"github.com/mailwatch/mailwatch/internal/smtpd"
)

// SMTPStore puts reporting addresses in front of another smtpd.Store (the
// receivers'): a recipient shaped like a reporting address ("dmarc+..." or
// "tlsrpt+...") is verified here and refused with 550 at RCPT when its MAC
// does not verify; every other recipient goes to Next.
type SMTPStore struct {
	Reports *Service
	Next    smtpd.Store
}

var _ smtpd.Store = (*SMTPStore)(nil)

// AcceptRecipient implements smtpd.Store.
func (s *SMTPStore) AcceptRecipient(ctx context.Context, address string) error {
	local, domain, _ := strings.Cut(address, "@")
	if !IsReportingLocalPart(local) {
		return s.Next.AcceptRecipient(ctx, address)
	}
	t, err := s.Reports.Resolve(ctx, s.Reports.DB, local)
	if err == nil && !s.Reports.RoutesAt(t, domain) {
		err = ErrBadAddress
	}
	if errors.Is(err, ErrBadAddress) {
		return fmt.Errorf("%w: %w", smtpd.ErrUnknownRecipient, err)
	}
	return err
}

// Deliver implements smtpd.Store: each reporting recipient gets its copy of
// the raw message stored and its parse queued, all in one transaction;
// the other recipients go to Next. A message to both kinds is stored for
// the reports first, so a failure of Next (451, the sender retries) can at
// worst store a report twice, which the parse acknowledges as a duplicate.
func (s *SMTPStore) Deliver(ctx context.Context, env smtpd.Envelope) error {
	var reportRcpts, others []string
	for _, to := range env.To {
		local, _, _ := strings.Cut(to, "@")
		if IsReportingLocalPart(local) {
			reportRcpts = append(reportRcpts, to)
		} else {
			others = append(others, to)
		}
	}
	if len(reportRcpts) > 0 {
		err := dbutil.WithTx(ctx, s.Reports.DB, func(ctx context.Context, tx pgx.Tx) error {
			for _, rcpt := range reportRcpts {
				local, domain, _ := strings.Cut(rcpt, "@")
				t, err := s.Reports.Resolve(ctx, tx, local)
				if err == nil && !s.Reports.RoutesAt(t, domain) {
					err = ErrBadAddress
				}
				if errors.Is(err, ErrBadAddress) {
					continue // its domain was deleted during the session
				}
				if err != nil {
					return err
				}
				if _, err := s.Reports.Receive(ctx, tx, Incoming{
					AccountID: t.AccountID, DomainID: t.DomainID, Kind: t.Kind, Source: SourceSMTP, Raw: env.Raw,
				}); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			return err
		}
	}
	if len(others) == 0 {
		return nil
	}
	env.To = others
	return s.Next.Deliver(ctx, env)
}
