package main

import (
	"fmt"
	"io"
	"runtime/debug"
)

// buildVersion describes the running binary from its build information:
// the module version (a tag, or "(devel)" for a checkout's build), then the
// VCS revision with "+dirty" when the tree had changes, and its time.
func buildVersion() string {
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return "unknown (no build information)"
	}
	v := info.Main.Version
	if v == "" {
		v = "(devel)"
	}
	var rev, at, dirty string
	for _, s := range info.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.time":
			at = s.Value
		case "vcs.modified":
			if s.Value == "true" {
				dirty = "+dirty"
			}
		}
	}
	if rev != "" {
		if len(rev) > 12 {
			rev = rev[:12]
		}
		v += " " + rev + dirty
		if at != "" {
			v += " " + at
		}
	} else {
		v += " (no VCS revision: built outside a checkout or with -buildvcs=false)"
	}
	return v + " " + info.GoVersion
}

func printVersion(w io.Writer) {
	fmt.Fprintf(w, "mailwatch %s\n", buildVersion())
}
