package receivers

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
)

// NotifyChannel is the Postgres channel the schema's triggers notify with a
// receiver id when the receiver gets a message or is deleted.
const NotifyChannel = "mailwatch_receivers"

// Reconnect backoff of the LISTEN connection, and how often an idle one is
// pinged to notice a silently dead socket.
const (
	minBackoff   = 100 * time.Millisecond
	maxBackoff   = 5 * time.Second
	pingInterval = 30 * time.Second
	pingTimeout  = 5 * time.Second
)

// ErrHubClosed is returned by Register once the hub has stopped (the
// process is shutting down).
var ErrHubClosed = errors.New("waiter hub is closed")

// Connector opens the hub's dedicated LISTEN connection.
type Connector func(ctx context.Context) (*pgx.Conn, error)

// ConnectURL returns a Connector for a database URL. The connection's
// application_name gets a "-listener" suffix so that it can be told apart
// from pool connections in pg_stat_activity.
func ConnectURL(url string) Connector {
	return func(ctx context.Context) (*pgx.Conn, error) {
		cfg, err := pgx.ParseConfig(url)
		if err != nil {
			return nil, fmt.Errorf("error parsing database URL: %w", err)
		}
		name := cfg.RuntimeParams["application_name"]
		if name == "" {
			name = "mailwatch"
		}
		cfg.RuntimeParams["application_name"] = name + "-listener"
		return pgx.ConnectConfig(ctx, cfg)
	}
}

// Waiter is one registered long-poll. C receives a value whenever one of
// its receivers may have changed (a message arrived, it was deleted, or the hub
// reconnected and everyone must re-check); wake-ups coalesce.
type Waiter struct {
	C   <-chan struct{}
	c   chan struct{}
	ids []uuid.UUID
	hub *Hub
	// gone is set once the waiter is unregistered (under the hub's lock).
	gone bool
}

// Close unregisters the waiter. It is safe to call more than once.
func (w *Waiter) Close() { w.hub.unregister(w) }

// Hub is the in-memory registry of waiters, keyed by receiver id, fed by one
// LISTEN connection. The zero value is not usable; use NewHub.
type Hub struct {
	connect Connector
	logger  *slog.Logger

	mu      sync.Mutex
	waiters map[uuid.UUID]map[*Waiter]struct{}
	count   int
	closed  bool

	done      chan struct{}
	ready     chan struct{}
	readyOnce sync.Once
}

// NewHub returns a hub that listens through connect once Run is called.
// With a nil connect the hub has no listener: it is woken only in-process
// (Wake), which suits tests on a single transaction and nothing else.
func NewHub(connect Connector, logger *slog.Logger) *Hub {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	return &Hub{
		connect: connect,
		logger:  logger.With("component", "receiver_waiters"),
		waiters: map[uuid.UUID]map[*Waiter]struct{}{},
		done:    make(chan struct{}),
		ready:   make(chan struct{}),
	}
}

// Listening reports whether the hub is fed by a LISTEN connection.
func (h *Hub) Listening() bool { return h.connect != nil }

// Done is closed when the hub stops; waiters should then answer at once.
func (h *Hub) Done() <-chan struct{} { return h.done }

// Ready is closed once the first LISTEN is established.
func (h *Hub) Ready() <-chan struct{} { return h.ready }

// Len returns the number of registered waiters.
func (h *Hub) Len() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.count
}

// Register adds one waiter for one or more receivers (a label-wide wait
// watches several); it counts once in Len. Register before checking the
// database, so that an arrival between the check and the wait still wakes
// the waiter.
func (h *Hub) Register(receiverIDs ...uuid.UUID) (*Waiter, error) {
	c := make(chan struct{}, 1)
	w := &Waiter{C: c, c: c, ids: receiverIDs, hub: h}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed {
		return nil, ErrHubClosed
	}
	for _, id := range receiverIDs {
		set := h.waiters[id]
		if set == nil {
			set = map[*Waiter]struct{}{}
			h.waiters[id] = set
		}
		set[w] = struct{}{}
	}
	h.count++
	return w, nil
}

func (h *Hub) unregister(w *Waiter) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if w.gone {
		return
	}
	w.gone = true
	for _, id := range w.ids {
		set := h.waiters[id]
		delete(set, w)
		if len(set) == 0 {
			delete(h.waiters, id)
		}
	}
	h.count--
}

// Wake wakes the waiters of the given receivers in this process.
func (h *Hub) Wake(receiverIDs ...uuid.UUID) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, id := range receiverIDs {
		for w := range h.waiters[id] {
			signal(w.c)
		}
	}
}

// WakeLocal is Wake for hubs without a listener; a listening hub is woken
// by the database and ignores it, so that a delivery made in this process
// does not wake its waiters twice.
func (h *Hub) WakeLocal(receiverIDs ...uuid.UUID) {
	if !h.Listening() {
		h.Wake(receiverIDs...)
	}
}

func (h *Hub) wakeAll() {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, set := range h.waiters {
		for w := range set {
			signal(w.c) // a waiter of several receivers: coalesced
		}
	}
}

func signal(c chan struct{}) {
	select {
	case c <- struct{}{}:
	default: // a wake-up is already pending
	}
}

// Close stops the hub: Register fails from now on and Done is closed, which
// ends every wait.
func (h *Hub) Close() {
	h.mu.Lock()
	defer h.mu.Unlock()
	if !h.closed {
		h.closed = true
		close(h.done)
	}
}

// Run listens until ctx ends, then closes the hub. A lost connection is
// reopened with backoff; after every (re)connection all waiters are woken to
// re-check, since notifications sent while nobody listened are lost.
func (h *Hub) Run(ctx context.Context) error {
	defer h.Close()
	if h.connect == nil {
		<-ctx.Done()
		return nil
	}
	backoff := minBackoff
	for ctx.Err() == nil {
		started := time.Now()
		err := h.listen(ctx)
		if ctx.Err() != nil {
			return nil
		}
		if time.Since(started) > time.Minute {
			backoff = minBackoff
		}
		h.logger.WarnContext(ctx, "receiver LISTEN connection lost; reconnecting",
			slog.Any("error", err), slog.Duration("backoff", backoff))
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(backoff):
		}
		backoff = min(backoff*2, maxBackoff)
	}
	return nil
}

func (h *Hub) listen(ctx context.Context) error {
	conn, err := h.connect(ctx)
	if err != nil {
		return err
	}
	defer func() {
		closeCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Second)
		defer cancel()
		_ = conn.Close(closeCtx)
	}()
	if _, err := conn.Exec(ctx, "LISTEN "+NotifyChannel); err != nil {
		return fmt.Errorf("error listening on %s: %w", NotifyChannel, err)
	}
	h.readyOnce.Do(func() { close(h.ready) })
	h.wakeAll()
	h.logger.DebugContext(ctx, "listening for receiver notifications")
	for {
		waitCtx, cancel := context.WithTimeout(ctx, pingInterval)
		n, err := conn.WaitForNotification(waitCtx)
		cancel()
		switch {
		case err == nil:
			id, perr := uuid.Parse(n.Payload)
			if perr != nil {
				h.logger.WarnContext(ctx, "ignoring malformed receiver notification", slog.String("payload", n.Payload))
				continue
			}
			h.Wake(id)
		case ctx.Err() != nil:
			return ctx.Err()
		case errors.Is(err, context.DeadlineExceeded) && !conn.IsClosed():
			pingCtx, cancel := context.WithTimeout(ctx, pingTimeout)
			err := conn.Ping(pingCtx)
			cancel()
			if err != nil {
				return fmt.Errorf("error pinging LISTEN connection: %w", err)
			}
		default:
			return err
		}
	}
}
