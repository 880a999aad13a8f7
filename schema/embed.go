// Package schema holds mailwatch's ordered SQL migrations. Files are named
// NNNN_description.sql and are applied in lexical order, each in its own
// transaction, by internal/migrate. sqlc reads the same files.
package schema

import "embed"

// FS contains every migration file.
//
//go:embed *.sql
var FS embed.FS
