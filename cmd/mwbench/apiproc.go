package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"syscall"
)

// apiProcess is a `mailwatch api` subprocess on a loopback port, for the
// benchmarks that measure a whole process (its peak RSS).
type apiProcess struct {
	Base string // http://127.0.0.1:port
	Pid  int
	stop func()
}

// Stop ends the process (SIGTERM) and waits for it.
func (p *apiProcess) Stop() { p.stop() }

// startAPI starts bin as `mailwatch api` against the bench database with a
// fresh secret key and the given extra environment, and waits until it is
// ready. Its log is kept and shown only when it fails to start.
func startAPI(ctx context.Context, bin string, env *benchEnv, extra ...string) (*apiProcess, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	apiAddr := ln.Addr().String()
	ln.Close()
	key := make([]byte, 32)
	_, _ = rand.Read(key)
	cmd := exec.CommandContext(ctx, bin, "api")
	cmd.Env = append(append(os.Environ(),
		"DATABASE_URL="+env.URL,
		"LISTEN_ADDR="+apiAddr,
		"MAILWATCH_SECRET_KEY="+base64.StdEncoding.EncodeToString(key),
		"SHUTDOWN_TIMEOUT=5s",
	), extra...)
	var logs bytes.Buffer
	cmd.Stdout, cmd.Stderr = io.Discard, &logs
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("error starting mailwatch api: %w", err)
	}
	stop := func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		_ = cmd.Wait()
	}
	base := "http://" + apiAddr
	if err := waitReady(ctx, base+"/readyz"); err != nil {
		stop()
		return nil, fmt.Errorf("%w\n%s", err, logs.Bytes())
	}
	return &apiProcess{Base: base, Pid: cmd.Process.Pid, stop: stop}, nil
}
