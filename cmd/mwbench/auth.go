package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"time"

	"github.com/gofiber/fiber/v2"
	"github.com/jackc/pgx/v5/pgxpool"
)

// createAccount makes an account through the API and returns its id and key.
func createAccount(ctx context.Context, baseURL, email string) (id, key string, err error) {
	body, _ := json.Marshal(map[string]string{"email": email, "password": "benchmark password"})
	req, _ := http.NewRequestWithContext(ctx, "POST", baseURL+"/api/accounts", bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return "", "", err
	}
	defer resp.Body.Close()
	var out struct {
		Account struct {
			ID string `json:"id"`
		} `json:"account"`
		APIKey struct {
			Key string `json:"key"`
		} `json:"api_key"`
	}
	if resp.StatusCode != http.StatusCreated {
		return "", "", fmt.Errorf("creating account: status %d", resp.StatusCode)
	}
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
		return "", "", err
	}
	return out.Account.ID, out.APIKey.Key, nil
}

// startBaseline serves a bare Fiber handler that does one primary-key
// query on the same database: the ceiling an authenticated route is
// compared with.
func startBaseline(pool *pgxpool.Pool) (string, func(), error) {
	app := fiber.New(fiber.Config{DisableStartupMessage: true})
	app.Get("/baseline/:id", func(c *fiber.Ctx) error {
		var email string
		if err := pool.QueryRow(c.UserContext(), "SELECT email FROM accounts WHERE id = $1", c.Params("id")).Scan(&email); err != nil {
			return c.SendStatus(500)
		}
		return c.JSON(fiber.Map{"email": email})
	})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", nil, err
	}
	go func() { _ = app.Listener(ln) }()
	return "http://" + ln.Addr().String(), func() { _ = app.Shutdown() }, nil
}

// measureAuthRoute measures the foundation's authenticated baseline route
// (GET /api/accounts/me) so other benchmarks can print it beside their own
// figures from the same run.
func measureAuthRoute(ctx context.Context, env *benchEnv, conns int, d time.Duration) (loadResult, error) {
	srv, err := env.startAPI(ctx, env.Pool, nil)
	if err != nil {
		return loadResult{}, err
	}
	defer srv.close()
	_, key, err := createAccount(ctx, srv.BaseURL, fmt.Sprintf("baseline-%d@example.com", time.Now().UnixNano()))
	if err != nil {
		return loadResult{}, err
	}
	url := srv.BaseURL + "/api/accounts/me"
	runLoad(ctx, conns, time.Second, getOK(url, key)) // warm up
	return runLoad(ctx, conns, d, getOK(url, key)), nil
}

func benchAuth(ctx context.Context, env *benchEnv) error {
	const conns = 64
	d := benchDuration()
	srv, err := env.startAPI(ctx, env.Pool, nil)
	if err != nil {
		return err
	}
	defer srv.close()
	id, key, err := createAccount(ctx, srv.BaseURL, "bench-auth@example.com")
	if err != nil {
		return err
	}
	base, stop, err := startBaseline(env.Pool)
	if err != nil {
		return err
	}
	defer stop()

	authURL := srv.BaseURL + "/api/accounts/me"
	baseURL := base + "/baseline/" + id
	runLoad(ctx, conns, time.Second, getOK(authURL, key)) // warm up both
	runLoad(ctx, conns, time.Second, getOK(baseURL, ""))

	fmt.Printf("%d connections, %s per run, GOMAXPROCS-default, same database and pool size\n", conns, d)
	baseline := runLoad(ctx, conns, d, getOK(baseURL, ""))
	fmt.Printf("baseline   bare Fiber + 1 PK query       %s\n", baseline)
	authed := runLoad(ctx, conns, d, getOK(authURL, key))
	fmt.Printf("api        GET /api/accounts/me (auth)   %s\n", authed)
	fmt.Printf("ratio      api / baseline                %.2f  (target >= 0.70)\n", authed.RPS()/baseline.RPS())
	return nil
}
