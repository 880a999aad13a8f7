package jobs

import (
	"context"
	"io"
	"log/slog"
	"net"
	"net/netip"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/rivertype"
	"github.com/stretchr/testify/require"

	"github.com/mailwatch/mailwatch/internal/dbsqlc"
	"github.com/mailwatch/mailwatch/internal/dbtest"
	"github.com/mailwatch/mailwatch/internal/dnscheck"
	"github.com/mailwatch/mailwatch/internal/dnstest"
	"github.com/mailwatch/mailwatch/internal/events"
	"github.com/mailwatch/mailwatch/internal/queues"
	"github.com/mailwatch/mailwatch/internal/receivers"
	"github.com/mailwatch/mailwatch/internal/smtpd"
	"github.com/mailwatch/mailwatch/internal/testfactory"
)

// holdingResolver answers through a real loopback DNS server, but holds
// every lookup of a name under held until release is closed.
type holdingResolver struct {
	dnscheck.Resolver
	held    string
	release chan struct{}
	waiting atomic.Int64
}

func (h *holdingResolver) hold(ctx context.Context, name string) error {
	if !strings.Contains(strings.ToLower(name), h.held) {
		return nil
	}
	h.waiting.Add(1)
	defer h.waiting.Add(-1)
	select {
	case <-h.release:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (h *holdingResolver) LookupTXT(ctx context.Context, name string) ([]string, error) {
	if err := h.hold(ctx, name); err != nil {
		return nil, err
	}
	return h.Resolver.LookupTXT(ctx, name)
}

func (h *holdingResolver) LookupMX(ctx context.Context, name string) ([]*net.MX, error) {
	if err := h.hold(ctx, name); err != nil {
		return nil, err
	}
	return h.Resolver.LookupMX(ctx, name)
}

func (h *holdingResolver) LookupNetIP(ctx context.Context, network, host string) ([]netip.Addr, error) {
	if err := h.hold(ctx, host); err != nil {
		return nil, err
	}
	return h.Resolver.LookupNetIP(ctx, network, host)
}

func (h *holdingResolver) Query(ctx context.Context, name string, qtype uint16) (*dnscheck.Answer, error) {
	if err := h.hold(ctx, name); err != nil {
		return nil, err
	}
	return h.Resolver.Query(ctx, name, qtype)
}

// One account's flood of test mail takes at most its bound of the analysis
// workers; another account's message is analysed while the flood's
// analyses are stuck, and the flood's jobs over the bound wait (snoozed,
// no attempt used) instead of holding a worker.
func TestReceiverAnalysisFairnessPerAccount(t *testing.T) {
	t.Parallel()
	const workers, bound, flood = 3, 2, 8
	srv := dnstest.Start(t, `
flood.example.   TXT "v=spf1 ip4:127.0.0.1 -all"
quiet.example.   TXT "v=spf1 ip4:127.0.0.1 -all"
`)
	res := &holdingResolver{Resolver: dnscheck.NewClient(srv.Addr(), 2*time.Second), held: "flood.example", release: make(chan struct{})}
	release := sync.OnceFunc(func() { close(res.release) })
	t.Cleanup(release)
	pool, _ := dbtest.NewDB(t)
	var mu sync.Mutex
	most := map[uuid.UUID]int{}
	deps := Deps{Pool: pool, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), Resolver: res,
		analysisAccountConcurrency: bound, observeAnalysisGate: func(a uuid.UUID, n int) {
			mu.Lock()
			defer mu.Unlock()
			most[a] = max(most[a], n)
		}}
	client, err := NewClient(deps, Options{Concurrency: workers, Queues: []string{queues.Analysis}})
	require.NoError(t, err)
	done, cancel := client.Subscribe(river.EventKindJobCompleted, river.EventKindJobFailed)
	t.Cleanup(cancel)
	ctx := context.Background()
	require.NoError(t, client.Start(ctx))
	t.Cleanup(func() {
		release()
		stopCtx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		_ = client.Stop(stopCtx)
	})

	store := &receivers.Store{DB: pool, Emitter: &events.Emitter{River: client}}
	receiver := func() (uuid.UUID, string) {
		acct := testfactory.Account(t, pool)
		address := uuid.NewString()[:12] + "@inbound.mailwatch.test"
		now := time.Now()
		_, err := dbsqlc.New().ReceiverInsert(ctx, pool, dbsqlc.ReceiverInsertParams{
			ID: uuid.Must(uuid.NewV7()), AccountID: acct, Channel: receivers.ChannelEmail, Label: "fair",
			Address: address, TtlSeconds: 3600, ExpiresAt: now.Add(time.Hour), CreatedAt: now,
		})
		require.NoError(t, err)
		return acct, address
	}
	deliver := func(address, domain string, i int) {
		raw := []byte("From: news@" + domain + "\r\nTo: " + address + "\r\nSubject: test " + domain +
			"\r\nMessage-ID: <" + uuid.NewString() + "@" + domain + ">\r\n\r\nHello.\r\n")
		require.NoError(t, store.Deliver(ctx, smtpd.Envelope{
			From: "bounce@" + domain, To: []string{address}, Raw: raw, ReceivedAt: time.Now(),
			RemoteAddr: "127.0.0.1:41000", Helo: "mta." + domain,
		}))
	}
	loud, loudAddr := receiver()
	quiet, quietAddr := receiver()
	for i := range flood {
		deliver(loudAddr, "flood.example", i)
	}
	// The flood's admitted analyses are stuck in their first lookup.
	for res.waiting.Load() < bound {
		select {
		case ev := <-done:
			require.NotEqual(t, rivertype.JobStateCompleted, ev.Job.State, "no flood analysis completes while held")
		case <-time.After(10 * time.Millisecond):
		}
	}
	deliver(quietAddr, "quiet.example", 0)

	// The quiet account's analysis completes while the flood is held.
	for ev := range done {
		if ev.Job.Kind != (receivers.AnalyzeArgs{}).Kind() {
			continue
		}
		require.Equal(t, rivertype.JobStateCompleted, ev.Job.State, "%v", ev.Job.Errors)
		if strings.Contains(string(ev.Job.EncodedArgs), quiet.String()) {
			break
		}
		t.Fatalf("a flood analysis completed while the flood is held: %s", ev.Job.EncodedArgs)
	}
	require.EqualValues(t, bound, res.waiting.Load(), "the flood holds exactly its bound of workers")
	// The flood's jobs over the bound wait for their turn (snoozed, with
	// their waits counted), while the held ones keep their workers.
	for waited := 0; waited == 0; {
		require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FROM river_job WHERE kind = $1 AND args->>'account_id' = $2
			AND (metadata->>$3)::int > 0`, receivers.AnalyzeArgs{}.Kind(), loud.String(), MetadataAnalysisFairWaits).Scan(&waited))
	}
	require.EqualValues(t, bound, res.waiting.Load())

	release()
	for completed := 0; completed < flood; {
		ev := <-done
		if ev.Job.Kind == (receivers.AnalyzeArgs{}).Kind() {
			require.Equal(t, rivertype.JobStateCompleted, ev.Job.State, "%v", ev.Job.Errors)
			completed++
		}
	}
	mu.Lock()
	defer mu.Unlock()
	require.Equal(t, bound, most[loud], "never more than the bound of one account at once")
	require.Equal(t, 1, most[quiet])
}
