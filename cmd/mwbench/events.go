package main

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/mailwatch/mailwatch/internal/events"
)

const (
	benchAccounts          = 1000
	benchEventsPerAccount  = 1000
	benchEventsSpan        = 90 * 24 * time.Hour
	benchCriticalPerMille  = 20  // ~2% of events are alerts
	benchWarningPerMille   = 150 // ~15% warnings
	benchAckedAlertPercent = 60  // of alerts older than a day
)

// benchEvents seeds 1,000,000 events over 1,000 accounts with COPY, then
// measures the event and alert listings of one account at 32 connections
// beside the foundation's authenticated baseline route.
func benchEvents(ctx context.Context, env *benchEnv) error {
	srv, err := env.startAPI(ctx, env.Pool, nil)
	if err != nil {
		return err
	}
	defer srv.close()
	id, key, err := createAccount(ctx, srv.BaseURL, fmt.Sprintf("bench-events-%d@example.com", time.Now().UnixNano()))
	if err != nil {
		return err
	}
	measured := uuid.MustParse(id)

	types, mix, err := benchEventTypes()
	if err != nil {
		return err
	}
	t0 := time.Now()
	accounts, err := seedBenchAccounts(ctx, env, measured)
	if err != nil {
		return err
	}
	n, err := seedBenchEvents(ctx, env, accounts, types)
	if err != nil {
		return err
	}
	seeded := time.Since(t0)
	t1 := time.Now()
	if _, err := env.Pool.Exec(ctx, "ANALYZE events"); err != nil {
		return err
	}
	var unacked, alerts int
	if err := env.Pool.QueryRow(ctx, `SELECT count(*) FILTER (WHERE acknowledged_at IS NULL), count(*)
		FROM events WHERE account_id = $1 AND severity = 'critical'`, measured).Scan(&unacked, &alerts); err != nil {
		return err
	}
	fmt.Printf("seeded %d events over %d accounts in %s (COPY), ANALYZE %s; measured account: %d alerts, %d unacknowledged\n",
		n, len(accounts), seeded.Round(time.Millisecond), time.Since(t1).Round(time.Millisecond), alerts, unacked)
	var pageBytes int
	if err := env.Pool.QueryRow(ctx, `SELECT coalesce(sum(length(rendered)), 0) FROM (SELECT rendered FROM events
		WHERE account_id = $1 ORDER BY created_at DESC, id DESC LIMIT 50) p`, measured).Scan(&pageBytes); err != nil {
		return err
	}
	fmt.Printf("events    %s; the measured first page: %d bytes of stored renderings\n", mix, pageBytes)

	if err := printEventPlans(ctx, env, measured); err != nil {
		return err
	}
	return measureEventListings(ctx, env, srv.BaseURL, key)
}

// printEventPlans prints the plan of the measured account's first page of
// events and of its unacknowledged alerts: node, index, time and buffers.
func printEventPlans(ctx context.Context, env *benchEnv, measured uuid.UUID) error {
	for _, f := range []events.ListFilter{
		{AccountID: measured, Order: events.OrderDesc, Limit: 50},
		{AccountID: measured, Order: events.OrderDesc, Limit: 50, AlertsOnly: true, Acknowledged: new(bool)},
	} {
		sql, args := events.ListQuery(f)
		var plan []byte
		if err := env.Pool.QueryRow(ctx, "EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) "+sql, args...).Scan(&plan); err != nil {
			return err
		}
		var p []struct {
			Plan struct {
				Plans []struct {
					NodeType  string `json:"Node Type"`
					IndexName string `json:"Index Name"`
					HitBlocks int    `json:"Shared Hit Blocks"`
					ReadBlock int    `json:"Shared Read Blocks"`
				} `json:"Plans"`
			} `json:"Plan"`
			ExecutionTime float64 `json:"Execution Time"`
		}
		if err := json.Unmarshal(plan, &p); err == nil && len(p) == 1 && len(p[0].Plan.Plans) == 1 {
			n := p[0].Plan.Plans[0]
			fmt.Printf("plan      %s using %s: %.2f ms, %d buffers hit, %d read\n", n.NodeType, n.IndexName, p[0].ExecutionTime, n.HitBlocks, n.ReadBlock)
		}
	}
	return nil
}

// measureEventListings loads the event and alert listings at the API at
// baseURL with key, beside the authenticated baseline route, and prints
// rates, CPU per request and ratios.
func measureEventListings(ctx context.Context, env *benchEnv, baseURL, key string) error {
	const conns = 32
	d := benchDuration()
	// CPU time per request beside the rates: on this shared machine the
	// rates move with the neighbours' load between the phases, the CPU
	// spent by this process (server + load generator) much less.
	baseline, baselineCPU, err := measureAuthRouteCPU(ctx, env, conns, d)
	if err != nil {
		return err
	}
	meter := newCPUMeter(ctx, env.Pool)
	eventsURL := baseURL + "/api/accounts/me/events?limit=50"
	alertsURL := baseURL + "/api/accounts/me/alerts?acknowledged=false"
	runLoad(ctx, conns, time.Second, getOK(eventsURL, key)) // warm up
	runLoad(ctx, conns, time.Second, getOK(alertsURL, key))
	c0 := meter.read()
	list := runLoad(ctx, conns, d, getOK(eventsURL, key))
	c1 := meter.read()
	alertList := runLoad(ctx, conns, d, getOK(alertsURL, key))
	c2 := meter.read()

	fmt.Printf("%d connections, %s per run, same database and pool size\n", conns, d)
	fmt.Printf("baseline  GET /api/accounts/me                      %s\n", baseline)
	fmt.Printf("events    GET /api/accounts/me/events?limit=50      %s\n", list)
	fmt.Printf("alerts    GET /api/accounts/me/alerts?acknowledged=false %s\n", alertList)
	fmt.Printf("cpu       baseline %s\n", baselineCPU)
	fmt.Printf("cpu       events   %s\n", meter.perRequest(c0, c1, list.Requests))
	fmt.Printf("cpu       alerts   %s\n", meter.perRequest(c1, c2, alertList.Requests))
	for _, r := range []struct {
		name string
		res  loadResult
	}{{"events", list}, {"alerts", alertList}} {
		fmt.Printf("ratio     %-6s / baseline: p50 %.2fx  p99 %.2fx  req/s %.2f  (target: within 2x)\n", r.name,
			float64(r.res.P50)/float64(max(baseline.P50, 1)), float64(r.res.P99)/float64(max(baseline.P99, 1)),
			r.res.RPS()/baseline.RPS())
	}
	return nil
}

// seedBenchAccounts inserts the other 999 accounts directly and returns
// all 1,000 ids, the measured one first.
func seedBenchAccounts(ctx context.Context, env *benchEnv, measured uuid.UUID) ([]uuid.UUID, error) {
	ids := []uuid.UUID{measured}
	rows := make([][]any, 0, benchAccounts-1)
	for i := 1; i < benchAccounts; i++ {
		id := uuid.Must(uuid.NewV7())
		ids = append(ids, id)
		rows = append(rows, []any{id, fmt.Sprintf("bench-%d-%s@example.com", i, id), "not-a-hash"})
	}
	_, err := env.Pool.CopyFrom(ctx, pgx.Identifier{"accounts"}, []string{"id", "email", "password_hash"}, pgx.CopyFromRows(rows))
	if err != nil {
		return nil, fmt.Errorf("error seeding accounts: %w", err)
	}
	return ids, nil
}

// uuidV7At returns a v7 id whose timestamp is at, as Emit would have made.
func uuidV7At(at time.Time) uuid.UUID {
	id := uuid.Must(uuid.NewV7())
	ms := uint64(at.UnixMilli())
	for i := 0; i < 6; i++ {
		id[i] = byte(ms >> (40 - 8*i))
	}
	return id
}

// eventSource streams generated events into CopyFrom.
type eventSource struct {
	accounts []uuid.UUID
	types    []events.Type
	now      time.Time
	rng      *rand.Rand
	i, total int
	row      []any
}

func (s *eventSource) Next() bool {
	if s.i >= s.total {
		return false
	}
	acct := s.accounts[s.i%len(s.accounts)]
	s.i++
	at := s.now.Add(-time.Duration(s.rng.Int64N(int64(benchEventsSpan))))
	typ := s.types[s.rng.IntN(len(s.types))]
	sev := string(typ.DefaultSeverity)
	var ackAt, ackBy any
	switch r := s.rng.IntN(1000); {
	case r < benchCriticalPerMille:
		sev = "critical"
		if s.now.Sub(at) > 24*time.Hour && s.rng.IntN(100) < benchAckedAlertPercent {
			ackAt, ackBy = at.Add(time.Hour), "oncall@example.com"
		}
	case r < benchCriticalPerMille+benchWarningPerMille:
		sev = "warning"
	case sev == "critical":
		sev = "warning"
	}
	var domain *string
	if s.rng.IntN(4) > 0 {
		d := fmt.Sprintf("d%d.example.com", s.rng.IntN(5))
		domain = &d
	}
	at = at.Truncate(time.Microsecond)
	id := uuidV7At(at)
	r := events.Rendered{ID: id, Type: typ.Name, Payload: typ.Example, CreatedAt: at, Severity: sev, Domain: domain, Tags: []string{"prod"}}
	s.row = []any{id, acct, typ.Name, sev, domain, []string{"prod"}, json.RawMessage(typ.Example), string(r.AppendJSON(nil)), at, ackAt, ackBy}
	return true
}

func (s *eventSource) Values() ([]any, error) { return s.row, nil }
func (s *eventSource) Err() error             { return nil }

// seedBenchEvents seeds events of types (the pinned mix, events_mix.go).
func seedBenchEvents(ctx context.Context, env *benchEnv, accounts []uuid.UUID, types []events.Type) (int64, error) {
	src := &eventSource{
		accounts: accounts, types: types, now: time.Now().UTC(),
		rng: rand.New(rand.NewPCG(1, 2)), total: len(accounts) * benchEventsPerAccount,
	}
	n, err := env.Pool.CopyFrom(ctx, pgx.Identifier{"events"},
		[]string{"id", "account_id", "event_type", "severity", "domain", "tags", "payload", "rendered", "created_at", "acknowledged_at", "acknowledged_by"}, src)
	if err != nil {
		return n, fmt.Errorf("error seeding events: %w", err)
	}
	return n, nil
}
