package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"sort"
	"sync"
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
	api, err := startAPI(ctx, bin, env, "RATE_LIMIT_PER_MINUTE=1000", "LOG_LEVEL=warn")
	if err != nil {
		return err
	}
	defer api.Stop()
	base := api.Base
	idle, err := procStatusKB(api.Pid, "VmHWM")
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
	peak, err := procStatusKB(api.Pid, "VmHWM")
	if err != nil {
		return err
	}
	sort.Slice(latencies, func(i, j int) bool { return latencies[i] < latencies[j] })
	fmt.Printf("%d concurrent POST /api/accounts to a `mailwatch api` subprocess (pid %d) in %s\n", signupBurst, api.Pid, elapsed.Round(time.Millisecond))
	fmt.Printf("answers: %v (0 = transport error)\n", statuses)
	fmt.Printf("latency: p50 %.0f ms, p99 %.0f ms, max %.0f ms\n",
		ms(percentile(latencies, 50)), ms(percentile(latencies, 99)), ms(latencies[len(latencies)-1]))
	fmt.Printf("peak RSS (VmHWM): %d MiB after start, %d MiB after the burst (target < 300 MiB)\n", idle/1024, peak/1024)
	if statuses[0] > 0 || statuses[http.StatusInternalServerError] > 0 {
		return fmt.Errorf("the burst got transport errors or 500s: %v", statuses)
	}
	return nil
}
