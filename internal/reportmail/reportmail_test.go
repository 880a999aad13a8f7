package reportmail_test

import (
	"bytes"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/mailwatch/mailwatch/internal/corpus"
	"github.com/mailwatch/mailwatch/internal/reportmail"
)

func TestParseFindsAttachments(t *testing.T) {
	t.Parallel()
	m, err := reportmail.Parse(corpus.Read(t, "dmarc/mimecast-weird-gzip.eml"))
	require.NoError(t, err)
	require.Len(t, m.Parts, 1, "a single-part message is its own body")
	require.Equal(t, "application/gzip", m.Parts[0].ContentType)
	require.True(t, reportmail.IsGzip(m.Parts[0].Content))
}

func TestBounds(t *testing.T) {
	t.Parallel()
	nest := func(depth int) []byte {
		var b bytes.Buffer
		b.WriteString("From: a@example.com\r\n")
		for i := range depth {
			fmt.Fprintf(&b, "Content-Type: multipart/mixed; boundary=b%d\r\n\r\n--b%d\r\n", i, i)
		}
		b.WriteString("Content-Type: text/plain\r\n\r\nx\r\n")
		for i := depth - 1; i >= 0; i-- {
			fmt.Fprintf(&b, "--b%d--\r\n", i)
		}
		return b.Bytes()
	}
	_, err := reportmail.Parse(nest(3))
	require.NoError(t, err)
	_, err = reportmail.Parse(nest(reportmail.MaxDepth + 2))
	require.ErrorIs(t, err, reportmail.ErrTooComplex)

	var wide bytes.Buffer
	wide.WriteString("From: a@example.com\r\nContent-Type: multipart/mixed; boundary=b\r\n\r\n")
	for range reportmail.MaxParts + 1 {
		wide.WriteString("--b\r\nContent-Type: text/plain\r\n\r\nx\r\n")
	}
	wide.WriteString("--b--\r\n")
	_, err = reportmail.Parse(wide.Bytes())
	require.ErrorIs(t, err, reportmail.ErrTooComplex)

	_, err = reportmail.Parse(make([]byte, reportmail.MaxMessageBytes+1))
	require.ErrorIs(t, err, reportmail.ErrTooLarge)
}
