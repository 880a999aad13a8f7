package logthrottle

import (
	"context"
	"log/slog"
	"strings"
)

// Demoter is a slog.Handler that logs the Info records whose message ends
// with one of its suffixes at Debug instead: a library's routine periodic
// line (River's producer writes its job counts every 30 s at Info) belongs
// with the detail an operator asks for, not in every log.
type Demoter struct {
	next     slog.Handler
	suffixes []string
}

// Demote wraps next as Demoter describes.
func Demote(next slog.Handler, suffixes ...string) *Demoter {
	return &Demoter{next: next, suffixes: suffixes}
}

// RiverRoutine are the suffixes of River's periodic Info messages.
var RiverRoutine = []string{": Producer job counts"}

func (h *Demoter) Enabled(ctx context.Context, level slog.Level) bool {
	return h.next.Enabled(ctx, level)
}

func (h *Demoter) Handle(ctx context.Context, r slog.Record) error {
	if r.Level == slog.LevelInfo {
		for _, s := range h.suffixes {
			if strings.HasSuffix(r.Message, s) {
				if !h.next.Enabled(ctx, slog.LevelDebug) {
					return nil
				}
				r = r.Clone()
				r.Level = slog.LevelDebug
				break
			}
		}
	}
	return h.next.Handle(ctx, r)
}

func (h *Demoter) WithAttrs(attrs []slog.Attr) slog.Handler {
	return &Demoter{next: h.next.WithAttrs(attrs), suffixes: h.suffixes}
}

func (h *Demoter) WithGroup(name string) slog.Handler {
	return &Demoter{next: h.next.WithGroup(name), suffixes: h.suffixes}
}
