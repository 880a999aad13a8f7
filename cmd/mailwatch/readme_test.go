package main

// The documentation runs as pasted. TestDocsRunAsPasted enforces it with
// these rules (repeated in a comment at the top of the README's
// walk-through and in docs/README.md's "Run order"):
//
//   - Every block fenced exactly ```sh runs, in README.md and in every
//     docs/**/*.md. A block that must not run (scripts/run itself, which
//     does not return; sample output) is fenced ```console or ```text
//     instead.
//   - The README's blocks run first, then those of each file docs/README.md
//     lists under "## Run order", in that order; within a file, in file
//     order. A docs file with ```sh blocks missing from the list fails the
//     test, and so does a listed file that does not exist.
//   - They all run in ONE bash with `set -euo pipefail`, so a block may use
//     what an earlier one set (KEY, EVENT_ID, ...), an unset variable fails,
//     and so does a failing command: use `curl -fsS` where an error status
//     means the example is broken.
//   - The shell starts in a directory holding .local/env exactly as
//     scripts/run writes it (lib.sh's write_local_env): BASE, SMTP_URL, UI,
//     every setting the server was given (DATABASE_URL, ...) and the
//     freshly built mailwatch first on PATH. Its environment carries none
//     of mailwatch's settings otherwise.
//   - The server is a real `mailwatch dev` started the way scripts/run
//     starts it (lib.sh's dev_env: loopback listeners, loopback webhook
//     destinations allowed), on free loopback ports, with a fresh database
//     (dbtest.NewDB) and DNS_RESOLVER pointing at a loopback DNS server
//     (dnstest) that serves docsZone, so the domain examples get real
//     answers without the internet. A feature whose example needs another
//     setting adds it to docsSettings.

import (
	"bufio"
	"bytes"
	"context"
	"encoding/base64"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/mailwatch/mailwatch/internal/config"
	"github.com/mailwatch/mailwatch/internal/dbtest"
	"github.com/mailwatch/mailwatch/internal/dnstest"
)

// docsZone is what the loopback DNS server answers for the
// documentation's domain examples (example.com as it is published today, roughly).
const docsZone = `
example.com.        300 IN TXT "v=spf1 -all"
example.com.        300 IN MX  0 .
example.com.        300 IN A   93.184.215.14
_dmarc.example.com. 300 IN TXT "v=DMARC1; p=reject; sp=reject; adkim=s; aspf=s"
`

// docsSettings are settings the documentation's examples need beyond
// what scripts/run sets.
var docsSettings = []string{}

// shBlock is one ```sh block of a Markdown file.
type shBlock struct {
	file string // relative to the repository's root
	line int    // of the opening fence, 1-based
	text string
}

// repoRoot is the repository's root, seen from this package's directory.
const repoRoot = "../.."

// markdownShBlocks returns the ```sh blocks of the Markdown file (a path
// relative to the repository's root) in order.
func markdownShBlocks(t *testing.T, file string) []shBlock {
	t.Helper()
	path := filepath.Join(repoRoot, filepath.FromSlash(file))
	data, err := os.ReadFile(path)
	require.NoError(t, err)
	var (
		blocks []shBlock
		cur    *shBlock
		fence  string
	)
	sc := bufio.NewScanner(bytes.NewReader(data))
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		trimmed := strings.TrimSpace(line)
		switch {
		case cur == nil && fence == "" && strings.HasPrefix(trimmed, "```"):
			fence = "```"
			if strings.TrimSpace(strings.TrimPrefix(trimmed, "```")) == "sh" {
				cur = &shBlock{file: file, line: n}
			}
		case fence != "" && trimmed == fence:
			if cur != nil {
				blocks = append(blocks, *cur)
			}
			cur, fence = nil, ""
		case cur != nil:
			cur.text += line + "\n"
		}
	}
	require.NoError(t, sc.Err())
	require.Empty(t, fence, "%s: a code block is never closed", file)
	return blocks
}

// cleanEnv is the test's environment without any of mailwatch's settings
// or the names the walk-through sets, so a block only sees what a user's
// fresh shell would have plus .local/env.
func cleanEnv() []string {
	drop := map[string]bool{"BASE": true, "SMTP_URL": true, "UI": true, "KEY": true}
	for _, v := range config.Vars {
		drop[v.Name] = true
	}
	var env []string
	for _, kv := range os.Environ() {
		name, _, _ := strings.Cut(kv, "=")
		if !drop[name] {
			env = append(env, kv)
		}
	}
	return env
}

// TestDocsShBlocksParse checks the extractor on the documentation itself:
// the walk-through is there and comes first, the run order names every
// docs file with examples, and no block runs scripts/run or a literal
// address.
func TestDocsShBlocksParse(t *testing.T) {
	t.Parallel()
	blocks := docsShBlocks(t)
	require.NotEmpty(t, blocks)
	require.Equal(t, "README.md", blocks[0].file)
	require.Contains(t, blocks[0].text, "source .local/env", "the walk-through starts from scripts/run's environment")
	for _, b := range blocks {
		for _, l := range strings.Split(b.text, "\n") {
			require.False(t, strings.HasPrefix(strings.TrimSpace(l), "scripts/run"),
				"%s block at line %d: scripts/run does not return; fence it as console", b.file, b.line)
		}
		require.NotContains(t, b.text, "127.0.0.1:8080", "%s block at line %d: use $BASE", b.file, b.line)
	}
}

// TestDocsRunAsPasted runs every ```sh block of README.md and docs/, in
// the declared order, against a real `mailwatch dev`; see the rules at the
// top of this file.
func TestDocsRunAsPasted(t *testing.T) {
	t.Parallel()
	for _, tool := range []string{"bash", "curl", "jq", "openssl"} {
		_, err := exec.LookPath(tool)
		require.NoError(t, err, "the documentation's examples need %s (scripts/test and scripts/run install jq and openssl)", tool)
	}
	blocks := docsShBlocks(t)
	lib, err := filepath.Abs("../../scripts/lib.sh")
	require.NoError(t, err)
	binDir := filepath.Dir(buildBinary(t))
	pool, dbURL := dbtest.NewDB(t)
	dns := dnstest.Start(t, docsZone)
	work := t.TempDir()
	listen := freeAddr(t)

	// mailwatch dev, started as scripts/run starts it.
	devEnv := append(cleanEnv(),
		"DATABASE_URL="+dbURL,
		"LISTEN_ADDR="+listen,
		"SMTP_ADDR="+freeAddr(t),
		"UI_ADDR="+freeAddr(t),
		"DNS_RESOLVER="+dns.Addr(),
		"MAILWATCH_SECRET_KEY="+base64.StdEncoding.EncodeToString(bytes.Repeat([]byte{7}, 32)),
		"LOG_FORMAT=json",
	)
	devEnv = append(devEnv, docsSettings...)
	dev := startBash(t, devEnv, "",
		`source "$1" && dev_env && write_local_env "$2/.local/env" "$3" && exec "$3/mailwatch" dev`,
		lib, work, binDir)
	waitHTTP(t, "http://"+listen+"/readyz")

	var script strings.Builder
	script.WriteString("set -euo pipefail\n")
	script.WriteString(`trap 'echo "$MW_DOC_BLOCK failed: $BASH_COMMAND" >&2' ERR` + "\n")
	for _, b := range blocks {
		where := fmt.Sprintf("%s block at line %d", b.file, b.line)
		fmt.Fprintf(&script, "MW_DOC_BLOCK='%s'\necho '### %s' >&2\n%s\n", where, where, b.text)
	}
	path := filepath.Join(work, "docs.sh")
	require.NoError(t, os.WriteFile(path, []byte(script.String()), 0o600))

	cmd := exec.Command("bash", path)
	cmd.Dir = work
	cmd.Env = cleanEnv()
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "the documentation's ```sh blocks failed as pasted:\n%s\nmailwatch dev:\n%s", out, dev.log())

	// What the examples did reached the server: the alert was
	// acknowledged, the delivery was retried, the mail arrived.
	ctx := context.Background()
	var acked, attempts, messages int
	require.NoError(t, pool.QueryRow(ctx, `SELECT
		(SELECT count(*) FROM events WHERE acknowledged_at IS NOT NULL),
		(SELECT count(*) FROM webhook_delivery_attempts),
		(SELECT count(*) FROM receiver_messages)`).Scan(&acked, &attempts, &messages))
	require.Equal(t, 1, acked, "%s", out)
	require.GreaterOrEqual(t, attempts, 2, "the first attempt and docs/features/river-ui.md's retry:\n%s", out)
	require.Equal(t, 2, messages, "receivers.md's message and the README's judged one:\n%s", out)
	// The judged message was signed and analysed: its signature was read
	// (example.com publishes no key for it), the headers were judged.
	var dkimDomain, dkimResult, verdict string
	require.NoError(t, pool.QueryRow(ctx, `SELECT analysis->'authentication'->'dkim'->0->>'domain',
		analysis->'authentication'->'dkim'->0->>'result', analysis->'verdicts'->>'dkim'
		FROM receiver_messages WHERE subject = 'Confirm your account'`).Scan(&dkimDomain, &dkimResult, &verdict))
	require.Equal(t, "example.com", dkimDomain, "%s", out)
	require.Equal(t, "permerror", dkimResult, "%s", out)
	require.Contains(t, string(out), `"type": "dkim_pass",`+"\n"+`      "pass": false`, "the assertion result is printed")
}

// startBash runs a bash script (with args $1...) as a long-running process
// whose stderr is kept for failure messages, stopped when the test ends.
func startBash(t *testing.T, env []string, dir, script string, args ...string) *process {
	t.Helper()
	p := &process{cmd: exec.Command("bash", append([]string{"-c", script, "bash"}, args...)...), done: make(chan error, 1)}
	p.cmd.Env, p.cmd.Dir = env, dir
	pipe, err := p.cmd.StderrPipe()
	require.NoError(t, err)
	p.cmd.Stdout = p.cmd.Stderr
	require.NoError(t, p.cmd.Start())
	go func() {
		sc := bufio.NewScanner(pipe)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			p.mu.Lock()
			p.stderr.WriteString(sc.Text() + "\n")
			p.mu.Unlock()
		}
		p.done <- p.cmd.Wait()
	}()
	t.Cleanup(func() {
		_ = p.cmd.Process.Kill()
		<-p.done
	})
	return p
}
