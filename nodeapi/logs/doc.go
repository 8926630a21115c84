// Package logs reads container logs from the CRI log files the runtime
// writes under the pod logs directory, and writes them out as the kubelet
// does for `kubectl logs`: the same bytes for the same files and the same
// v1.PodLogOptions.
//
// # Usage
//
//	opts := logs.NewOptions(&v1.PodLogOptions{Follow: true, TailLines: &ten}, time.Now())
//	err := logs.Read(ctx, status.GetLogPath(), containerID, opts, runtimeService, stdout, stderr)
//
// Provider puts the pieces together for a pod: it picks the container
// instance from the pod status (the current one, or the previous one with
// PodLogOptions.Previous), asks the runtime for its log path, and reads it.
//
// # Format
//
// A CRI log line is "TIMESTAMP STREAM TAG CONTENT\n": an RFC 3339 time
// with nanoseconds, "stdout" or "stderr", and a tag whose first element
// is "F" (a full line) or "P" (a partial line, continued by the next
// record; its trailing newline is not part of the content). Lines that do
// not parse are skipped, as the kubelet skips them, but a first line that
// does not parse fails the read ("unsupported log format"); a file whose
// first line is Docker JSON ({"log":...,"stream":...,"time":...}) is read
// as Docker JSON, as the kubelet still does. TailLines counts lines
// of the file (a long line split into partial records counts once per
// record), SinceTime and SinceSeconds compare with each record's timestamp,
// LimitBytes counts the bytes written (timestamps included), and
// Timestamps prefixes each new line with its time as
// 2006-01-02T15:04:05.000000000Z07:00.
//
// # Follow
//
// With Follow, Read waits at the end of the file for it to grow (an
// fsnotify watch on its directory, and a check every second), reopens the
// file when the runtime rotates it (the path names a new file once the old
// one is read to its end), and returns once the container is no longer
// running and the file holds nothing more, or when the context ends.
//
// # Differences from the kubelet
//
// The logic is that of k8s.io/cri-client/pkg/logs, the kubelet's, which
// nodekit does not import (it brings OpenTelemetry and component-base, and
// takes the whole CRI interface and klog's logger); the output was
// compared byte for byte with it. Lines are read in place rather than
// copied.
// A rotation is found by comparing the file the path names with the open
// one at each end of the file, not only by a Create event for the log's
// name: the kubelet arms its watch at the first end of the file, so it
// misses a rotation that comes before, and its follow then stalls until
// the container stops.
// The clock is injected (Options.Clock) so that the periodic
// checks of a follow can be tested without waiting.
package logs
