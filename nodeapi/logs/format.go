package logs

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"time"

	v1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/utils/clock"
)

const (
	// timeFormatIn is the timestamp format of a CRI log line.
	timeFormatIn = time.RFC3339Nano
	// TimestampFormat is the format of the timestamp prefix written with
	// PodLogOptions.Timestamps (the kubelet's RFC3339NanoFixed).
	TimestampFormat = "2006-01-02T15:04:05.000000000Z07:00"
	// blockSize is the unit in which the file is read backwards to find
	// the start of the last lines.
	blockSize = 1024
)

var (
	eol = []byte{'\n'}

	// errMaximumWrite stops a read when LimitBytes bytes have been written.
	errMaximumWrite = errors.New("maximum write")
	// errShortWrite is a writer that took fewer bytes than it was given.
	errShortWrite = errors.New("short write")
)

// Options are the log options of one read, made from a v1.PodLogOptions
// by NewOptions.
type Options struct {
	// Tail is the number of lines to read from the end of the file; -1
	// reads the whole file.
	Tail int64
	// Bytes is the maximum number of bytes written; -1 is no limit.
	Bytes int64
	// Since skips records older than it.
	Since time.Time
	// Follow waits for more lines until the container stops.
	Follow bool
	// Timestamps prefixes each line with its timestamp.
	Timestamps bool
	// Clock drives the periodic checks of a follow. Defaults to the real
	// clock.
	Clock clock.Clock
}

// NewOptions converts the API's log options into Options, with now as the
// reference for SinceSeconds, as the kubelet's NewLogOptions does: the
// later of SinceSeconds and SinceTime wins.
func NewOptions(apiOpts *v1.PodLogOptions, now time.Time) *Options {
	opts := &Options{
		Tail:       -1,
		Bytes:      -1,
		Follow:     apiOpts.Follow,
		Timestamps: apiOpts.Timestamps,
	}
	if apiOpts.TailLines != nil {
		opts.Tail = *apiOpts.TailLines
	}
	if apiOpts.LimitBytes != nil {
		opts.Bytes = *apiOpts.LimitBytes
	}
	if apiOpts.SinceSeconds != nil {
		opts.Since = now.Add(-time.Duration(*apiOpts.SinceSeconds) * time.Second)
	}
	if apiOpts.SinceTime != nil && apiOpts.SinceTime.After(opts.Since) {
		opts.Since = apiOpts.SinceTime.Time
	}
	return opts
}

// Message is one parsed CRI log record.
type Message struct {
	Timestamp time.Time
	Stream    runtimeapi.LogStreamType
	// Partial says the record is the start or middle of a longer line.
	Partial bool
	// Log is the content; a full record's ends with its newline.
	Log []byte
}

// ParseCRILog parses one line of a CRI log file, the newline included,
// into msg. msg.Log aliases line.
func ParseCRILog(line []byte, msg *Message) error {
	idx := bytes.IndexByte(line, ' ')
	if idx < 0 {
		return errors.New("logs: timestamp is not found")
	}
	ts, err := time.Parse(timeFormatIn, string(line[:idx]))
	if err != nil {
		return fmt.Errorf("logs: unexpected timestamp format %q: %w", timeFormatIn, err)
	}
	msg.Timestamp = ts

	line = line[idx+1:]
	idx = bytes.IndexByte(line, ' ')
	if idx < 0 {
		return errors.New("logs: stream type is not found")
	}
	msg.Stream = runtimeapi.LogStreamType(line[:idx])
	if msg.Stream != runtimeapi.Stdout && msg.Stream != runtimeapi.Stderr {
		return fmt.Errorf("logs: unexpected stream type %q", msg.Stream)
	}

	line = line[idx+1:]
	idx = bytes.IndexByte(line, ' ')
	if idx < 0 {
		return errors.New("logs: log tag is not found")
	}
	// Tags are ':'-separated; only the first is defined. Keep this
	// forward compatible.
	tag := line[:idx]
	if i := bytes.IndexByte(tag, ':'); i >= 0 {
		tag = tag[:i]
	}
	msg.Partial = runtimeapi.LogTag(tag) == runtimeapi.LogTagPartial
	// A partial record's newline only ends the record, not the line.
	if msg.Partial && len(line) > 0 && line[len(line)-1] == '\n' {
		line = line[:len(line)-1]
	}
	msg.Log = line[idx+1:]
	return nil
}

// ParseDockerJSONLog parses one line of a Docker JSON log file
// ({"log":"...","stream":"stdout","time":"..."}), the format the kubelet
// still reads when a file's first line is in it.
func ParseDockerJSONLog(line []byte, msg *Message) error {
	var l struct {
		Log     string    `json:"log,omitempty"`
		Stream  string    `json:"stream,omitempty"`
		Created time.Time `json:"time"`
	}
	if err := json.Unmarshal(line, &l); err != nil {
		return fmt.Errorf("logs: failed with %v to unmarshal log %q", err, line)
	}
	msg.Timestamp = l.Created
	msg.Stream = runtimeapi.LogStreamType(l.Stream)
	msg.Partial = false
	msg.Log = []byte(l.Log)
	return nil
}

// parseFunc returns the parser for a file whose first line is line: CRI,
// else Docker JSON; an error (the read fails) when neither parses it.
func parseFunc(line []byte) (func([]byte, *Message) error, error) {
	var m Message
	for _, p := range []func([]byte, *Message) error{ParseCRILog, ParseDockerJSONLog} {
		if err := p(line, &m); err == nil {
			return p, nil
		}
	}
	return nil, fmt.Errorf("failed to get parse function: unsupported log format: %q", line)
}

// writer writes parsed records to stdout and stderr, applying Since,
// Timestamps and Bytes.
type writer struct {
	stdout, stderr io.Writer
	opts           *Options
	remain         int64
	buf            []byte
}

func newWriter(stdout, stderr io.Writer, opts *Options) *writer {
	w := &writer{stdout: stdout, stderr: stderr, opts: opts, remain: math.MaxInt64}
	if opts.Bytes >= 0 {
		w.remain = opts.Bytes
	}
	return w
}

// write writes one record; addPrefix says it starts a new line.
func (w *writer) write(msg *Message, addPrefix bool) error {
	if msg.Timestamp.Before(w.opts.Since) {
		return nil
	}
	var stream io.Writer
	switch msg.Stream {
	case runtimeapi.Stdout:
		stream = w.stdout
	case runtimeapi.Stderr:
		stream = w.stderr
	default:
		return fmt.Errorf("logs: unexpected stream type %q", msg.Stream)
	}
	// A stream that was not asked for is neither written nor counted.
	if stream == nil {
		return nil
	}
	line := msg.Log
	if w.opts.Timestamps && addPrefix {
		w.buf = msg.Timestamp.AppendFormat(w.buf[:0], TimestampFormat)
		w.buf = append(w.buf, ' ')
		w.buf = append(w.buf, line...)
		line = w.buf
	}
	if int64(len(line)) > w.remain {
		line = line[:w.remain]
	}
	n, err := stream.Write(line)
	w.remain -= int64(n)
	if err != nil {
		return err
	}
	if n < len(line) {
		return errShortWrite
	}
	if w.remain <= 0 {
		return errMaximumWrite
	}
	return nil
}

// findTailLineStartIndex returns the offset of the start of the last n
// lines of f (the beginning of the file for n < 0). An incomplete last line
// (no newline yet) is not counted.
func findTailLineStartIndex(f io.ReadSeeker, n int64) (int64, error) {
	if n < 0 {
		return 0, nil
	}
	size, err := f.Seek(0, io.SeekEnd)
	if err != nil {
		return 0, err
	}
	var left, cnt int64
	buf := make([]byte, blockSize)
	for right := size; right > 0 && cnt <= n; right -= blockSize {
		left = right - blockSize
		if left < 0 {
			left = 0
			buf = make([]byte, right)
		}
		if _, err := f.Seek(left, io.SeekStart); err != nil {
			return 0, err
		}
		if _, err := io.ReadFull(f, buf); err != nil {
			return 0, err
		}
		cnt += int64(bytes.Count(buf, eol))
	}
	for ; cnt > n; cnt-- {
		idx := bytes.Index(buf, eol)
		buf = buf[idx+1:]
		left += int64(idx + 1)
	}
	return left, nil
}
