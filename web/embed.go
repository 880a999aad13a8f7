// Package web is the dashboard: server-rendered pages at / for people,
// beside the REST API (package api) for programs, on the same Fiber app and
// the same storage. Mount adds its routes after the API's. Sign-in makes a
// server-side session (schema 0016); every page and action calls the API's
// own operations (api.Ops) for the session's account, so that a rule of
// the API has no second implementation here.
//
// The dashboard's routes are deliberately not in /openapi.json: they answer
// HTML (and two JSON feeds for the pages' own scripts) to a browser holding
// a session cookie, not to an API key, and their shape may change with the
// pages. Dashboard.Routes lists them so the OpenAPI test can tell them
// apart.
//
// Its templates and static assets are embedded in the binary. No build
// step: the files here are what the browser gets.
package web

import "embed"

// Files holds templates/*.html (html/template) and static/ (CSS, JS).
//
//go:embed templates static
var Files embed.FS
