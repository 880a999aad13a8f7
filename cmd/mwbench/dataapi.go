package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/mailwatch/mailwatch/api"
	"github.com/mailwatch/mailwatch/internal/dataapi"
)

// benchDataAPI compares the row-level-secured data API with the REST event
// listing on the same rows, in the same run: GET /rest/v1/events (a JWT,
// SET ROLE, claims, RLS) against GET /api/accounts/me/events (an API key).
func benchDataAPI(ctx context.Context, env *benchEnv) error {
	const (
		conns    = 32
		accounts = 200
		perAcct  = 500
	)
	d := benchDuration()
	srv, err := env.startAPI(ctx, env.Pool, func(deps *api.Deps) {
		// The API role's default, as for the REST listing's EventPages.
		deps.DataAPI.Pages = dataapi.NewPages(time.Second, 32<<20)
	})
	if err != nil {
		return err
	}
	defer srv.close()
	id, key, err := createAccount(ctx, srv.BaseURL, fmt.Sprintf("bench-dataapi-%d@example.com", time.Now().UnixNano()))
	if err != nil {
		return err
	}
	ids := []uuid.UUID{uuid.MustParse(id)}
	var acctRows [][]any
	for i := 1; i < accounts; i++ {
		other := uuid.Must(uuid.NewV7())
		ids = append(ids, other)
		acctRows = append(acctRows, []any{other, fmt.Sprintf("bench-dataapi-%d-%s@example.com", i, other), "not-a-hash"})
	}
	if _, err := env.Pool.CopyFrom(ctx, pgx.Identifier{"accounts"}, []string{"id", "email", "password_hash"}, pgx.CopyFromRows(acctRows)); err != nil {
		return fmt.Errorf("error seeding accounts: %w", err)
	}
	now := time.Now().UTC()
	var rows [][]any
	for _, a := range ids {
		for j := range perAcct {
			at := now.Add(-time.Duration(j) * time.Minute)
			rows = append(rows, []any{uuidV7At(at), a, "bounce_spike", "info", []byte(`{"rate":0.07}`), `{}`, at})
		}
	}
	if _, err := env.Pool.CopyFrom(ctx, pgx.Identifier{"events"},
		[]string{"id", "account_id", "event_type", "severity", "payload", "rendered", "created_at"}, pgx.CopyFromRows(rows)); err != nil {
		return fmt.Errorf("error seeding events: %w", err)
	}
	if _, err := env.Pool.Exec(ctx, "ANALYZE events"); err != nil {
		return err
	}
	token, err := issueToken(ctx, srv.BaseURL, key)
	if err != nil {
		return err
	}
	restURL := srv.BaseURL + "/api/accounts/me/events?limit=50"
	dataURL := srv.BaseURL + "/rest/v1/events?limit=50&order=created_at.desc"
	runLoad(ctx, conns, time.Second, getOK(restURL, key)) // warm up both
	runLoad(ctx, conns, time.Second, getOK(dataURL, token))
	rest := runLoad(ctx, conns, d, getOK(restURL, key))
	data := runLoad(ctx, conns, d, getOK(dataURL, token))
	fmt.Printf("%d events over %d accounts; %d connections, %s per run\n", len(rows), accounts, conns, d)
	fmt.Printf("rest      GET /api/accounts/me/events?limit=50                 %s\n", rest)
	fmt.Printf("data api  GET /rest/v1/events?limit=50&order=created_at.desc   %s\n", data)
	fmt.Printf("ratio     data api / rest: p50 %.2fx  p99 %.2fx  req/s %.2f  (target: within 1.5x)\n",
		float64(data.P50)/float64(max(rest.P50, 1)), float64(data.P99)/float64(max(rest.P99, 1)), data.RPS()/rest.RPS())
	return nil
}

func issueToken(ctx context.Context, baseURL, key string) (string, error) {
	req, _ := http.NewRequestWithContext(ctx, "POST", baseURL+"/api/auth/token", nil)
	req.Header.Set("Authorization", "Bearer "+key)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("issuing token: status %d", resp.StatusCode)
	}
	var out struct {
		AccessToken string `json:"access_token"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
		return "", err
	}
	return out.AccessToken, nil
}
