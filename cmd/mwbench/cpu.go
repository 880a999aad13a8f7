package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
)

// cpuMeter reads the CPU time spent by this process (the API server and
// the load generator) and by the Postgres cluster (the postmaster and its
// children). On a shared machine requests/s moves with the neighbours'
// load; CPU time per request moves much less, so the benches that compare
// routes print both.
type cpuMeter struct {
	postmaster int // 0 when the cluster's processes cannot be read
	ticks      float64
}

// cpuSample is a reading of a cpuMeter.
type cpuSample struct {
	self, postgres time.Duration
}

func newCPUMeter(ctx context.Context, pool *pgxpool.Pool) *cpuMeter {
	m := &cpuMeter{ticks: 100} // USER_HZ is 100 on every Linux we run on
	var dir string
	if err := pool.QueryRow(ctx, `SHOW data_directory`).Scan(&dir); err != nil {
		return m
	}
	b, err := os.ReadFile(filepath.Join(dir, "postmaster.pid"))
	if err != nil {
		return m
	}
	line, _, _ := strings.Cut(string(b), "\n")
	m.postmaster, _ = strconv.Atoi(strings.TrimSpace(line))
	return m
}

// procStat returns a process's parent pid and its own and reaped
// children's CPU ticks.
func procStat(pid string) (ppid int, own, children float64, ok bool) {
	b, err := os.ReadFile("/proc/" + pid + "/stat")
	if err != nil {
		return 0, 0, 0, false
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0, 0, 0, false
	}
	f := strings.Fields(s[i+1:]) // f[0] is field 3 (state)
	if len(f) < 15 {
		return 0, 0, 0, false
	}
	num := func(k int) float64 { v, _ := strconv.ParseFloat(f[k-3], 64); return v }
	ppid = int(num(4))
	return ppid, num(14) + num(15), num(16) + num(17), true
}

func (m *cpuMeter) read() cpuSample {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	s := cpuSample{self: time.Duration(ru.Utime.Nano() + ru.Stime.Nano())}
	if m.postmaster == 0 {
		return s
	}
	_, own, children, ok := procStat(strconv.Itoa(m.postmaster))
	if !ok {
		return s
	}
	total := own + children
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		if e.Name()[0] < '0' || e.Name()[0] > '9' {
			continue
		}
		if ppid, own, _, ok := procStat(e.Name()); ok && ppid == m.postmaster {
			total += own
		}
	}
	s.postgres = time.Duration(total / m.ticks * float64(time.Second))
	return s
}

// perRequest formats the CPU spent between a and b per request.
func (m *cpuMeter) perRequest(a, b cpuSample, requests int) string {
	if requests == 0 {
		return "no requests"
	}
	per := func(d time.Duration) float64 { return float64(d.Microseconds()) / float64(requests) }
	out := fmt.Sprintf("CPU per request: %.0f µs in this process (server + load generator)", per(b.self-a.self))
	if m.postmaster != 0 {
		out += fmt.Sprintf(" + %.0f µs Postgres = %.0f µs", per(b.postgres-a.postgres), per(b.self-a.self+b.postgres-a.postgres))
	}
	return out
}
