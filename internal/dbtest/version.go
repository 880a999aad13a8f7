package dbtest

import "runtime/debug"

// riverVersion returns the River module version the binary was built with,
// so that a River upgrade rebuilds the template database.
func riverVersion() string {
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return "unknown"
	}
	for _, dep := range info.Deps {
		if dep.Path == "github.com/riverqueue/river" {
			return dep.Version
		}
	}
	return "unknown"
}
