package main

import (
	"errors"
	"flag"
	"fmt"
	"io"

	"github.com/mailwatch/mailwatch/internal/config"
)

const budgetUsage = `usage: mailwatch config budget [--api N] [--workers N] [--smtp N] [--ui N]
                               [--db-max-conns N] [--max-connections N] [--reserved N]

Prints the most Postgres connections a fleet can hold (every process's pool,
DB_MAX_CONNS, plus the LISTEN connection of each API and worker) against the
server's max_connections, and exits 1 when it does not fit.
`

// runBudget implements `mailwatch config budget`.
func runBudget(cfg *config.Config, args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("config budget", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	f := config.Fleet{}
	fs.IntVar(&f.API, "api", 2, "API processes")
	fs.IntVar(&f.Workers, "workers", 2, "worker processes")
	fs.IntVar(&f.SMTP, "smtp", 1, "SMTP processes")
	fs.IntVar(&f.UI, "ui", 0, "River UI processes")
	fs.IntVar(&f.DBMaxConns, "db-max-conns", cfg.DBMaxConns, "DB_MAX_CONNS of every process (default: this environment's)")
	maxConns := fs.Int("max-connections", 100, "Postgres max_connections")
	reserved := fs.Int("reserved", 3, "Postgres superuser_reserved_connections")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			fmt.Fprint(stdout, budgetUsage)
			return nil
		}
		return usageError{err.Error() + "\n" + budgetUsage}
	}
	if fs.NArg() > 0 || f.API < 0 || f.Workers < 0 || f.SMTP < 0 || f.UI < 0 || f.DBMaxConns < 1 || *maxConns < 1 || *reserved < 0 {
		return usageError{"config budget: counts must be whole numbers (pools at least 1)\n" + budgetUsage}
	}
	if !config.WriteBudget(stdout, f, *maxConns, *reserved) {
		return errors.New("the fleet needs more connections than the server allows")
	}
	return nil
}
