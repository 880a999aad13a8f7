// Package web holds the dashboard's templates and static assets, embedded
// in the binary: the API serves them at / (api/web.go). No build step: the
// files here are what the browser gets.
package web

import "embed"

// Files holds templates/*.html (html/template) and static/ (CSS, JS).
//
//go:embed templates static
var Files embed.FS
