// Package logthrottle is a slog.Handler that lets through one warning or
// error per message per interval and counts the rest, so that a library
// retrying against a lost database (River's fetch loops try every 200 ms
// per queue) logs the outage, not thousands of identical lines.
package logthrottle

import (
	"context"
	"log/slog"
	"sync"
	"time"
)

// maxKeys bounds the messages remembered; beyond it the memory is reset
// (messages are constant strings, so this is never reached in practice).
const maxKeys = 1024

// Handler throttles records at Warn and above by message; lower levels
// pass unchanged.
type Handler struct {
	next  slog.Handler
	every time.Duration
	state *state
}

type state struct {
	mu   sync.Mutex
	now  func() time.Time
	seen map[string]*entry
}

type entry struct {
	last       time.Time
	suppressed int
}

// New wraps next: a warning or error whose message was logged less than
// every ago is dropped and counted; the next one let through carries
// "suppressed": the count.
func New(next slog.Handler, every time.Duration) *Handler {
	return &Handler{next: next, every: every, state: &state{now: time.Now, seen: map[string]*entry{}}}
}

// Logger returns a logger throttled as New describes, or nil for nil.
func Logger(l *slog.Logger, every time.Duration) *slog.Logger {
	if l == nil {
		return nil
	}
	return slog.New(New(l.Handler(), every))
}

func (h *Handler) Enabled(ctx context.Context, level slog.Level) bool {
	return h.next.Enabled(ctx, level)
}

func (h *Handler) Handle(ctx context.Context, r slog.Record) error {
	if r.Level < slog.LevelWarn {
		return h.next.Handle(ctx, r)
	}
	s := h.state
	s.mu.Lock()
	now := s.now()
	e := s.seen[r.Message]
	if e != nil && now.Sub(e.last) < h.every {
		e.suppressed++
		s.mu.Unlock()
		return nil
	}
	suppressed := 0
	if e != nil {
		suppressed = e.suppressed
	}
	if len(s.seen) >= maxKeys {
		s.seen = map[string]*entry{}
	}
	s.seen[r.Message] = &entry{last: now}
	s.mu.Unlock()
	if suppressed > 0 {
		r = r.Clone()
		r.AddAttrs(slog.Int("suppressed", suppressed))
	}
	return h.next.Handle(ctx, r)
}

func (h *Handler) WithAttrs(attrs []slog.Attr) slog.Handler {
	return &Handler{next: h.next.WithAttrs(attrs), every: h.every, state: h.state}
}

func (h *Handler) WithGroup(name string) slog.Handler {
	return &Handler{next: h.next.WithGroup(name), every: h.every, state: h.state}
}
