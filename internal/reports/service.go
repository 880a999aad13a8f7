package reports

import (
	"github.com/mailwatch/mailwatch/internal/dbutil"
	"github.com/mailwatch/mailwatch/internal/events"
	"github.com/mailwatch/mailwatch/internal/secretbox"
)

// NewService returns the reports capability over db, as the workers and
// tools use it: events are written in the parse transaction, and with a
// keyring reporting addresses are signed under inboundDomain
// (INBOUND_DOMAIN). The caller sets Resolver, Logger, Now and
// AfterAggregate when it has them.
func NewService(db dbutil.Executor, keyring *secretbox.Keyring, inboundDomain string) *Service {
	svc := &Service{DB: db, Emitter: &events.Emitter{}}
	if keyring != nil {
		svc.Signer = &Signer{Keyring: keyring, Domain: inboundDomain}
	}
	return svc
}
