// Package hostfs holds the host filesystem operations the volume packages
// share: resolving symlinks without trusting the path, creating and opening
// files without following symlinks, bind-mounting an open file, tmpfs
// mounts, and reading /proc/self/mountinfo.
//
// Paths given to it are absolute and clean unless a function says
// otherwise. Mount operations exist on Linux only; elsewhere they return
// ErrUnsupported.
package hostfs
