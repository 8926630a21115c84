// Package probe will hold the exec, HTTP, TCP and gRPC probers and the
// liveness, readiness and startup workers. For now it holds the result
// types the sync loop consumes.
package probe
