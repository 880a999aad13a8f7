package inbound

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/stretchr/testify/require"

	"github.com/mailwatch/mailwatch/internal/corpus"
	"github.com/mailwatch/mailwatch/internal/mimetest"

	"github.com/mailwatch/mailwatch/internal/mimelimit"
)

func readTestdata(t *testing.T, name string) []byte {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join("testdata", name))
	require.NoError(t, err)
	return raw
}

func TestParse(t *testing.T) {
	t.Parallel()

	t.Run("MultipartAlternativeWithAttachment", func(t *testing.T) {
		t.Parallel()

		msg, err := Parse(readTestdata(t, "multipart-alternative-attachment.eml"))
		require.NoError(t, err)

		require.Equal(t, Address{Name: "Acme Sécurité", Address: "noreply@example.com"}, msg.From)
		require.Equal(t, []Address{
			{Name: "Ann", Address: "ann@inbound.mailwatch.test"},
			{Address: "bob@inbound.mailwatch.test"},
		}, msg.To)
		require.Equal(t, []Address{{Name: "Carol, C.", Address: "carol@example.org"}}, msg.Cc)
		require.Equal(t, "Votre code de vérification ✓", msg.Subject)
		require.Equal(t, "abc123@example.com", msg.MessageID)
		require.NotNil(t, msg.Date)
		require.Equal(t, time.Date(2025, 3, 3, 10, 0, 0, 0, time.UTC), *msg.Date)

		// Quoted-printable text part, decoded.
		require.Contains(t, msg.Text, "Vérifiez ici")
		require.Contains(t, msg.Text, "https://app.example.com/verify?token=abc&u=1.")
		// Base64 HTML part, decoded.
		require.Contains(t, msg.HTML, "<b>482913</b>")

		require.Equal(t, []Attachment{{
			Filename:    "report.pdf",
			ContentType: "application/pdf",
			Size:        292,
			Disposition: DispositionAttachment,
		}}, msg.Attachments)

		// Headers keep their order and repeated names; folded values are
		// unfolded and encoded words decoded.
		names := make([]string, len(msg.Headers))
		for i, h := range msg.Headers {
			names[i] = h.Name
		}
		require.Equal(t, []string{
			"Return-Path", "Received", "From", "To", "Cc", "Subject", "Date",
			"Message-ID", "MIME-Version", "Content-Type",
		}, names)
		require.Equal(t, "from mx.example.com (mx.example.com [192.0.2.1])\tby inbound.mailwatch.test with ESMTPS; Mon, 3 Mar 2025 10:00:00 +0000", msg.Headers[1].Value)
		require.Equal(t, "Votre code de vérification ✓", msg.Headers[5].Value)

		require.Equal(t, []string{"https://app.example.com/verify?token=abc&u=1"}, msg.Links)
		require.Equal(t, []string{"482913"}, msg.Codes)
	})

	t.Run("ISO88591", func(t *testing.T) {
		t.Parallel()

		msg, err := Parse(readTestdata(t, "iso-8859-1.eml"))
		require.NoError(t, err)
		require.Equal(t, "Frédéric", msg.From.Name)
		require.Equal(t, "Crème brûlée", msg.Subject)
		require.Equal(t, "Café crème brûlée: votre code PIN est 7351.\r\n", msg.Text)
		require.Equal(t, []string{"7351"}, msg.Codes)
	})

	t.Run("ShiftJIS", func(t *testing.T) {
		t.Parallel()

		msg, err := Parse(readTestdata(t, "shift-jis.eml"))
		require.NoError(t, err)
		require.Equal(t, "山田", msg.From.Name)
		require.Equal(t, "確認コード", msg.Subject)
		require.Contains(t, msg.Text, "こんにちは。確認コードは 905112 です。")
		require.Equal(t, []string{"https://example.jp/login?id=42"}, msg.Links)
		require.Equal(t, []string{"905112"}, msg.Codes)
	})

	t.Run("Windows1252HTMLOnly", func(t *testing.T) {
		t.Parallel()

		msg, err := Parse(readTestdata(t, "windows-1252.eml"))
		require.NoError(t, err)
		require.Contains(t, msg.HTML, "“Smart quotes” cost €5 —")
		// The text is derived from the HTML when there is no text part.
		require.Contains(t, msg.Text, "Smart quotes")
		require.Equal(t, []string{"http://shop.example.com/été"}, msg.Links)
	})

	t.Run("InlineImages", func(t *testing.T) {
		t.Parallel()

		msg, err := Parse(readTestdata(t, "inline-image.eml"))
		require.NoError(t, err)
		require.Contains(t, msg.HTML, `cid:logo@example.com`)
		require.Equal(t, []Attachment{
			{Filename: "logo.png", ContentType: "image/png", Size: 70, ContentID: "logo@example.com", Disposition: DispositionInline},
			{ContentType: "image/png", Size: 70, ContentID: "banner@example.com", Disposition: DispositionInline},
		}, msg.Attachments)
		require.Equal(t, []string{"https://example.com/news"}, msg.Links)
	})

	t.Run("JSONShape", func(t *testing.T) {
		t.Parallel()

		msg, err := Parse([]byte("Subject: hi\r\n\r\nbody\r\n"))
		require.NoError(t, err)
		b, err := json.Marshal(msg)
		require.NoError(t, err)

		var got map[string]any
		require.NoError(t, json.Unmarshal(b, &got))
		for _, key := range []string{"from", "to", "cc", "subject", "text", "html", "headers", "attachments", "links", "codes"} {
			require.Contains(t, got, key)
		}
		// Empty lists are arrays, never null.
		require.Equal(t, []any{}, got["to"])
		require.Equal(t, []any{}, got["attachments"])
	})

	t.Run("BareLFAndNoHeaders", func(t *testing.T) {
		t.Parallel()

		msg, err := Parse([]byte("From: a@example.com\nSubject: lf only\n\nline one\nline two\n"))
		require.NoError(t, err)
		require.Equal(t, "a@example.com", msg.From.Address)
		require.Equal(t, "lf only", msg.Subject)
		require.Len(t, msg.Headers, 2)

		msg, err = Parse([]byte("\r\njust a body 123456\r\n"))
		require.NoError(t, err)
		require.Empty(t, msg.Headers)
	})

	t.Run("Malformed", func(t *testing.T) {
		t.Parallel()

		for name, raw := range map[string]string{
			"MissingBoundary":   "Content-Type: multipart/mixed\r\n\r\n--x\r\nhello\r\n",
			"UnclosedBoundary":  "Content-Type: multipart/mixed; boundary=x\r\n\r\n--x\r\nContent-Type: text/plain\r\n\r\nhello\r\n",
			"BadBase64":         "Content-Type: text/plain\r\nContent-Transfer-Encoding: base64\r\n\r\n!!!not base64***\r\n",
			"UnknownCharset":    "Content-Type: text/plain; charset=x-klingon\r\n\r\nqapla'\r\n",
			"BadAddress":        "From: <<<@@@>>>, \"unterminated <x@y.z>\r\nTo: ,,,\r\n\r\nhi\r\n",
			"BadEncodedWord":    "Subject: =?utf-8?q?=ZZ?= =?nope?B?!!!?=\r\n\r\nhi\r\n",
			"NULAndInvalidUTF8": "Subject: a\x00b\xff\r\n\r\nc\x00d\xfe\r\n",
			"HeaderWithoutBody": "Subject: x",
			"OnlyGarbage":       "\x00\x01\x02\xff\xfe",
		} {
			msg, err := Parse([]byte(raw))
			if err != nil {
				require.ErrorIs(t, err, ErrMalformedMessage, name)
				continue
			}
			requireCleanMessage(t, msg)
		}
	})

	t.Run("Limits", func(t *testing.T) {
		t.Parallel()

		_, err := Parse(nil)
		require.ErrorIs(t, err, ErrEmptyMessage)

		_, err = Parse(make([]byte, MaxMessageBytes+1))
		require.ErrorIs(t, err, ErrMessageTooLarge)

		// Parts beyond MaxParts are ignored; "--" lines that are not
		// boundaries don't count.
		var parts strings.Builder
		parts.WriteString("Content-Type: multipart/mixed; boundary=\"sep\"\r\n\r\n")
		parts.WriteString("--sep\r\nContent-Type: text/plain\r\n\r\n" + strings.Repeat("-----\r\n", 2*MaxParts) + "\r\n")
		for i := range MaxParts + 50 {
			fmt.Fprintf(&parts, "--sep\r\nContent-Type: application/octet-stream\r\nContent-Disposition: attachment; filename=f%d.bin\r\n\r\nxx\r\n", i)
		}
		parts.WriteString("--sep--\r\n")
		msg, err := Parse([]byte(parts.String()))
		require.NoError(t, err)
		require.Len(t, msg.Attachments, MaxParts-1)
		require.Equal(t, 2*MaxParts, strings.Count(msg.Text, "-----"))
		require.Contains(t, msg.Warnings[0], "MIME parts")

		// Deep nesting is refused before enmime reads it (issue 10: 10,000
		// nested parts took 45 s of CPU), even with each level a different
		// boundary, which the old part counter stopped following at 64.
		_, err = Parse(mimetest.Nested(10000))
		require.ErrorIs(t, err, mimelimit.ErrLimit)
		require.ErrorContains(t, err, "nesting depth")

		var b strings.Builder
		for range MaxHeaders + 10 {
			b.WriteString("X-Filler: " + strings.Repeat("v", 10) + "\r\n")
		}
		b.WriteString("X-Long: " + strings.Repeat("é", MaxHeaderValueBytes) + "\r\n\r\nbody\r\n")
		msg, err = Parse([]byte(b.String()))
		require.NoError(t, err)
		require.Len(t, msg.Headers, MaxHeaders)
		for _, h := range msg.Headers {
			require.LessOrEqual(t, len(h.Value), MaxHeaderValueBytes)
			require.True(t, utf8.ValidString(h.Value))
		}
	})
}

// requireCleanMessage checks the invariants every parsed message keeps.
func requireCleanMessage(t *testing.T, msg *Message) {
	t.Helper()

	require.NotNil(t, msg.To)
	require.NotNil(t, msg.Cc)
	require.NotNil(t, msg.Headers)
	require.NotNil(t, msg.Attachments)
	require.NotNil(t, msg.Links)
	require.NotNil(t, msg.Codes)
	require.LessOrEqual(t, len(msg.Links), MaxLinks)
	require.LessOrEqual(t, len(msg.Codes), MaxCodes)
	require.LessOrEqual(t, len(msg.Headers), MaxHeaders)
	for _, s := range []string{msg.Subject, msg.Text, msg.HTML, msg.From.Name, msg.From.Address} {
		require.True(t, utf8.ValidString(s))
		require.NotContains(t, s, "\x00")
	}
	for _, h := range msg.Headers {
		require.True(t, utf8.ValidString(h.Value))
		require.NotContains(t, h.Value, "\x00")
	}
	_, err := json.Marshal(msg)
	require.NoError(t, err)
}

// corpusDir returns the shared corpus of third-party samples, which lives
// outside the repository (internal/corpus: a missing corpus fails the test).
func corpusDir(t *testing.T) string {
	t.Helper()
	return corpus.Path(t, ".")
}

func TestParseCorpus(t *testing.T) {
	t.Parallel()

	dir := corpusDir(t)
	var count int
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, ".eml") {
			return err
		}
		count++
		raw, err := os.ReadFile(path)
		require.NoError(t, err)

		msg, err := Parse(raw)
		require.NoError(t, err, path)
		requireCleanMessage(t, msg)
		require.NotEmpty(t, msg.Headers, path)
		require.NotEmpty(t, msg.From.Address, path)
		return nil
	})
	require.NoError(t, err)
	require.NotZero(t, count, "no .eml files in the corpus")
}

func TestParseTestdata(t *testing.T) {
	t.Parallel()

	entries, err := os.ReadDir("testdata")
	require.NoError(t, err)
	for _, e := range entries {
		if !strings.HasSuffix(e.Name(), ".eml") {
			continue
		}
		raw := readTestdata(t, e.Name())
		msg, err := Parse(raw)
		require.NoError(t, err, e.Name())
		requireCleanMessage(t, msg)

		// The same message with bare LF line endings parses the same way,
		// except for the line endings in the bodies.
		lf, err := Parse(bytes.ReplaceAll(raw, []byte("\r\n"), []byte("\n")))
		require.NoError(t, err, e.Name())
		require.Equal(t, msg.Subject, lf.Subject, e.Name())
		require.Equal(t, msg.Attachments, lf.Attachments, e.Name())
		require.Equal(t, msg.Codes, lf.Codes, e.Name())
	}
}
