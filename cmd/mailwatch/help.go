package main

import (
	"fmt"
	"io"
	"strings"
)

// commandHelp is the help of each command and subcommand, keyed by its
// words ("jobs list"). `mailwatch <words> -h|--help` and
// `mailwatch help <words>` print it on stdout and exit 0. A command without
// an entry gets the general usage.
var commandHelp = map[string]string{
	"api": `usage: mailwatch api

Serves the REST API on LISTEN_ADDR, with /healthz, /readyz and /metrics.
Needs DATABASE_URL; run 'mailwatch migrate' once per deploy first.
`,
	"data-api": `usage: mailwatch data-api

Serves only the row-level-secured data API (/rest/v1), token issuance
(POST /api/auth/token) and the JWKS on LISTEN_ADDR, with /healthz, /readyz and
/metrics. Needs DATABASE_URL and MAILWATCH_SECRET_KEY.
`,
	"ui": `usage: mailwatch ui

Serves River UI for DATABASE_URL's jobs on UI_ADDR, behind authentication:
an admin account's API key (Bearer, or as the basic-auth password) or
UI_BASIC_AUTH_USER/UI_BASIC_AUTH_PASSWORD. Refuses to start when nobody
could log in.
`,
	"config budget": budgetUsage, // budget.go
	"worker": `usage: mailwatch worker [--queues=a,b]

Works River jobs and runs the periodic jobs; serves /healthz, /readyz and
/metrics on METRICS_ADDR. --queues limits it to the named queues (for
example --queues=webhooks for a push-only fleet sized by WEBHOOK_CONCURRENCY).
`,
	"smtp": `usage: mailwatch smtp

Receives mail for receivers on SMTP_ADDR (domain INBOUND_DOMAIN); STARTTLS
with SMTP_TLS_CERT and SMTP_TLS_KEY. Serves /healthz, /readyz and /metrics on
METRICS_ADDR.
`,
	"jobs": `usage: mailwatch jobs list|retry|cancel|rebuild-message-rollups [arguments]

` + jobsUsage + `

Operator commands over River's client API, the same calls River UI makes.
Rows that follow jobs (webhook deliveries) converge whoever steers the job.
`,
	"jobs list": `usage: mailwatch jobs list [--state=a,b] [--kind=a,b] [--queue=a,b] [--limit=N]

Lists River jobs, newest first (50 unless --limit, at most 10000).
States: available, cancelled, completed, discarded, pending, retryable,
running, scheduled. Kinds are River job kinds, such as webhook_delivery.
`,
	"jobs retry": `usage: mailwatch jobs retry <job id>

Makes a job available to run now (as River UI's retry does).
`,
	"jobs cancel": `usage: mailwatch jobs cancel <job id>

Cancels a job; a running job's worker is told to stop.
`,
	"jobs rebuild-message-rollups": `usage: mailwatch jobs rebuild-message-rollups [--account=<account id>]

Queues the maintenance job (message_rollup_rebuild) that recounts the
hourly message-event rollups from the raw events: one account's, or every
account's without --account, a UTC day per transaction; only wrong rows
are written. The worker logs what it corrected.
`,
	"dkim": `usage: mailwatch dkim keygen|sign [arguments]

` + dkimUsage + `

Test mail for receivers, without a mail server: keygen writes a new 2048-bit
RSA key (never over an existing file) and prints the TXT record that
publishes it; sign prepends a DKIM-Signature (relaxed/relaxed, SHA-256,
covering From, To, Subject, Date, Message-ID, the one-click unsubscribe
headers and the MIME fields) to the message on stdin. Bare LF line ends
become CRLF.
`,
	"migrate": `usage: mailwatch migrate

Applies River's migrations, then mailwatch's. Run it once per deploy,
never at every replica's start. Needs DATABASE_URL.
`,
	"dev": `usage: mailwatch dev

Migrates, then runs the API, a worker and the SMTP listener in one process:
for a laptop, not for production. Generates a throwaway MAILWATCH_SECRET_KEY
when none is set. scripts/run starts it with local defaults.
`,
	"admin": `usage: mailwatch admin grant|revoke <email>

Grants or takes away admin rights (the /api/admin routes); effective
within 5 s. Needs DATABASE_URL.
`,
	"admin grant": `usage: mailwatch admin grant <email>

Makes the account with this email an admin (effective within 5 s).
`,
	"admin revoke": `usage: mailwatch admin revoke <email>

Takes the account's admin rights away (effective within 5 s).
`,
	"config": `usage: mailwatch config [table]

Without an argument, prints the value every setting takes in this shell's
environment (its default where unset), secrets redacted: what a mailwatch
process started from this shell would use. A running instance's settings
are in its environment, not read from it: for the one scripts/run runs,
'source .local/env' first (scripts/run writes every setting it passes). 'table' prints the Markdown table of every
setting with its default and meaning (the table in docs/configuration.md).
`,
	"config table": `usage: mailwatch config table

Prints the Markdown table of every setting with its default and meaning.
`,
}

// isHelpFlag reports whether a is a request for help.
func isHelpFlag(a string) bool { return a == "-h" || a == "--help" || a == "-help" }

// helpRequest returns the words naming the command whose help args ask
// for, and whether they ask for help at all: "mailwatch --help",
// "mailwatch help jobs list", "mailwatch jobs list -h".
func helpRequest(args []string) ([]string, bool) {
	if len(args) == 0 {
		return nil, false
	}
	if args[0] == "help" || isHelpFlag(args[0]) {
		var words []string
		for _, a := range args[1:] {
			if !isHelpFlag(a) {
				words = append(words, a)
			}
		}
		return words, true
	}
	for i, a := range args {
		if a == "--" {
			return nil, false
		}
		if isHelpFlag(a) {
			return args[:i], true
		}
	}
	return nil, false
}

// printHelp prints the most specific help for words: "jobs list" if it has
// one, else "jobs", else the general usage.
func printHelp(w io.Writer, words []string) {
	for n := min(len(words), 2); n > 0; n-- {
		if text, ok := commandHelp[strings.Join(words[:n], " ")]; ok {
			fmt.Fprint(w, text)
			return
		}
	}
	fmt.Fprint(w, usage)
}
