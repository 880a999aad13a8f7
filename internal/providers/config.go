// Package providers is mailwatch's sending-provider capability: provider
// configurations and their sealed verification material, webhook ingress
// (verify, store the raw payload, hand it to a job), normalisation into
// per-recipient message events, the suppression list, bounce and complaint
// spike detection, and the message aggregates. api/ and jobs/ are thin
// adapters over these functions, which take the caller's transaction.
package providers

import (
	"crypto/ecdsa"
	"encoding/json"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/google/uuid"

	"github.com/mailwatch/mailwatch/internal/dbsqlc"
	"github.com/mailwatch/mailwatch/internal/esp/postmark"
	"github.com/mailwatch/mailwatch/internal/esp/resend"
	"github.com/mailwatch/mailwatch/internal/esp/sendgrid"
	"github.com/mailwatch/mailwatch/internal/esp/ses"
	"github.com/mailwatch/mailwatch/internal/pgtext"
	"github.com/mailwatch/mailwatch/internal/secretbox"
)

// Provider kinds.
const (
	KindSES      = "ses"
	KindSendGrid = "sendgrid"
	KindPostmark = "postmark"
	KindMailgun  = "mailgun"
	KindResend   = "resend"
)

// Kinds lists every kind.
var Kinds = []string{KindSES, KindSendGrid, KindPostmark, KindMailgun, KindResend}

// MaxPerAccount bounds an account's providers.
const MaxPerAccount = 50

// Limits on configuration values.
const (
	maxTopicARNs  = 20
	maxAllowedIPs = 50
	maxSecretLen  = 1024
	// MinSigningKeyLength is the shortest Mailgun signing key accepted
	// (Mailgun's are 32 hex characters or longer, with a key- prefix).
	MinSigningKeyLength = 16
	// MaxLabelLength bounds a label (sending_providers_label_length).
	MaxLabelLength = 100
)

// NormalizeLabel returns label as it is stored, trimmed of surrounding
// white space, or a *FieldError when what is left is empty, longer than
// MaxLabelLength characters, or text Postgres cannot store. Create and
// rename both use it.
func NormalizeLabel(label string) (string, error) {
	if err := pgtext.Check(label); err != nil {
		return "", fieldErr("label", "%s", err)
	}
	label = strings.TrimSpace(label)
	switch n := utf8.RuneCountInString(label); {
	case n == 0:
		return "", fieldErr("label", "must not be empty or only white space")
	case n > MaxLabelLength:
		return "", fieldErr("label", "must be at most %d characters", MaxLabelLength)
	}
	return label, nil
}

// Config is a provider's verification material as given at creation. Every
// field is sealed at rest; none is shown again.
type Config struct {
	// ses
	TopicARNs []string `json:"topic_arns,omitempty"`
	// sendgrid: base64 DER (SubjectPublicKeyInfo) P-256 key, as SendGrid shows it.
	PublicKey string `json:"public_key,omitempty"`
	// postmark
	BasicAuthUser     string   `json:"basic_auth_user,omitempty"`
	BasicAuthPassword string   `json:"basic_auth_password,omitempty"`
	AllowedIPs        []string `json:"allowed_ips,omitempty"`
	// mailgun: the HTTP webhook signing key.
	SigningKey string `json:"signing_key,omitempty"`
	// resend: the whsec_ secret of the webhook endpoint.
	SigningSecret string `json:"signing_secret,omitempty"`

	// parsed holds the verification material decoded once (by Prepare)
	// for a cached provider; nil means Verify decodes it per request.
	parsed *parsedConfig
}

// parsedConfig is a Config's material decoded for Verify.
type parsedConfig struct {
	sendgridKey   *ecdsa.PublicKey
	postmarkAllow []netip.Prefix
}

// Prepare decodes the material Verify needs for kind once, so a cached
// provider does not parse its public key or allow-list per request. Bad
// material is left for Verify to report.
func (c *Config) Prepare(kind string) {
	p := &parsedConfig{}
	switch kind {
	case KindSendGrid:
		if key, err := sendgrid.ParsePublicKey(c.PublicKey); err == nil {
			p.sendgridKey = key
		}
	case KindPostmark:
		allowed, err := postmark.ParseAllowList(c.AllowedIPs)
		if err != nil {
			return
		}
		p.postmarkAllow = allowed
	}
	c.parsed = p
}

// FieldError is a validation error about one config field (the API's 422).
type FieldError struct {
	Field   string
	Message string
}

func (e *FieldError) Error() string { return e.Field + ": " + e.Message }

func fieldErr(field, format string, args ...any) error {
	return &FieldError{Field: field, Message: fmt.Sprintf(format, args...)}
}

// Validate checks cfg for kind: required fields present, fields of other
// kinds absent, values well-formed. It returns the fields set, for display.
func Validate(kind string, cfg Config) ([]string, error) {
	allowed := map[string][]string{
		KindSES:      {"topic_arns"},
		KindSendGrid: {"public_key"},
		KindPostmark: {"basic_auth_user", "basic_auth_password", "allowed_ips"},
		KindMailgun:  {"signing_key"},
		KindResend:   {"signing_secret"},
	}[kind]
	if allowed == nil {
		return nil, fieldErr("kind", "must be one of %s", strings.Join(Kinds, ", "))
	}
	set := cfg.setFields()
	for _, f := range set {
		if !slices.Contains(allowed, f) {
			return nil, fieldErr("config."+f, "is not a setting of %s (give %s)", kind, strings.Join(allowed, ", "))
		}
	}
	for _, s := range []struct{ name, v string }{
		{"public_key", cfg.PublicKey}, {"basic_auth_user", cfg.BasicAuthUser}, {"basic_auth_password", cfg.BasicAuthPassword},
		{"signing_key", cfg.SigningKey}, {"signing_secret", cfg.SigningSecret},
	} {
		if len(s.v) > maxSecretLen {
			return nil, fieldErr("config."+s.name, "must be at most %d characters", maxSecretLen)
		}
	}
	switch kind {
	case KindSES:
		if len(cfg.TopicARNs) == 0 || len(cfg.TopicARNs) > maxTopicARNs {
			return nil, fieldErr("config.topic_arns", "must list 1 to %d SNS topic ARNs", maxTopicARNs)
		}
		for i, a := range cfg.TopicARNs {
			if !ses.ValidTopicARN(a) {
				return nil, fieldErr(fmt.Sprintf("config.topic_arns[%d]", i), "is not an SNS topic ARN (arn:aws:sns:<region>:<account>:<topic>)")
			}
		}
	case KindSendGrid:
		if cfg.PublicKey == "" {
			return nil, fieldErr("config.public_key", "is required: the verification key SendGrid shows for the signed Event Webhook")
		}
		if _, err := sendgrid.ParsePublicKey(cfg.PublicKey); err != nil {
			return nil, fieldErr("config.public_key", "must be base64 of a DER ECDSA P-256 public key, as SendGrid shows it")
		}
	case KindPostmark:
		if cfg.BasicAuthUser == "" || cfg.BasicAuthPassword == "" {
			return nil, fieldErr("config.basic_auth_password", "basic_auth_user and basic_auth_password are required")
		}
		if strings.Contains(cfg.BasicAuthUser, ":") {
			return nil, fieldErr("config.basic_auth_user", "must not contain a colon")
		}
		if len(cfg.BasicAuthPassword) < 12 {
			return nil, fieldErr("config.basic_auth_password", "must be at least 12 characters")
		}
		if len(cfg.AllowedIPs) > maxAllowedIPs {
			return nil, fieldErr("config.allowed_ips", "must have at most %d entries", maxAllowedIPs)
		}
		if _, err := postmark.ParseAllowList(cfg.AllowedIPs); err != nil {
			return nil, fieldErr("config.allowed_ips", "%s", strings.TrimPrefix(err.Error(), "malformed provider payload: "))
		}
	case KindMailgun:
		switch n := len(cfg.SigningKey); {
		case n == 0:
			return nil, fieldErr("config.signing_key", "is required: Mailgun's HTTP webhook signing key")
		case n < MinSigningKeyLength:
			return nil, fieldErr("config.signing_key", "is too short (%d characters): Mailgun's HTTP webhook signing key has at least %d", n, MinSigningKeyLength)
		}
	case KindResend:
		if err := resend.ValidateSecret(cfg.SigningSecret); err != nil {
			return nil, fieldErr("config.signing_secret", "must be the whsec_... signing secret Resend shows for the webhook")
		}
	}
	return set, nil
}

func (c Config) setFields() []string {
	var out []string
	add := func(name string, set bool) {
		if set {
			out = append(out, name)
		}
	}
	add("topic_arns", len(c.TopicARNs) > 0)
	add("public_key", c.PublicKey != "")
	add("basic_auth_user", c.BasicAuthUser != "")
	add("basic_auth_password", c.BasicAuthPassword != "")
	add("allowed_ips", len(c.AllowedIPs) > 0)
	add("signing_key", c.SigningKey != "")
	add("signing_secret", c.SigningSecret != "")
	return out
}

// publicConfig is what the sending_providers.config column shows: the
// names of the fields set, never their values.
type publicConfig struct {
	Fields []string `json:"fields"`
}

// Seal encrypts cfg bound to the provider id.
func Seal(kr *secretbox.Keyring, id uuid.UUID, cfg Config) (ciphertext []byte, keyID string, public json.RawMessage, err error) {
	plain, err := json.Marshal(cfg)
	if err != nil {
		return nil, "", nil, err
	}
	ciphertext, keyID, err = kr.Seal(plain, id[:])
	if err != nil {
		return nil, "", nil, fmt.Errorf("error sealing provider config: %w", err)
	}
	public, err = json.Marshal(publicConfig{Fields: cfg.setFields()})
	return ciphertext, keyID, public, err
}

// Open decrypts a provider's config.
func Open(kr *secretbox.Keyring, row *dbsqlc.SendingProvider) (Config, error) {
	plain, err := kr.Open(row.SecretKeyID, row.SecretCiphertext, row.ID[:])
	if err != nil {
		return Config{}, fmt.Errorf("error opening provider config: %w", err)
	}
	var cfg Config
	if err := json.Unmarshal(plain, &cfg); err != nil {
		return Config{}, fmt.Errorf("error decoding provider config: %w", err)
	}
	return cfg, nil
}

// ConfiguredFields returns the field names stored in a row's public config.
func ConfiguredFields(row *dbsqlc.SendingProvider) []string {
	var pc publicConfig
	if err := json.Unmarshal(row.Config, &pc); err != nil || pc.Fields == nil {
		return []string{}
	}
	return pc.Fields
}

// IngressURL is where the provider must send its webhooks.
func IngressURL(publicBaseURL string, id uuid.UUID) string {
	return strings.TrimSuffix(publicBaseURL, "/") + "/api/webhooks/providers/" + id.String()
}

// SetupSteps tells the user what to configure at the provider.
func SetupSteps(kind, ingressURL string) []string {
	switch kind {
	case KindSES:
		return []string{
			"In Amazon SES, set the identity's (or configuration set's) Bounce, Complaint and Delivery notifications to an SNS topic listed in topic_arns.",
			"In Amazon SNS, create an HTTPS subscription of that topic to " + ingressURL + " (raw message delivery off).",
			"mailwatch confirms the subscription automatically when SNS sends its SubscriptionConfirmation.",
		}
	case KindSendGrid:
		return []string{
			"In SendGrid, Settings > Mail Settings > Event Webhook: set the HTTP Post URL to " + ingressURL + ".",
			"Select the processed, delivered, deferred, bounce, dropped, spam report and unsubscribe events.",
			"Enable Signed Event Webhook and give mailwatch the verification key shown there as public_key.",
		}
	case KindPostmark:
		return []string{
			"In Postmark, Servers > (server) > Webhooks > Add webhook: URL https://<basic_auth_user>:<basic_auth_password>@" + strings.TrimPrefix(strings.TrimPrefix(ingressURL, "https://"), "http://") + " (or set Basic auth credentials in the webhook's settings).",
			"Select the Delivery, Bounce, Spam Complaint and Subscription Change events.",
			"Optionally restrict allowed_ips to Postmark's published webhook IP addresses.",
		}
	case KindMailgun:
		return []string{
			"In Mailgun, Sending > Webhooks: add " + ingressURL + " for the accepted, delivered, permanent_fail, temporary_fail, complained and unsubscribed events.",
			"Give mailwatch the HTTP webhook signing key (Settings > API Security) as signing_key.",
		}
	case KindResend:
		return []string{
			"In Resend, Webhooks > Add Endpoint: URL " + ingressURL + ", events email.sent, email.delivered, email.delivery_delayed, email.bounced and email.complained.",
			"Give mailwatch the endpoint's signing secret (whsec_...) as signing_secret.",
		}
	}
	return nil
}

// Errors the API maps to statuses.
var (
	// ErrNotFound: no such provider (or another account's): 404.
	ErrNotFound = errors.New("sending provider not found")
	// ErrDomainNotFound: the domain to link is not the account's: 404/422.
	ErrDomainNotFound = errors.New("domain not found")
	// ErrLimit: too many providers: 409.
	ErrLimit = fmt.Errorf("an account may have at most %d sending providers", MaxPerAccount)
)
