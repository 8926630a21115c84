package backend

import (
	"bytes"
	"io"
	"os"
	"path/filepath"
	"sync"
	"time"
)

// MaxLogLineSize is the longest log line written in one piece; longer
// lines are split into partial ("P") lines, as containerd's default
// max_container_log_line_size does.
const MaxLogLineSize = 16 * 1024

// LogWriter turns the output of one stream (stdout or stderr) into CRI log
// lines, the format containerd writes and the kubelet reads:
//
//	2026-12-01T14:00:00.123456789Z stdout F hello
//
// Each line is written with a single Write to the underlying writer, so the
// two streams of a container may share one file (as OpenLogFile returns). A
// line longer than MaxLogLineSize is written as "P" (partial) pieces and a
// final "F" piece. Close writes what is left of an unterminated line as a
// partial line, as containerd does.
//
// A LogWriter is safe for concurrent use.
type LogWriter struct {
	mu     sync.Mutex
	w      io.Writer
	prefix []byte // " stdout " after the time
	buf    []byte
	line   []byte
	now    func() time.Time
}

// NewLogWriter returns a LogWriter of stream ("stdout" or "stderr") to w.
func NewLogWriter(w io.Writer, stream string) *LogWriter {
	return &LogWriter{w: w, prefix: []byte(" " + stream + " "), now: time.Now}
}

// OpenLogFile opens (creating it and its directory) the log file at path
// for appending, as a container's log file.
func OpenLogFile(path string) (*os.File, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return nil, err
	}
	return os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o640)
}

// Write implements io.Writer: complete lines are written at once, the rest
// is kept for the next Write or Close.
func (l *LogWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := len(p)
	for len(p) > 0 {
		i := bytes.IndexByte(p, '\n')
		if i < 0 {
			l.buf = append(l.buf, p...)
			for len(l.buf) >= MaxLogLineSize {
				if err := l.emit('P', l.buf[:MaxLogLineSize]); err != nil {
					return n, err
				}
				l.buf = append(l.buf[:0], l.buf[MaxLogLineSize:]...)
			}
			return n, nil
		}
		l.buf = append(l.buf, p[:i]...)
		p = p[i+1:]
		for len(l.buf) > MaxLogLineSize {
			if err := l.emit('P', l.buf[:MaxLogLineSize]); err != nil {
				return n, err
			}
			l.buf = append(l.buf[:0], l.buf[MaxLogLineSize:]...)
		}
		if err := l.emit('F', l.buf); err != nil {
			return n, err
		}
		l.buf = l.buf[:0]
	}
	return n, nil
}

// Close writes an unterminated last line, if any, as a partial ("P") line,
// as containerd does at the end of a stream. It does not close the
// underlying writer.
func (l *LogWriter) Close() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.buf) == 0 {
		return nil
	}
	err := l.emit('P', l.buf)
	l.buf = l.buf[:0]
	return err
}

func (l *LogWriter) emit(tag byte, content []byte) error {
	l.line = l.now().AppendFormat(l.line[:0], time.RFC3339Nano)
	l.line = append(l.line, l.prefix...)
	l.line = append(l.line, tag, ' ')
	l.line = append(l.line, content...)
	l.line = append(l.line, '\n')
	_, err := l.w.Write(l.line)
	return err
}
