// Package mimetest builds hostile MIME messages for the tests of every
// parser of inbound mail.
package mimetest

import (
	"bytes"
	"fmt"
)

// Nested is a message of n multipart/mixed parts nested one in the other,
// each with its own boundary and closed properly, around one text part.
// Nested(10000), issue 10's message, is about 727 KB.
func Nested(n int) []byte {
	var b bytes.Buffer
	b.WriteString("From: a@example.com\r\nSubject: deep\r\nMIME-Version: 1.0\r\n")
	for i := range n {
		fmt.Fprintf(&b, "Content-Type: multipart/mixed; boundary=\"b%04d\"\r\n\r\n--b%04d\r\n", i, i)
	}
	b.WriteString("Content-Type: text/plain\r\n\r\nhello\r\n")
	for i := n - 1; i >= 0; i-- {
		fmt.Fprintf(&b, "--b%04d--\r\n", i)
	}
	return b.Bytes()
}
