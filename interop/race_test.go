//go:build race

package interop

// raceBuild reports whether the tests run under the race detector.
const raceBuild = true
