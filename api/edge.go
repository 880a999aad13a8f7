package api

import (
	"bytes"
	"net"
	"net/http"

	"github.com/gofiber/fiber/v2"

	"github.com/mailwatch/mailwatch/internal/edge"
)

// edgeRules applies internal/edge's rules to every request, before routing:
// a body with a content coding is refused (415), so no handler's c.Body()
// ever decodes one.
func (s *Server) edgeRules(c *fiber.Ctx) error {
	var codings []string
	for _, v := range c.Request().Header.PeekAll(fiber.HeaderContentEncoding) {
		codings = append(codings, string(v))
	}
	hasBody := len(c.Request().Body()) > 0 // the bytes as sent: fasthttp never decodes here
	if err := edge.CheckContentEncoding(hasBody, codings...); err != nil {
		return &Error{Status: http.StatusUnsupportedMediaType, Detail: err.Error(),
			Headers: map[string]string{fiber.HeaderAcceptEncoding: edge.AcceptEncoding}}
	}
	return c.Next()
}

// dataAPIPrefix is where the data API answers, in PostgREST's error shape.
const dataAPIPrefix = "/rest/v1"

func isDataAPIPath(p []byte) bool {
	rest, ok := bytes.CutPrefix(p, []byte(dataAPIPrefix))
	return ok && (len(rest) == 0 || rest[0] == '/' || rest[0] == '?' || rest[0] == ' ')
}

// dataAPIRequest reports whether c is a data-API request, whose errors take
// PostgREST's shape. unparsed is true for an error fasthttp met before it
// could parse the request line (431, header fields too large): the path is
// then read from the first bytes of the request, which requestStartConn
// keeps.
func dataAPIRequest(c *fiber.Ctx, unparsed bool) bool {
	if !unparsed {
		return isDataAPIPath([]byte(c.Path()))
	}
	rc, ok := c.Context().Conn().(*requestStartConn)
	if !ok {
		return false
	}
	line := rc.start[:rc.n]
	_, target, ok := bytes.Cut(line, []byte(" "))
	return ok && isDataAPIPath(target)
}

// requestStartConn keeps the first bytes of the request being read on an
// HTTP/1 connection: those read since the last response was written (a
// client that pipelines requests is not followed; its errors keep the REST
// shape).
type requestStartConn struct {
	net.Conn
	start     [32]byte
	n         int
	recording bool
}

func (c *requestStartConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	if c.recording && n > 0 {
		c.n += copy(c.start[c.n:], p[:n])
		c.recording = c.n < len(c.start)
	}
	return n, err
}

func (c *requestStartConn) Write(p []byte) (int, error) {
	c.n, c.recording = 0, true
	return c.Conn.Write(p)
}

// requestStartListener wraps each accepted connection in a
// requestStartConn.
type requestStartListener struct{ net.Listener }

func (l requestStartListener) Accept() (net.Conn, error) {
	conn, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return &requestStartConn{Conn: conn, recording: true}, nil
}
