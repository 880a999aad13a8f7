// Package bindtest runs a real BIND 9 (named) on the loopback interface for
// tests of RFC 2136 dynamic updates: a temporary directory holding a
// named.conf, one primary zone and a TSIG key (RFC 8945) allowed to update
// it, and named started in the foreground on a free port. The server is
// stopped and its files removed when the test ends.
//
// named comes from Debian's bind9 package (scripts/test installs it). When
// it is missing the test is skipped with a message saying so, unless
// BINDTEST_REQUIRED is set, in which case it fails.
//
// Run as root, named drops to the "bind" user (-u bind) and the temporary
// directory is handed to that user; run as a normal user, named runs as
// that user.
package bindtest

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/miekg/dns"
)

// KeyName is the TSIG key name every Server is configured with.
const KeyName = "mailwatch-test."

// Algorithm is the TSIG algorithm of the key (RFC 8945 HMAC-SHA256).
const Algorithm = dns.HmacSHA256

// startWait bounds how long Start waits for named to answer; a named that
// does not answer by then has failed to start (its log is reported).
const startWait = 30 * time.Second

// Server is a running named serving one zone.
type Server struct {
	// Addr is "127.0.0.1:port", for UDP and TCP.
	Addr string
	// Zone is the zone's name, fully qualified ("example.test.").
	Zone string
	// Secret is the TSIG key's secret, base64.
	Secret string

	cmd  *exec.Cmd
	dir  string
	log  *lockedBuffer
	done chan struct{}
}

type lockedBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.b.Len() < 1<<20 {
		l.b.Write(p)
	}
	return len(p), nil
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// NamedPath returns the path of the named binary, or "" when it is not
// installed.
func NamedPath() string {
	if p, err := exec.LookPath("named"); err == nil {
		return p
	}
	for _, p := range []string{"/usr/sbin/named", "/usr/local/sbin/named"} {
		if _, err := os.Stat(p); err == nil {
			return p
		}
	}
	return ""
}

// Start starts named serving zone (a name such as "example.test") with the
// records in records (master-file lines with fully qualified owner names;
// the SOA and NS records are added). It skips the test when named is not
// installed (fails when BINDTEST_REQUIRED is set).
func Start(tb testing.TB, zone string, records string) *Server {
	tb.Helper()
	named := NamedPath()
	if named == "" {
		if os.Getenv("BINDTEST_REQUIRED") != "" {
			tb.Fatal("bindtest: named is not installed (apt-get install -y bind9)")
		}
		tb.Skip("bindtest: named is not installed (apt-get install -y bind9); skipping the BIND test")
	}
	s, err := start(named, dns.Fqdn(zone), records)
	if err != nil {
		tb.Fatalf("bindtest: %v", err)
	}
	tb.Cleanup(s.stop)
	return s
}

func start(named, zone, records string) (*Server, error) {
	dir, err := os.MkdirTemp("", "bindtest-")
	if err != nil {
		return nil, err
	}
	secretBytes := make([]byte, 32)
	_, _ = rand.Read(secretBytes)
	s := &Server{Zone: zone, Secret: base64.StdEncoding.EncodeToString(secretBytes), dir: dir, log: &lockedBuffer{}, done: make(chan struct{})}
	port, err := freePort()
	if err != nil {
		_ = os.RemoveAll(dir)
		return nil, err
	}
	s.Addr = net.JoinHostPort("127.0.0.1", strconv.Itoa(port))

	zoneText := fmt.Sprintf("$TTL 300\n%[1]s IN SOA ns1.%[1]s hostmaster.%[1]s 1 3600 600 86400 300\n%[1]s IN NS ns1.%[1]s\nns1.%[1]s IN A 127.0.0.1\n%[2]s\n", zone, records)
	conf := fmt.Sprintf(`options {
	directory "%[1]s";
	pid-file "%[1]s/named.pid";
	session-keyfile "%[1]s/session.key";
	managed-keys-directory "%[1]s";
	listen-on port %[2]d { 127.0.0.1; };
	listen-on-v6 { none; };
	recursion no;
	allow-query { any; };
	dnssec-validation no;
	notify no;
};
key "%[3]s" {
	algorithm hmac-sha256;
	secret "%[4]s";
};
controls { };
zone "%[5]s" {
	type primary;
	file "%[1]s/zone.db";
	update-policy { grant %[3]s zonesub ANY; };
};
`, dir, port, KeyName, s.Secret, zone)
	if err := os.WriteFile(filepath.Join(dir, "zone.db"), []byte(zoneText), 0o644); err != nil {
		return nil, err
	}
	if err := os.WriteFile(filepath.Join(dir, "named.conf"), []byte(conf), 0o644); err != nil {
		return nil, err
	}

	args := []string{"-g", "-4", "-n", "1", "-c", filepath.Join(dir, "named.conf")}
	if os.Geteuid() == 0 {
		// named refuses nothing as root, but tests should not run a
		// network daemon as root: hand the directory to the bind user.
		u, err := user.Lookup("bind")
		if err != nil {
			_ = os.RemoveAll(dir)
			return nil, fmt.Errorf("running as root needs the bind user (from the bind9 package): %w", err)
		}
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		for _, p := range []string{dir, filepath.Join(dir, "zone.db"), filepath.Join(dir, "named.conf")} {
			if err := os.Chown(p, uid, gid); err != nil {
				_ = os.RemoveAll(dir)
				return nil, err
			}
		}
		if err := os.Chmod(dir, 0o755); err != nil {
			_ = os.RemoveAll(dir)
			return nil, err
		}
		args = append(args, "-u", "bind")
	}
	cmd := exec.Command(named, args...)
	cmd.Stdout, cmd.Stderr = s.log, s.log
	if err := cmd.Start(); err != nil {
		_ = os.RemoveAll(dir)
		return nil, fmt.Errorf("starting named: %w", err)
	}
	s.cmd = cmd
	go func() { _ = cmd.Wait(); close(s.done) }()

	deadline := time.Now().Add(startWait)
	for {
		if s.answers() {
			return s, nil
		}
		if strings.Contains(s.log.String(), "not loaded due to errors") {
			s.stop()
			return nil, fmt.Errorf("named could not load the zone:\n%s", s.log.String())
		}
		select {
		case <-s.done:
			log := s.log.String()
			_ = os.RemoveAll(dir)
			return nil, fmt.Errorf("named exited before answering:\n%s", log)
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			s.stop()
			return nil, fmt.Errorf("named did not answer within %s:\n%s", startWait, s.log.String())
		}
	}
}

func (s *Server) answers() bool {
	m := new(dns.Msg)
	m.SetQuestion(s.Zone, dns.TypeSOA)
	c := &dns.Client{Timeout: 500 * time.Millisecond}
	r, _, err := c.Exchange(m, s.Addr)
	return err == nil && r.Rcode == dns.RcodeSuccess && len(r.Answer) > 0
}

func (s *Server) stop() {
	if s.cmd != nil && s.cmd.Process != nil {
		_ = s.cmd.Process.Signal(os.Interrupt)
		select {
		case <-s.done:
		case <-time.After(10 * time.Second):
			_ = s.cmd.Process.Kill()
			<-s.done
		}
	}
	_ = os.RemoveAll(s.dir)
}

// Log returns what named printed so far.
func (s *Server) Log() string { return s.log.String() }

// Query asks the server for name's records of type qtype (no TSIG), and
// returns their RDATA in presentation form; TXT records are returned as
// their joined strings.
func (s *Server) Query(ctx context.Context, name string, qtype uint16) ([]string, error) {
	m := new(dns.Msg)
	m.SetQuestion(dns.Fqdn(name), qtype)
	c := &dns.Client{Net: "tcp"}
	r, _, err := c.ExchangeContext(ctx, m, s.Addr)
	if err != nil {
		return nil, err
	}
	if r.Rcode != dns.RcodeSuccess && r.Rcode != dns.RcodeNameError {
		return nil, errors.New(dns.RcodeToString[r.Rcode])
	}
	var out []string
	for _, rr := range r.Answer {
		if rr.Header().Rrtype != qtype {
			continue
		}
		if t, ok := rr.(*dns.TXT); ok {
			out = append(out, strings.Join(t.Txt, ""))
			continue
		}
		out = append(out, strings.TrimPrefix(rr.String(), rr.Header().String()))
	}
	return out, nil
}

// Update sends a TSIG-signed dynamic update made by build (which gets a
// message already set up for the zone), as another writer of the zone
// would, and returns an error unless the server answers NOERROR.
func (s *Server) Update(ctx context.Context, build func(m *dns.Msg)) error {
	m := new(dns.Msg)
	m.SetUpdate(s.Zone)
	build(m)
	m.SetTsig(KeyName, Algorithm, 300, time.Now().Unix())
	c := &dns.Client{Net: "tcp", TsigSecret: map[string]string{KeyName: s.Secret}}
	r, _, err := c.ExchangeContext(ctx, m, s.Addr)
	if err != nil {
		return err
	}
	if r.Rcode != dns.RcodeSuccess {
		return fmt.Errorf("update answered %s", dns.RcodeToString[r.Rcode])
	}
	return nil
}

func freePort() (int, error) {
	// The UDP and TCP ports must both be free; named binds both.
	for range 20 {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return 0, err
		}
		port := l.Addr().(*net.TCPAddr).Port
		pc, err := net.ListenPacket("udp", l.Addr().String())
		_ = l.Close()
		if err != nil {
			continue
		}
		_ = pc.Close()
		return port, nil
	}
	return 0, errors.New("no free port")
}
