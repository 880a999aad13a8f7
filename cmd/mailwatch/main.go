// Command mailwatch runs every role of the service from one binary:
//
//	mailwatch api        REST API (Fiber)
//	mailwatch worker     River workers and periodic jobs
//	mailwatch smtp       inbound SMTP listener
//	mailwatch jobs       operator commands over River's client API
//	mailwatch migrate    apply River's migrations, then mailwatch's
//	mailwatch dev        every role in one process, for a laptop
//	mailwatch admin      grant or revoke admin rights
//	mailwatch config     print the configuration table or the environment's settings
//	mailwatch version    print the build's module version and VCS revision
//
// Configuration comes from the environment; see `mailwatch config table`.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/mailwatch/mailwatch/internal/config"
)

const usage = `usage: mailwatch <command> [arguments]

commands:
  api                      serve the REST API on LISTEN_ADDR
  data-api                 serve only the data API (/rest/v1, tokens, JWKS) on LISTEN_ADDR
  worker [--queues=a,b]    work River jobs (all queues unless named) and run periodic jobs
  smtp                     receive mail for receivers on SMTP_ADDR
  jobs list|retry|cancel   inspect and steer River jobs (as River UI does)
  migrate                  apply River's migrations and then mailwatch's
  dev                      migrate, then run api, worker and smtp (and River UI) in one process
  ui                       serve River UI on UI_ADDR, behind authentication
  admin grant <email>      make an account an admin
  admin revoke <email>     take admin rights away
  config [table]           print the settings this shell's environment gives (secrets redacted), or the Markdown table
  config budget [--api N --workers N --smtp N]
                           Postgres connections a fleet needs vs max_connections
  dkim keygen|sign         make a DKIM key and sign a test message with it (for receivers)
  help [command]           print this, or a command's help
  version, --version       print the module version and VCS revision of this binary

Every setting comes from the environment (DATABASE_URL, LISTEN_ADDR, ...):
'mailwatch config table' lists them all with their defaults and
'mailwatch config' prints the values this shell's environment gives. With
scripts/run running, 'source .local/env' sets what it set (the database,
the listen addresses, ...), so the CLI and 'mailwatch config' match it.

'mailwatch <command> --help' describes a command.
`

func main() {
	os.Exit(exitCode(os.Args[1:], run(os.Args[1:], os.Stdout, os.Stderr), os.Stderr))
}

// exitCode reports err on stderr and returns the process's exit status: a
// usage error is one line and where to read the help (status 2), not the
// help itself.
func exitCode(args []string, err error, stderr io.Writer) int {
	if err == nil {
		return 0
	}
	var ue usageError
	if !errors.As(err, &ue) {
		fmt.Fprintln(stderr, "mailwatch:", err)
		return 1
	}
	line, _, _ := strings.Cut(ue.msg, "\n")
	fmt.Fprintln(stderr, "mailwatch:", line)
	help := "mailwatch help"
	if len(args) > 0 {
		if _, ok := commandHelp[args[0]]; ok {
			help = "mailwatch " + args[0] + " --help"
		}
	}
	fmt.Fprintf(stderr, "Run '%s' for usage.\n", help)
	return 2
}

type usageError struct{ msg string }

func (e usageError) Error() string { return e.msg }

func run(args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		return usageError{"no command given"}
	}
	if args[0] == "version" || args[0] == "--version" || args[0] == "-version" {
		if len(args) > 1 {
			return usageError{"version takes no arguments"}
		}
		printVersion(stdout) // version.go
		return nil
	}
	if words, ok := helpRequest(args); ok {
		printHelp(stdout, words) // help.go
		return nil
	}
	cfg, err := config.FromEnv()
	if err != nil {
		return fmt.Errorf("invalid configuration:\n%w", err)
	}
	logger := newLogger(cfg, stderr)
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()

	switch args[0] {
	case "api":
		return runAPI(ctx, cfg, logger)
	case "data-api":
		return runDataAPI(ctx, cfg, logger) // roles.go
	case "worker":
		return runWorker(ctx, cfg, logger, args[1:])
	case "smtp":
		return runSMTP(ctx, cfg, logger) // smtp.go
	case "jobs":
		return runJobs(ctx, cfg, logger, args[1:], stdout) // jobscli.go
	case "migrate":
		return runMigrate(ctx, cfg, logger, stdout)
	case "dev":
		return runDev(ctx, cfg, logger, stderr)
	case "ui":
		return runUI(ctx, cfg, logger) // ui.go
	case "admin":
		return runAdmin(ctx, cfg, args[1:], stdout)
	case "dkim":
		return runDKIM(ctx, args[1:], os.Stdin, stdout) // dkim.go
	case "config":
		if len(args) > 1 && args[1] == "budget" {
			return runBudget(cfg, args[2:], stdout) // budget.go
		}
		return runConfig(args[1:], stdout)
	}
	return usageError{fmt.Sprintf("unknown command %q", args[0])}
}

func runConfig(args []string, stdout io.Writer) error {
	switch {
	case len(args) == 0:
		for _, v := range config.Vars {
			fmt.Fprintf(stdout, "%s=%s\n", v.Name, config.Redacted(os.LookupEnv)[v.Name])
		}
		return nil
	case len(args) == 1 && args[0] == "table":
		fmt.Fprint(stdout, config.MarkdownTable())
		return nil
	}
	return usageError{fmt.Sprintf("config: unknown argument %q (usage: mailwatch config [table|budget])", strings.Join(args, " "))}
}

func newLogger(cfg *config.Config, w io.Writer) *slog.Logger {
	opts := &slog.HandlerOptions{Level: cfg.LogLevel}
	if cfg.LogFormat == "text" {
		return slog.New(slog.NewTextHandler(w, opts))
	}
	return slog.New(slog.NewJSONHandler(w, opts))
}
