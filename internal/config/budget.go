package config

import (
	"fmt"
	"io"
	"strings"
)

// Fleet is a deployment's shape: how many processes of each role share one
// Postgres, and each process's pool size (DB_MAX_CONNS).
type Fleet struct {
	API, Workers, SMTP, UI int
	// DBMaxConns is every process's DB_MAX_CONNS.
	DBMaxConns int
}

// RoleBudget is the most connections one role's processes can hold.
type RoleBudget struct {
	Role       string
	Processes  int
	PerProcess int
	// Why explains PerProcess.
	Why string
}

// Total is the role's connections over all its processes.
func (r RoleBudget) Total() int { return r.Processes * r.PerProcess }

// Roles returns the connection budget of each role, by the rule docs/configuration.md's
// "Deploying" section states:
//
//   - api: its pool, plus one LISTEN connection of its own for long-poll
//     waits (opened apart from the pool);
//   - worker: its pool, plus River's notifier LISTEN connection, which River
//     takes from the pool and detaches (so the pool may open another);
//   - smtp and ui: their pool (the SMTP listener notifies inside its
//     transactions and listens to nothing).
//
// The one-off `migrate` runs before the others start and is not counted.
func (f Fleet) Roles() []RoleBudget {
	return []RoleBudget{
		{Role: "api", Processes: f.API, PerProcess: f.DBMaxConns + 1, Why: "pool + 1 LISTEN (waits)"},
		{Role: "worker", Processes: f.Workers, PerProcess: f.DBMaxConns + 1, Why: "pool + 1 River notifier LISTEN"},
		{Role: "smtp", Processes: f.SMTP, PerProcess: f.DBMaxConns, Why: "pool"},
		{Role: "ui", Processes: f.UI, PerProcess: f.DBMaxConns, Why: "pool"},
	}
}

// Connections is the most connections the fleet can hold at once.
func (f Fleet) Connections() int {
	n := 0
	for _, r := range f.Roles() {
		n += r.Total()
	}
	return n
}

// MaxPoolFor is the largest DB_MAX_CONNS (at least 2, the smallest pool
// accepted) with which the fleet fits in available connections, or 0 if
// none does.
func (f Fleet) MaxPoolFor(available int) int {
	best := 0
	for c := 2; c <= 1000; c++ {
		g := f
		g.DBMaxConns = c
		if g.Connections() > available {
			break
		}
		best = c
	}
	return best
}

// WriteBudget prints the fleet's budget against a server's max_connections
// (less superuser_reserved_connections, which ordinary roles cannot use)
// and reports whether it fits.
func WriteBudget(w io.Writer, f Fleet, maxConnections, reserved int) (fits bool) {
	available := maxConnections - reserved
	fmt.Fprintf(w, "%-8s %9s %14s  %s\n", "role", "processes", "connections", "per process")
	for _, r := range f.Roles() {
		fmt.Fprintf(w, "%-8s %9d %14d  %d = %s\n", r.Role, r.Processes, r.Total(), r.PerProcess, r.Why)
	}
	total := f.Connections()
	fmt.Fprintf(w, "%s\n%-8s %9s %14d  at DB_MAX_CONNS=%d\n", strings.Repeat("-", 50), "total", "", total, f.DBMaxConns)
	fmt.Fprintf(w, "available: max_connections=%d - superuser_reserved_connections=%d = %d\n", maxConnections, reserved, available)
	if total <= available {
		fmt.Fprintf(w, "fits, with %d to spare (psql, migrate, River UI sessions, backups)\n", available-total)
		return true
	}
	fmt.Fprintf(w, "does NOT fit: %d over.", total-available)
	if c := f.MaxPoolFor(available); c > 0 {
		fmt.Fprintf(w, " Set DB_MAX_CONNS=%d or lower, or raise max_connections to at least %d.\n", c, total+reserved)
	} else {
		fmt.Fprintf(w, " Too many processes for this server even at the smallest pool; raise max_connections to at least %d.\n", total+reserved)
	}
	return false
}
