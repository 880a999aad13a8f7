package main

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"math/big"
	"net/http"
	"os"
	"sort"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"

	"github.com/mailwatch/mailwatch/internal/providers"
	"github.com/mailwatch/mailwatch/internal/queues"
	"github.com/mailwatch/mailwatch/jobs"
)

const (
	benchProviderConns        = 32
	benchSuppressions         = 1_000_000
	benchSuppressionSamples   = 2000
	benchProviderWorkerNumber = 100
)

// benchProviders measures the sending-provider path:
//
//   - ingress: signed SendGrid webhooks (one event each, ECDSA P-256
//     signed by the load generator) into POST /api/webhooks/providers/{id},
//     each verified, stored and handed to River in one transaction, next to
//     the authenticated GET baseline in the same run;
//   - worker: the queued payloads normalised by one worker client
//     (MaxWorkers 100, 10 ms fetch cooldown): events/s;
//   - suppression check at 1,000,000 entries: GET .../suppressions/check
//     over HTTP, and the capability's lookup alone (the server's time).
func benchProviders(ctx context.Context, env *benchEnv) error {
	d := benchDuration()
	auth, authCPU, err := measureAuthRouteCPU(ctx, env, benchProviderConns, d)
	if err != nil {
		return err
	}
	srv, err := env.startAPI(ctx, env.Pool, nil)
	if err != nil {
		return err
	}
	defer srv.close()
	accountID, key, err := createAccount(ctx, srv.BaseURL, fmt.Sprintf("bench-providers-%d@example.com", time.Now().UnixNano()))
	if err != nil {
		return err
	}
	priv, provID, err := setupBenchProvider(ctx, srv.BaseURL, key)
	if err != nil {
		return err
	}

	feed := &signedFeed{signer: &sendgridSigner{priv: priv}, url: srv.BaseURL + "/api/webhooks/providers/" + provID}
	warm := runLoad(ctx, benchProviderConns, time.Second, feed.post) // warm up, signing inline
	if err := feed.presign(int(warm.RPS()*2*d.Seconds()) + 20000); err != nil {
		return err
	}
	meter := newCPUMeter(ctx, env.Pool)
	c0 := meter.read()
	ingress := runLoad(ctx, benchProviderConns, d, feed.post)
	c1 := meter.read()
	used := int(feed.next.Load())
	inline := max(0, used-len(feed.presigned))
	fmt.Printf("%d connections, %s per run\n", benchProviderConns, d)
	fmt.Printf("baseline   GET /api/accounts/me (auth)          %s\n", auth)
	fmt.Printf("           %s\n", authCPU)
	fmt.Printf("ingress    signed SendGrid webhook -> River     %s\n", ingress)
	fmt.Printf("           %s; %d of %d presigned requests used, %d signed inline\n",
		meter.perRequest(c0, c1, ingress.Requests), min(used, len(feed.presigned)), len(feed.presigned), inline)
	fmt.Printf("ratio      ingress / auth baseline              %.2f  (target >= 0.50)\n", ingress.RPS()/auth.RPS())
	var batches int
	if err := env.Pool.QueryRow(ctx, `SELECT count(*) FROM river_job WHERE kind = $1`, providers.PayloadArgs{}.Kind()).Scan(&batches); err != nil {
		return err
	}
	fmt.Printf("           %d River jobs for the stored payloads: %.1f payloads per ingress transaction\n",
		batches, float64(ingress.Requests+warm.Requests)/float64(max(batches, 1)))

	if err := benchProviderWorker(ctx, env); err != nil {
		return err
	}
	if os.Getenv("BENCH_PROVIDERS_SKIP_SUPPRESSIONS") != "" {
		return nil // profiling the ingress and worker phases only
	}
	return benchSuppressionCheck(ctx, env, srv.BaseURL, key, accountID, d)
}

// setupBenchProvider adds a sender domain and a SendGrid provider, with a
// fresh P-256 verification key, linked to it. It returns the signing key
// and the provider's id.
func setupBenchProvider(ctx context.Context, baseURL, key string) (*ecdsa.PrivateKey, string, error) {
	priv, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, "", err
	}
	der, err := x509.MarshalPKIXPublicKey(&priv.PublicKey)
	if err != nil {
		return nil, "", err
	}
	if err := postJSON(ctx, baseURL+"/api/accounts/me/domains", key, map[string]any{"domain": "bench-sender.example"}, 201, nil); err != nil {
		return nil, "", err
	}
	var prov struct {
		ID string `json:"id"`
	}
	if err := postJSON(ctx, baseURL+"/api/accounts/me/sending-providers", key, map[string]any{
		"kind": "sendgrid", "label": "bench", "config": map[string]any{"public_key": base64.StdEncoding.EncodeToString(der)},
	}, 201, &prov); err != nil {
		return nil, "", err
	}
	if err := postJSON(ctx, baseURL+"/api/accounts/me/sending-providers/"+prov.ID+"/links", key, map[string]any{"domain": "bench-sender.example"}, 200, nil); err != nil {
		return nil, "", err
	}
	return priv, prov.ID, nil
}

// signedReq is one signed SendGrid webhook request.
type signedReq struct {
	body    []byte
	ts, sig string
}

// sendgridSigner signs SendGrid event webhooks, each a new event.
type sendgridSigner struct {
	priv *ecdsa.PrivateKey
	seq  atomic.Int64
}

// sign returns a request for one new "processed" event.
func (s *sendgridSigner) sign() (signedReq, error) {
	n := s.seq.Add(1)
	body := []byte(`[{"email":"r` + strconv.FormatInt(n, 10) + `@rcpt.example","event":"processed","sg_event_id":"e` +
		strconv.FormatInt(n, 10) + `","sg_message_id":"m` + strconv.FormatInt(n, 10) + `.f","timestamp":` +
		strconv.FormatInt(time.Now().Unix(), 10) + `}]`)
	ts := strconv.FormatInt(time.Now().Unix(), 10)
	h := sha256.Sum256(append([]byte(ts), body...))
	sig, err := ecdsa.SignASN1(rand.Reader, s.priv, h[:])
	if err != nil {
		return signedReq{}, err
	}
	return signedReq{body: body, ts: ts, sig: base64.StdEncoding.EncodeToString(sig)}, nil
}

// signedFeed posts signed requests to url. Requests are signed before the
// measured run (a provider signs on its own machines; signing here would
// take the server's CPU): the run takes them from presigned, and signs
// inline only if it runs out.
type signedFeed struct {
	signer    *sendgridSigner
	url       string
	presigned []signedReq
	next      atomic.Int64 // requests taken, presigned or not
}

// presign signs n requests for the next run and rewinds the feed.
func (f *signedFeed) presign(n int) error {
	f.presigned = make([]signedReq, n)
	for i := range f.presigned {
		var err error
		if f.presigned[i], err = f.signer.sign(); err != nil {
			return err
		}
	}
	f.next.Store(0)
	return nil
}

// post sends the next request; any status but 200 is an error.
func (f *signedFeed) post(ctx context.Context, client *http.Client) error {
	var r signedReq
	if i := f.next.Add(1) - 1; i < int64(len(f.presigned)) {
		r = f.presigned[i]
	} else {
		var err error
		if r, err = f.signer.sign(); err != nil {
			return err
		}
	}
	req, err := http.NewRequestWithContext(ctx, "POST", f.url, bytes.NewReader(r.body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-Twilio-Email-Event-Webhook-Signature", r.sig)
	req.Header.Set("X-Twilio-Email-Event-Webhook-Timestamp", r.ts)
	resp, err := client.Do(req)
	if err != nil {
		return err
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("status %d", resp.StatusCode)
	}
	return nil
}

// benchProviderWorker drains every queued payload with one worker client
// and prints its rate.
func benchProviderWorker(ctx context.Context, env *benchEnv) error {
	queued, err := unprocessedPayloads(ctx, env.Pool)
	if err != nil {
		return err
	}
	worker, err := newProviderWorker(env, env.Pool)
	if err != nil {
		return err
	}
	start := time.Now()
	if err := worker.Start(ctx); err != nil {
		return err
	}
	for {
		left, err := unprocessedPayloads(ctx, env.Pool)
		if err != nil {
			return err
		}
		if left == 0 || ctx.Err() != nil {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	drain := time.Since(start)
	stopCtx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	_ = worker.Stop(stopCtx)
	cancel()
	var events int
	if err := env.Pool.QueryRow(ctx, `SELECT count(*) FROM message_events`).Scan(&events); err != nil {
		return err
	}
	fmt.Printf("worker     %d payloads normalised in %s: %.0f events/s (%d message events)\n",
		queued, drain.Round(time.Millisecond), float64(queued)/drain.Seconds(), events)
	return nil
}

// newProviderWorker is the normalisation worker: one client on the default
// queue (MaxWorkers 100, 10 ms fetch cooldown) on pool.
func newProviderWorker(env *benchEnv, pool *pgxpool.Pool) (*river.Client[pgx.Tx], error) {
	return jobs.NewClient(jobs.Deps{Pool: pool, Logger: env.Logger}, jobs.Options{
		Concurrency: benchProviderWorkerNumber, FetchCooldown: 10 * time.Millisecond, Queues: []string{queues.Default},
	})
}

// unprocessedPayloads counts the stored payloads not yet normalised.
func unprocessedPayloads(ctx context.Context, pool *pgxpool.Pool) (int, error) {
	var n int
	err := pool.QueryRow(ctx, `SELECT count(*) FROM provider_payloads WHERE processed_at IS NULL`).Scan(&n)
	return n, err
}

// benchSuppressionCheck loads benchSuppressions entries for the account and
// measures the suppression check: the capability's lookup alone, then
// GET .../suppressions/check over HTTP with key.
func benchSuppressionCheck(ctx context.Context, env *benchEnv, baseURL, key, accountID string, d time.Duration) error {
	t0 := time.Now()
	if _, err := env.Pool.Exec(ctx, `
		INSERT INTO suppressions (id, account_id, email, email_hash, reason)
		SELECT gen_random_uuid(), $1, 'user' || g || '@bench.example', sha256(convert_to('user' || g || '@bench.example', 'UTF8')), 'hard_bounce'
		FROM generate_series(1, $2::int) g`, accountID, benchSuppressions); err != nil {
		return err
	}
	if _, err := env.Pool.Exec(ctx, `VACUUM ANALYZE suppressions`); err != nil {
		return err
	}
	fmt.Printf("suppress   %d entries loaded in %s\n", benchSuppressions, time.Since(t0).Round(time.Millisecond))
	acct := uuid.MustParse(accountID)
	lat := make([]time.Duration, 0, benchSuppressionSamples)
	hits := 0
	for i := 0; i < benchSuppressionSamples; i++ {
		n, _ := rand.Int(rand.Reader, big.NewInt(2*benchSuppressions))
		email := fmt.Sprintf("User%d@Bench.example", n.Int64()+1)
		t := time.Now()
		s, err := providers.CheckSuppression(ctx, env.Pool, acct, email)
		if err != nil {
			return err
		}
		lat = append(lat, time.Since(t))
		if s != nil {
			hits++
		}
	}
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	fmt.Printf("check      lookup alone (1 connection)           p50 %.3f ms  p99 %.3f ms  (%d samples, %d suppressed)\n",
		ms(lat[len(lat)/2]), ms(percentile(lat, 99)), len(lat), hits)
	var checkSeq atomic.Int64
	check := func(ctx context.Context, client *http.Client) error {
		n := checkSeq.Add(7919) % (2 * benchSuppressions)
		return getOK(baseURL+"/api/accounts/me/suppressions/check?email=user"+strconv.FormatInt(n+1, 10)+"%40bench.example", key)(ctx, client)
	}
	runLoad(ctx, benchProviderConns, time.Second, check)
	viaHTTP := runLoad(ctx, benchProviderConns, d, check)
	fmt.Printf("check      GET .../suppressions/check (HTTP)     %s\n", viaHTTP)
	return nil
}

// postJSON posts body with the key and decodes the answer into out.
func postJSON(ctx context.Context, url, key string, body any, want int, out any) error {
	raw, _ := json.Marshal(body)
	req, err := http.NewRequestWithContext(ctx, "POST", url, bytes.NewReader(raw))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+key)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != want {
		return fmt.Errorf("POST %s: status %d: %s", url, resp.StatusCode, b)
	}
	if out != nil {
		return json.Unmarshal(b, out)
	}
	return nil
}

// measureAuthRouteCPU is measureAuthRoute with the CPU spent per request.
func measureAuthRouteCPU(ctx context.Context, env *benchEnv, conns int, d time.Duration) (loadResult, string, error) {
	srv, err := env.startAPI(ctx, env.Pool, nil)
	if err != nil {
		return loadResult{}, "", err
	}
	defer srv.close()
	_, key, err := createAccount(ctx, srv.BaseURL, fmt.Sprintf("baseline-%d@example.com", time.Now().UnixNano()))
	if err != nil {
		return loadResult{}, "", err
	}
	url := srv.BaseURL + "/api/accounts/me"
	runLoad(ctx, conns, time.Second, getOK(url, key)) // warm up
	meter := newCPUMeter(ctx, env.Pool)
	c0 := meter.read()
	res := runLoad(ctx, conns, d, getOK(url, key))
	return res, meter.perRequest(c0, meter.read(), res.Requests), nil
}
