package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"sort"
	"sync"
	"syscall"
	"time"
)

// signupBurst is the number of concurrent POST /api/accounts of the burst,
// as in issue 10's report (1.9 GiB and 7 s responses before the bound).
const signupBurst = 100

// benchSignup starts a real `mailwatch api`, fires signupBurst concurrent
// account creations at it (inside one IP's budget) and reports the
// process's peak RSS (VmHWM) and the answers: argon2id is bounded per
// process, so memory stays flat and the overflow gets 503 + Retry-After.
func benchSignup(ctx context.Context, env *benchEnv) error {
	bin, cleanup, err := buildMailwatch(ctx)
	if err != nil {
		return err
	}
	defer cleanup()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	apiAddr := ln.Addr().String()
	ln.Close()
	key := make([]byte, 32)
	_, _ = rand.Read(key)
	cmd := exec.CommandContext(ctx, bin, "api")
	cmd.Env = append(os.Environ(),
		"DATABASE_URL="+env.URL,
		"LISTEN_ADDR="+apiAddr,
		"MAILWATCH_SECRET_KEY="+base64.StdEncoding.EncodeToString(key),
		"RATE_LIMIT_PER_MINUTE=1000",
		"LOG_LEVEL=warn",
		"SHUTDOWN_TIMEOUT=5s",
	)
	// Its log (a line per refused request at error level) is kept and only
	// shown if it fails to start.
	var logs bytes.Buffer
	cmd.Stdout, cmd.Stderr = io.Discard, &logs
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("error starting mailwatch api: %w", err)
	}
	defer func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		_ = cmd.Wait()
	}()
	base := "http://" + apiAddr
	if err := waitReady(ctx, base+"/readyz"); err != nil {
		return fmt.Errorf("%w\n%s", err, logs.Bytes())
	}
	idle, err := procStatusKB(cmd.Process.Pid, "VmHWM")
	if err != nil {
		return err
	}

	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: signupBurst}}
	var (
		mu        sync.Mutex
		statuses  = map[int]int{}
		latencies []time.Duration
		wg        sync.WaitGroup
		start     = make(chan struct{})
		stamp     = time.Now().UnixNano()
	)
	for i := range signupBurst {
		wg.Add(1)
		go func() {
			defer wg.Done()
			body, _ := json.Marshal(map[string]string{
				"email": fmt.Sprintf("burst-%d-%d@example.com", stamp, i), "password": "benchmark password",
			})
			<-start
			t0 := time.Now()
			req, _ := http.NewRequestWithContext(ctx, "POST", base+"/api/accounts", bytes.NewReader(body))
			req.Header.Set("Content-Type", "application/json")
			resp, err := client.Do(req)
			status := 0
			if err == nil {
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				status = resp.StatusCode
			}
			mu.Lock()
			statuses[status]++
			latencies = append(latencies, time.Since(t0))
			mu.Unlock()
		}()
	}
	t0 := time.Now()
	close(start)
	wg.Wait()
	elapsed := time.Since(t0)
	peak, err := procStatusKB(cmd.Process.Pid, "VmHWM")
	if err != nil {
		return err
	}
	sort.Slice(latencies, func(i, j int) bool { return latencies[i] < latencies[j] })
	fmt.Printf("%d concurrent POST /api/accounts to a `mailwatch api` subprocess (pid %d) in %s\n", signupBurst, cmd.Process.Pid, elapsed.Round(time.Millisecond))
	fmt.Printf("answers: %v (0 = transport error)\n", statuses)
	fmt.Printf("latency: p50 %.0f ms, p99 %.0f ms, max %.0f ms\n",
		ms(percentile(latencies, 50)), ms(percentile(latencies, 99)), ms(latencies[len(latencies)-1]))
	fmt.Printf("peak RSS (VmHWM): %d MiB after start, %d MiB after the burst (target < 300 MiB)\n", idle/1024, peak/1024)
	if statuses[0] > 0 || statuses[http.StatusInternalServerError] > 0 {
		return fmt.Errorf("the burst got transport errors or 500s: %v", statuses)
	}
	return nil
}
