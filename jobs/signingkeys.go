package jobs

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/riverqueue/river"

	"github.com/mailwatch/mailwatch/internal/dbutil"
	"github.com/mailwatch/mailwatch/internal/identity"
)

func addSigningKeyWorkers(w *river.Workers, deps Deps) {
	river.AddWorker(w, &SigningKeyRotateWorker{deps: deps})
}

// signingKeyPeriodicJobs checks the keys hourly; a rotation happens only
// when the current key is older than JWT_KEY_ROTATION.
func signingKeyPeriodicJobs(Deps) []*river.PeriodicJob {
	return []*river.PeriodicJob{
		river.NewPeriodicJob(river.PeriodicInterval(time.Hour), func() (river.JobArgs, *river.InsertOpts) {
			return identity.SigningKeyRotateArgs{}, nil
		}, &river.PeriodicJobOpts{RunOnStart: true, ID: "signing_key_rotate"}),
	}
}

// SigningKeyRotateWorker works identity.SigningKeyRotateArgs.
type SigningKeyRotateWorker struct {
	river.WorkerDefaults[identity.SigningKeyRotateArgs]
	deps Deps
}

// Work rotates the keys in one transaction (serialised by a table lock, so
// a run racing the API's first-key bootstrap converges too).
func (w *SigningKeyRotateWorker) Work(ctx context.Context, job *river.Job[identity.SigningKeyRotateArgs]) error {
	if w.deps.Keyring == nil {
		return river.JobCancel(errors.New("no MAILWATCH_SECRET_KEY: signing keys cannot be sealed"))
	}
	now := w.deps.Now
	every, ttl := identity.DefaultRotateEvery, identity.MaxTokenTTL
	if c := w.deps.Settings; c.JWTKeyRotation > 0 {
		every = c.JWTKeyRotation
	}
	if c := w.deps.Settings; c.JWTTTL > 0 {
		ttl = c.JWTTTL
	}
	if job.Args.Force {
		every = 0 // identity.Rotate: every <= 0 forces a rotation
	}
	res, err := dbutil.WithTxV(ctx, w.deps.Pool, func(ctx context.Context, tx dbutil.Tx) (identity.RotateResult, error) {
		return identity.Rotate(ctx, tx, w.deps.Keyring, now().UTC(), every, identity.GraceFor(ttl, identity.DefaultRefresh))
	})
	if err != nil {
		return err
	}
	if res != (identity.RotateResult{}) {
		w.deps.Logger.InfoContext(ctx, "signing keys rotated", slog.String("promoted", res.Promoted),
			slog.String("retired", res.Retired), slog.String("created", res.Created), slog.Int64("deleted", res.Deleted))
	}
	return nil
}
