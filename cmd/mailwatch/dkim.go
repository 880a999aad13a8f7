package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"

	"github.com/mailwatch/mailwatch/internal/deliverability"
)

const dkimUsage = `usage:
  mailwatch dkim keygen --out <key file> [--domain <domain> --selector <selector>]
  mailwatch dkim sign --key <key file> --domain <domain> --selector <selector> < message > signed`

// maxDKIMMessage bounds the message `dkim sign` reads from stdin.
const maxDKIMMessage = 10 << 20

// runDKIM makes a DKIM key and signs test messages with it, so a team can
// send a receiver signed mail and read how the analysis judges it.
func runDKIM(ctx context.Context, args []string, stdin io.Reader, stdout io.Writer) error {
	if len(args) == 0 {
		return usageError{"dkim: give a subcommand\n" + dkimUsage}
	}
	fs := flag.NewFlagSet("dkim "+args[0], flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	out := fs.String("out", "", "")
	keyFile := fs.String("key", "", "")
	domain := fs.String("domain", "", "")
	selector := fs.String("selector", "", "")
	if err := fs.Parse(args[1:]); err != nil {
		return usageError{fmt.Sprintf("dkim %s: %v\n%s", args[0], err, dkimUsage)}
	}
	if fs.NArg() > 0 {
		return usageError{fmt.Sprintf("dkim %s: unexpected argument %q\n%s", args[0], fs.Arg(0), dkimUsage)}
	}
	switch args[0] {
	case "keygen":
		if *out == "" {
			return usageError{"dkim keygen: give --out, the file to write the private key to\n" + dkimUsage}
		}
		keyPEM, record, err := deliverability.NewSigningKey()
		if err != nil {
			return err
		}
		// O_EXCL: an existing key (perhaps published) is never overwritten.
		f, err := os.OpenFile(*out, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
		if err != nil {
			return fmt.Errorf("dkim keygen: %w", err)
		}
		if _, err := f.Write(keyPEM); err != nil {
			_ = f.Close()
			return fmt.Errorf("dkim keygen: %w", err)
		}
		if err := f.Close(); err != nil {
			return fmt.Errorf("dkim keygen: %w", err)
		}
		name := "<selector>._domainkey.<domain>"
		if *domain != "" && *selector != "" {
			name = *selector + "._domainkey." + *domain
		}
		fmt.Fprintf(stdout, "private key written to %s; publish this TXT record at %s:\n%s\n", *out, name, record)
		return nil
	case "sign":
		if *keyFile == "" || *domain == "" || *selector == "" {
			return usageError{"dkim sign: give --key, --domain and --selector\n" + dkimUsage}
		}
		data, err := os.ReadFile(*keyFile)
		if err != nil {
			return fmt.Errorf("dkim sign: %w", err)
		}
		key, err := deliverability.ParseSigningKey(data)
		if err != nil {
			return fmt.Errorf("dkim sign: %s: %w", *keyFile, err)
		}
		msg, err := io.ReadAll(io.LimitReader(stdin, maxDKIMMessage+1))
		if err != nil {
			return fmt.Errorf("dkim sign: reading the message: %w", err)
		}
		signed, err := deliverability.Sign(ctx, msg, *domain, *selector, key)
		if err != nil {
			return fmt.Errorf("dkim sign: %w", err)
		}
		_, err = stdout.Write(signed)
		return err
	}
	return usageError{fmt.Sprintf("dkim: unknown subcommand %q\n%s", args[0], dkimUsage)}
}
