package notify

import (
	"context"
	"crypto/sha256"
	"fmt"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/mailwatch/mailwatch/internal/dbsqlc"
	"github.com/mailwatch/mailwatch/internal/dbutil"
)

// Verification mail goes to an address nobody has shown they own yet, so
// its budget belongs to the recipient address, whichever account asks and
// however often the address is removed and added again: at most one mail
// per RecipientCooldown and RecipientMailsPerDay per UTC day. The budget is
// taken in the transaction that queues the mail, so concurrent requests
// queue one mail at most and a request that fails takes nothing.
//
// The price is that anyone can spend an address's budget for the day by
// adding it; its owner then waits for the next UTC day at worst, which is
// preferable to letting anyone mail anyone without bound.
const (
	// RecipientCooldown is the least time between two verification mails
	// to one address.
	RecipientCooldown = time.Minute
	// RecipientMailsPerDay bounds the verification mails to one address per
	// UTC day.
	RecipientMailsPerDay = 5

	// recipientRetention is how long a recipient's record outlives its last
	// mail: past a day no window reads it.
	recipientRetention = 48 * time.Hour
	// recipientPruneBatch is how many expired records each claim deletes.
	recipientPruneBatch = 16
)

// RecipientBusyError refuses a verification mail to an address that had
// one less than RecipientCooldown ago, or RecipientMailsPerDay today.
type RecipientBusyError struct {
	// RetryAfter is how long until a mail may be queued again.
	RetryAfter time.Duration
	// Daily is set when the day's budget is spent (else the cooldown runs).
	Daily bool
}

func (e *RecipientBusyError) Error() string {
	secs := strconv.Itoa(int(e.RetryAfter / time.Second))
	if e.Daily {
		return fmt.Sprintf("this address has been sent %d verification mails today (UTC), the most one address gets a day "+
			"whichever account asks; retry in %s s", RecipientMailsPerDay, secs)
	}
	return "a verification mail was sent to this address less than a minute ago (each lands in somebody's inbox); retry in " + secs + " s"
}

// claimRecipient takes one verification mail to email (lower case) from its
// budget at now, in tx, or returns a *RecipientBusyError. A refused claim
// leaves tx usable.
func claimRecipient(ctx context.Context, tx pgx.Tx, email string, now time.Time) error {
	q := dbsqlc.New()
	now = now.UTC()
	day := now.Truncate(24 * time.Hour)
	hash := recipientHash(email)
	_, err := q.VerificationRecipientClaim(ctx, tx, dbsqlc.VerificationRecipientClaimParams{
		RecipientHash: hash, Now: now, Day: day, CooldownStart: now.Add(-RecipientCooldown), PerDay: RecipientMailsPerDay,
	})
	if err == nil {
		if _, err := q.VerificationRecipientPrune(ctx, tx, dbsqlc.VerificationRecipientPruneParams{
			Before: now.Add(-recipientRetention), Max: recipientPruneBatch,
		}); err != nil {
			return fmt.Errorf("error pruning verification recipients: %w", err)
		}
		return nil
	}
	if !dbutil.IsNotFound(err) {
		return fmt.Errorf("error recording verification mail: %w", err)
	}
	row, err := q.VerificationRecipientGet(ctx, tx, hash)
	if err != nil {
		return fmt.Errorf("error reading verification recipient: %w", err)
	}
	busy := &RecipientBusyError{RetryAfter: row.LastQueuedAt.Add(RecipientCooldown).Sub(now)}
	if row.Day.UTC().Format(time.DateOnly) == day.Format(time.DateOnly) && row.DayCount >= RecipientMailsPerDay {
		busy = &RecipientBusyError{RetryAfter: day.Add(24 * time.Hour).Sub(now), Daily: true}
	}
	// Whole seconds, rounded up, so a client that waits as told is served.
	busy.RetryAfter = max((busy.RetryAfter + time.Second - 1).Truncate(time.Second), time.Second)
	return busy
}

// recipientHash keys a recipient's budget: nothing readable is kept of an
// address once it is removed.
func recipientHash(email string) []byte {
	h := sha256.Sum256([]byte("verification-recipient\x00" + email))
	return h[:]
}
