package mxprobe

import (
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"os"
	"time"

	"github.com/mailwatch/mailwatch/internal/dnscheck"
)

// Defaults for Config.
const (
	// DefaultPort is the SMTP port MX hosts receive mail on (RFC 5321).
	DefaultPort = 25
	// DefaultConnectTimeout bounds the TCP connect to one address.
	DefaultConnectTimeout = 10 * time.Second
	// DefaultStepTimeout bounds each step of the conversation: reading the
	// greeting, each command and its reply, the TLS handshake. Greeting
	// delays of a few seconds (postscreen) are common; RFC 5321 section
	// 4.5.3.2 suggests minutes for a sender that has mail to deliver, which
	// a probe does not.
	DefaultStepTimeout = 30 * time.Second
	// DefaultAddressTimeout bounds the whole conversation with one address,
	// whatever the server trickles.
	DefaultAddressTimeout = 90 * time.Second
	// DefaultMaxAddresses bounds the addresses probed per MX host.
	DefaultMaxAddresses = 8
	// maxCAFileSize bounds LoadCAFile's input.
	maxCAFileSize = 4 << 20
)

// Config configures Probe. The zero values of the optional fields mean the
// defaults above.
type Config struct {
	// Resolver looks up addresses, TLSA and PTR records (required). Use a
	// validating resolver: DANE counts only answers with the AD bit.
	Resolver dnscheck.Resolver
	// HeloName is the name sent with EHLO (required): a name whose A record
	// and PTR point at the prober, or receivers may greylist or refuse it.
	HeloName string
	// Port is the TCP port to probe; 0 means DefaultPort. Operators and
	// tests set it (SMTP_PROBE_PORT). The TLSA name follows it.
	Port int
	// ConnectTimeout, StepTimeout and AddressTimeout bound the probe of one
	// address; see the Default constants.
	ConnectTimeout time.Duration
	StepTimeout    time.Duration
	AddressTimeout time.Duration
	// MaxAddresses bounds the addresses probed per host.
	MaxAddresses int
	// ExtraRoots are trusted in addition to the system roots when verifying
	// a server's chain (SMTP_PROBE_CA_FILE; see LoadCAFile).
	ExtraRoots *x509.CertPool
	// Now is the clock for certificate validity and days to expiry; nil
	// means time.Now. Network deadlines always use the real clock.
	Now func() time.Time
	// AllowAddr, when set, is asked before each address is dialled; an
	// address it refuses is not probed (a Temporary "address_not_allowed"
	// problem). MX records are user data: pass a netguard.Guard's CheckIP
	// so a domain cannot point the prober at internal services.
	AllowAddr func(netip.Addr) error
}

// withDefaults returns c with defaults filled in, or an error when a
// required field is missing.
func (c Config) withDefaults() (Config, error) {
	if c.Resolver == nil {
		return c, errors.New("mxprobe: Config.Resolver is required")
	}
	if c.HeloName == "" {
		return c, errors.New("mxprobe: Config.HeloName is required")
	}
	if !validHeloName(c.HeloName) {
		return c, fmt.Errorf("mxprobe: Config.HeloName %q is not a domain name", c.HeloName)
	}
	if c.Port == 0 {
		c.Port = DefaultPort
	}
	if c.Port < 0 || c.Port > 65535 {
		return c, fmt.Errorf("mxprobe: Config.Port %d is out of range", c.Port)
	}
	if c.ConnectTimeout <= 0 {
		c.ConnectTimeout = DefaultConnectTimeout
	}
	if c.StepTimeout <= 0 {
		c.StepTimeout = DefaultStepTimeout
	}
	if c.AddressTimeout <= 0 {
		c.AddressTimeout = DefaultAddressTimeout
	}
	if c.MaxAddresses <= 0 {
		c.MaxAddresses = DefaultMaxAddresses
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	return c, nil
}

// validHeloName accepts what may follow EHLO without breaking the command
// line: letters, digits, '-', '.', and an address literal's brackets and
// colons. It keeps CR and LF (command injection) out.
func validHeloName(s string) bool {
	if len(s) > 255 {
		return false
	}
	for _, r := range s {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9':
		case r == '-', r == '.', r == '[', r == ']', r == ':':
		default:
			return false
		}
	}
	return true
}

// LoadCAFile reads PEM certificates (SMTP_PROBE_CA_FILE) into a pool for
// Config.ExtraRoots.
func LoadCAFile(path string) (*x509.CertPool, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("error opening CA file: %w", err)
	}
	defer f.Close()
	buf, err := io.ReadAll(io.LimitReader(f, maxCAFileSize+1))
	if err != nil {
		return nil, fmt.Errorf("error reading CA file %s: %w", path, err)
	}
	if len(buf) > maxCAFileSize {
		return nil, fmt.Errorf("CA file %s is larger than %d bytes", path, maxCAFileSize)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(buf) {
		return nil, fmt.Errorf("CA file %s holds no PEM certificate", path)
	}
	return pool, nil
}
