// Package atomicwriter projects a set of files into a directory so that a
// reader sees either the old set or the new one, never a mix and never a
// file half written: the kubelet's AtomicWriter, which the configMap,
// secret, downwardAPI and projected volume plugins share.
//
// # Layout
//
// The files live in a hidden timestamped directory; a symlink ..data points
// at it, and each top-level name of the payload is a symlink through
// ..data:
//
//	<dir>/..2024_05_01_10_00_00.123456789/   the current files
//	<dir>/..data -> ..2024_05_01_10_00_00.123456789
//	<dir>/key    -> ..data/key
//	<dir>/sub    -> ..data/sub                (for "sub/file")
//
// An update writes a new timestamped directory, then renames a new symlink
// over ..data (rename(2) is atomic), then removes the top-level links that
// are no longer in the payload and the old directory. Consumers that watch
// for updates watch ..data (inotify sees the rename). Names starting with
// ".." are reserved.
//
// # Concurrency
//
// Write must not be called concurrently for one directory: the volume
// manager never calls a plugin twice at once for the same pod. Readers may
// read at any time.
package atomicwriter
