package logs

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	goruntime "runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"
)

func TestParseCRILog(t *testing.T) {
	ts, _ := time.Parse(time.RFC3339Nano, "2016-10-20T18:39:20.57606443Z")
	for _, tc := range []struct {
		name    string
		line    string
		want    Message
		wantErr bool
	}{
		{name: "full stdout", line: "2016-10-20T18:39:20.57606443Z stdout F cri log\n",
			want: Message{Timestamp: ts, Stream: runtimeapi.Stdout, Log: []byte("cri log\n")}},
		{name: "full stderr", line: "2016-10-20T18:39:20.57606443Z stderr F cri log\n",
			want: Message{Timestamp: ts, Stream: runtimeapi.Stderr, Log: []byte("cri log\n")}},
		{name: "partial drops its newline", line: "2016-10-20T18:39:20.57606443Z stdout P cri log\n",
			want: Message{Timestamp: ts, Stream: runtimeapi.Stdout, Partial: true, Log: []byte("cri log")}},
		{name: "empty content", line: "2016-10-20T18:39:20.57606443Z stdout F \n",
			want: Message{Timestamp: ts, Stream: runtimeapi.Stdout, Log: []byte("\n")}},
		{name: "future tags", line: "2016-10-20T18:39:20.57606443Z stdout F:x:y log\n",
			want: Message{Timestamp: ts, Stream: runtimeapi.Stdout, Log: []byte("log\n")}},
		{name: "content keeps spaces", line: "2016-10-20T18:39:20.57606443Z stdout F  a  b \n",
			want: Message{Timestamp: ts, Stream: runtimeapi.Stdout, Log: []byte(" a  b \n")}},
		{name: "no timestamp", line: "nospace\n", wantErr: true},
		{name: "bad timestamp", line: "2016-10-20 stdout F x\n", wantErr: true},
		{name: "bad stream", line: "2016-10-20T18:39:20.57606443Z stdin F x\n", wantErr: true},
		{name: "no tag", line: "2016-10-20T18:39:20.57606443Z stdout\n", wantErr: true},
		{name: "no content", line: "2016-10-20T18:39:20.57606443Z stdout F\n", wantErr: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var got Message
			err := ParseCRILog([]byte(tc.line), &got)
			if (err != nil) != tc.wantErr {
				t.Fatalf("err = %v, want error %v", err, tc.wantErr)
			}
			if tc.wantErr {
				return
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

func FuzzParseCRILog(f *testing.F) {
	f.Add([]byte("2016-10-20T18:39:20.57606443Z stdout F cri log\n"))
	f.Add([]byte("2016-10-20T18:39:20.57606443Z stderr P x"))
	f.Fuzz(func(t *testing.T, line []byte) {
		var m Message
		if err := ParseCRILog(line, &m); err == nil && len(m.Log) > len(line) {
			t.Fatalf("content longer than the line")
		}
	})
}

// runningRuntime answers ContainerStatus with a state the test sets.
type runningRuntime struct {
	mu      sync.Mutex
	state   runtimeapi.ContainerState
	logPath string
	calls   int
}

func (r *runningRuntime) set(s runtimeapi.ContainerState) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.state = s
}

func (r *runningRuntime) ContainerStatus(_ context.Context, id string, _ bool) (*runtimeapi.ContainerStatusResponse, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.calls++
	return &runtimeapi.ContainerStatusResponse{Status: &runtimeapi.ContainerStatus{Id: id, State: r.state, LogPath: r.logPath}}, nil
}

const sampleLog = `2016-10-06T00:17:09.669794202Z stdout F line1
2016-10-06T00:17:10.669794202Z stderr F err1
2016-10-06T00:17:11.669794202Z stdout P part
2016-10-06T00:17:11.769794202Z stdout P ial
2016-10-06T00:17:11.869794202Z stdout F  line
garbage that is no CRI line
2016-10-06T00:17:12.669794202Z stderr F err2
2016-10-06T00:17:13.669794202Z stdout F line3
`

func writeLog(t testing.TB, content string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "0.log")
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestRead(t *testing.T) {
	since := func(s string) *metav1.Time {
		ts, err := time.Parse(time.RFC3339Nano, s)
		if err != nil {
			t.Fatal(err)
		}
		return &metav1.Time{Time: ts}
	}
	for _, tc := range []struct {
		name       string
		content    string
		opts       v1.PodLogOptions
		noStderr   bool
		noStdout   bool
		wantStdout string
		wantStderr string
	}{
		{name: "all", content: sampleLog,
			wantStdout: "line1\npartial line\nline3\n", wantStderr: "err1\nerr2\n"},
		{name: "tail 0", content: sampleLog, opts: v1.PodLogOptions{TailLines: ptr.To[int64](0)}},
		{name: "tail 1", content: sampleLog, opts: v1.PodLogOptions{TailLines: ptr.To[int64](1)},
			wantStdout: "line3\n"},
		{name: "tail counts file lines, not log lines", content: sampleLog, opts: v1.PodLogOptions{TailLines: ptr.To[int64](4)},
			wantStdout: " line\nline3\n", wantStderr: "err2\n"},
		{name: "tail beyond the file", content: sampleLog, opts: v1.PodLogOptions{TailLines: ptr.To[int64](100)},
			wantStdout: "line1\npartial line\nline3\n", wantStderr: "err1\nerr2\n"},
		{name: "limit bytes cuts a line", content: sampleLog, opts: v1.PodLogOptions{LimitBytes: ptr.To[int64](8)},
			wantStdout: "line1\n", wantStderr: "er"},
		{name: "limit bytes counts only the streams asked for", content: sampleLog, noStderr: true,
			opts: v1.PodLogOptions{LimitBytes: ptr.To[int64](10)}, wantStdout: "line1\npart"},
		{name: "since time keeps equal timestamps", content: sampleLog,
			opts:       v1.PodLogOptions{SinceTime: since("2016-10-06T00:17:12.669794202Z")},
			wantStdout: "line3\n", wantStderr: "err2\n"},
		{name: "since time inside a partial line", content: sampleLog,
			opts:       v1.PodLogOptions{SinceTime: since("2016-10-06T00:17:11.7Z")},
			wantStdout: "ial line\nline3\n", wantStderr: "err2\n"},
		{name: "timestamps once per line", content: sampleLog, opts: v1.PodLogOptions{Timestamps: true},
			wantStdout: "2016-10-06T00:17:09.669794202Z line1\n2016-10-06T00:17:11.669794202Z partial line\n2016-10-06T00:17:13.669794202Z line3\n",
			wantStderr: "2016-10-06T00:17:10.669794202Z err1\n2016-10-06T00:17:12.669794202Z err2\n"},
		{name: "timestamps padded to nanoseconds", content: "2016-10-06T00:17:09.5Z stdout F x\n2016-10-06T00:17:09Z stdout F y\n",
			opts:       v1.PodLogOptions{Timestamps: true},
			wantStdout: "2016-10-06T00:17:09.500000000Z x\n2016-10-06T00:17:09.000000000Z y\n"},
		{name: "timestamps count toward the limit", content: sampleLog,
			opts:       v1.PodLogOptions{Timestamps: true, LimitBytes: ptr.To[int64](33)},
			wantStdout: "2016-10-06T00:17:09.669794202Z li"},
		{name: "stdout only", content: sampleLog, noStderr: true, wantStdout: "line1\npartial line\nline3\n"},
		{name: "stderr only", content: sampleLog, noStdout: true, wantStderr: "err1\nerr2\n"},
		{name: "incomplete last line is written", content: "2016-10-06T00:17:09.669794202Z stdout F line1\n2016-10-06T00:17:10.669794202Z stdout F no newline",
			wantStdout: "line1\nno newline"},
		{name: "incomplete last line is not counted by tail", content: "2016-10-06T00:17:09.669794202Z stdout F line1\n2016-10-06T00:17:10.669794202Z stdout F no newline",
			opts: v1.PodLogOptions{TailLines: ptr.To[int64](1)}, wantStdout: "line1\n"},
		{name: "empty file", content: ""},
		{name: "a long file read backwards in blocks", content: strings.Repeat("2016-10-06T00:17:09.669794202Z stdout F "+strings.Repeat("x", 100)+"\n", 50),
			opts: v1.PodLogOptions{TailLines: ptr.To[int64](2)}, wantStdout: strings.Repeat(strings.Repeat("x", 100)+"\n", 2)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := writeLog(t, tc.content)
			var stdout, stderr bytes.Buffer
			var ow, ew = &stdout, &stderr
			opts := NewOptions(&tc.opts, time.Now())
			var err error
			switch {
			case tc.noStderr:
				err = Read(t.Context(), p, "id", opts, &runningRuntime{}, ow, nil)
			case tc.noStdout:
				err = Read(t.Context(), p, "id", opts, &runningRuntime{}, nil, ew)
			default:
				err = Read(t.Context(), p, "id", opts, &runningRuntime{}, ow, ew)
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.wantStdout, stdout.String()); diff != "" {
				t.Errorf("stdout (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.wantStderr, stderr.String()); diff != "" {
				t.Errorf("stderr (-want +got):\n%s", diff)
			}
		})
	}
}

func TestReadMissingFile(t *testing.T) {
	err := Read(t.Context(), filepath.Join(t.TempDir(), "none.log"), "id", NewOptions(&v1.PodLogOptions{}, time.Now()), &runningRuntime{}, &bytes.Buffer{}, nil)
	if err == nil || !strings.Contains(err.Error(), "none.log") {
		t.Fatalf("err = %v, want one naming the file", err)
	}
}

func TestNewOptions(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	later := metav1.NewTime(now.Add(-5 * time.Second))
	earlier := metav1.NewTime(now.Add(-time.Hour))
	for _, tc := range []struct {
		name string
		in   v1.PodLogOptions
		want Options
	}{
		{name: "defaults", want: Options{Tail: -1, Bytes: -1}},
		{name: "all set", in: v1.PodLogOptions{Follow: true, Timestamps: true, TailLines: ptr.To[int64](3), LimitBytes: ptr.To[int64](9), SinceSeconds: ptr.To[int64](60)},
			want: Options{Tail: 3, Bytes: 9, Follow: true, Timestamps: true, Since: now.Add(-time.Minute)}},
		{name: "later since time wins", in: v1.PodLogOptions{SinceSeconds: ptr.To[int64](60), SinceTime: &later},
			want: Options{Tail: -1, Bytes: -1, Since: later.Time}},
		{name: "later since seconds wins", in: v1.PodLogOptions{SinceSeconds: ptr.To[int64](60), SinceTime: &earlier},
			want: Options{Tail: -1, Bytes: -1, Since: now.Add(-time.Minute)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, *NewOptions(&tc.in, now)); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

// notifyBuffer is a buffer that signals each write.
type notifyBuffer struct {
	mu    sync.Mutex
	buf   bytes.Buffer
	wrote chan struct{}
}

func (b *notifyBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.buf.Write(p)
	select {
	case b.wrote <- struct{}{}:
	default:
	}
	return len(p), nil
}

func (b *notifyBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// waitFor waits until the buffer holds want, or the test times out.
func (b *notifyBuffer) waitFor(t *testing.T, want string, done <-chan error) {
	t.Helper()
	for b.String() != want {
		select {
		case <-b.wrote:
		case err := <-done:
			t.Fatalf("Read returned %v before writing %q (got %q)", err, want, b.String())
		case <-t.Context().Done():
			t.Fatalf("waiting for %q, got %q", want, b.String())
		}
	}
}

func appendFile(t *testing.T, p, s string) {
	t.Helper()
	f, err := os.OpenFile(p, os.O_APPEND|os.O_WRONLY|os.O_CREATE, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteString(s); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
}

// TestFollowRotation follows a log across a rotation (the file renamed
// away and created anew) and an incomplete line, and ends once the
// container has stopped. The periodic check uses a fake clock: only file
// events drive it.
func TestFollowRotation(t *testing.T) {
	p := writeLog(t, "2016-10-06T00:17:09.669794202Z stdout F one\n")
	rt := &runningRuntime{state: runtimeapi.ContainerState_CONTAINER_RUNNING}
	out := &notifyBuffer{wrote: make(chan struct{}, 1)}
	opts := NewOptions(&v1.PodLogOptions{Follow: true}, time.Now())
	clk := clocktesting.NewFakeClock(time.Now())
	opts.Clock = clk
	done := make(chan error, 1)
	go func() { done <- Read(t.Context(), p, "id", opts, rt, out, out) }()

	out.waitFor(t, "one\n", done)
	appendFile(t, p, "2016-10-06T00:17:10.669794202Z stdout F two\n2016-10-06T00:17:11.669794202Z stderr F thr")
	out.waitFor(t, "one\ntwo\n", done)
	appendFile(t, p, "ee\n")
	out.waitFor(t, "one\ntwo\nthree\n", done)
	// Rotate while the follow waits for a file event: the rotation's
	// events, not a check of the path at the end of the file, are seen.
	waitWaiting(t, clk, done)

	// Rotate as the kubelet's log manager does: rename, then a new file.
	if err := os.Rename(p, p+".20161006-001712"); err != nil {
		t.Fatal(err)
	}
	appendFile(t, p, "2016-10-06T00:17:12.669794202Z stdout F four\n")
	out.waitFor(t, "one\ntwo\nthree\nfour\n", done)

	appendFile(t, p, "2016-10-06T00:17:13.669794202Z stdout F five\n")
	out.waitFor(t, "one\ntwo\nthree\nfour\nfive\n", done)

	// Once the container has stopped, the next periodic check ends the
	// follow.
	rt.set(runtimeapi.ContainerState_CONTAINER_EXITED)
	for ended := false; !ended; {
		select {
		case err := <-done:
			if err != nil {
				t.Fatal(err)
			}
			ended = true
		case <-t.Context().Done():
			t.Fatal("follow did not end after the container stopped")
		default:
			if clk.HasWaiters() {
				clk.Step(forceCheckPeriod)
			}
			goruntime.Gosched()
		}
	}
	if got, want := out.String(), "one\ntwo\nthree\nfour\nfive\n"; got != want {
		t.Errorf("got %q, want %q", got, want)
	}
}

// waitWaiting waits until the follow waits for a file event or its
// periodic check (the fake clock has a waiter).
func waitWaiting(t *testing.T, clk *clocktesting.FakeClock, done <-chan error) {
	t.Helper()
	for !clk.HasWaiters() {
		select {
		case err := <-done:
			t.Fatalf("Read returned %v before it waited", err)
		case <-t.Context().Done():
			t.Fatal("Read did not wait")
		case <-time.After(time.Millisecond):
		}
	}
}

// gateWriter holds the first write until open is closed.
type gateWriter struct {
	*notifyBuffer
	held chan struct{}
	open chan struct{}
	once sync.Once
}

func (g *gateWriter) Write(p []byte) (int, error) {
	g.once.Do(func() {
		close(g.held)
		<-g.open
	})
	return g.notifyBuffer.Write(p)
}

// TestFollowRotationBeforeWatch rotates the log while the follow has not
// yet reached the end of the file, so before it watches the directory: no
// Create event is ever seen, and nothing but the path's check finds the
// new file (the periodic check runs on a fake clock that never moves). The
// old file is read to its end first: the runtime writes to it until it
// reopens its log.
func TestFollowRotationBeforeWatch(t *testing.T) {
	p := writeLog(t, "2016-10-06T00:17:09.669794202Z stdout F one\n")
	rt := &runningRuntime{state: runtimeapi.ContainerState_CONTAINER_RUNNING}
	out := &gateWriter{notifyBuffer: &notifyBuffer{wrote: make(chan struct{}, 1)}, held: make(chan struct{}), open: make(chan struct{})}
	opts := NewOptions(&v1.PodLogOptions{Follow: true}, time.Now())
	clk := clocktesting.NewFakeClock(time.Now())
	opts.Clock = clk
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- Read(ctx, p, "id", opts, rt, out, out) }()

	select {
	case <-out.held:
	case err := <-done:
		t.Fatalf("Read returned %v before writing", err)
	}
	if err := os.Rename(p, p+".20161006-001712"); err != nil {
		t.Fatal(err)
	}
	appendFile(t, p+".20161006-001712", "2016-10-06T00:17:10.669794202Z stdout F two\n")
	appendFile(t, p, "2016-10-06T00:17:11.669794202Z stdout F three\n")
	close(out.open)

	// Without the path's check the follow waits forever: bound the wait.
	want := "one\ntwo\nthree\n"
	deadline := time.After(30 * time.Second)
	for out.String() != want {
		select {
		case <-out.wrote:
		case err := <-done:
			t.Fatalf("Read returned %v before writing %q (got %q)", err, want, out.String())
		case <-deadline:
			t.Fatalf("the rotation before the watch was not followed: got %q, want %q", out.String(), want)
		}
	}
	cancel()
	<-done
	if got := out.String(); got != want {
		t.Errorf("got %q, want %q", got, want)
	}
}

// TestFollowCancel ends a follow by its context, as when the client goes
// away mid-stream.
func TestFollowCancel(t *testing.T) {
	p := writeLog(t, "2016-10-06T00:17:09.669794202Z stdout F one\n")
	rt := &runningRuntime{state: runtimeapi.ContainerState_CONTAINER_RUNNING}
	out := &notifyBuffer{wrote: make(chan struct{}, 1)}
	opts := NewOptions(&v1.PodLogOptions{Follow: true}, time.Now())
	clk := clocktesting.NewFakeClock(time.Now())
	opts.Clock = clk
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- Read(ctx, p, "id", opts, rt, out, out) }()
	out.waitFor(t, "one\n", done)
	clk.Step(forceCheckPeriod) // a periodic check, if one waits, reads again
	cancel()
	if err := <-done; err == nil {
		t.Fatal("a cancelled follow returned nil")
	}
}

// TestReadLongLines reads records longer than the reader's buffer.
func TestReadLongLines(t *testing.T) {
	long := strings.Repeat("x", 200<<10)
	p := writeLog(t, "2016-10-06T00:17:09.669794202Z stdout P "+long+"\n2016-10-06T00:17:10.669794202Z stdout F "+long+"\n2016-10-06T00:17:11.669794202Z stderr F short\n")
	var stdout, stderr bytes.Buffer
	if err := Read(t.Context(), p, "id", NewOptions(&v1.PodLogOptions{Timestamps: true}, time.Now()), &runningRuntime{}, &stdout, &stderr); err != nil {
		t.Fatal(err)
	}
	if want := "2016-10-06T00:17:09.669794202Z " + long + long + "\n"; stdout.String() != want {
		t.Errorf("stdout: %d bytes, want %d", stdout.Len(), len(want))
	}
	if want := "2016-10-06T00:17:11.669794202Z short\n"; stderr.String() != want {
		t.Errorf("stderr %q, want %q", stderr.String(), want)
	}
}

func TestReadFormats(t *testing.T) {
	for _, tc := range []struct {
		name, content string
		tail          *int64
		wantStdout    string
		wantErr       string
	}{
		{name: "docker json", content: `{"log":"one\n","stream":"stdout","time":"2016-10-20T18:39:20.57606443Z"}` + "\n" + `{"log":"two","stream":"stdout","time":"2016-10-20T18:39:21Z"}` + "\n",
			wantStdout: "one\ntwo"},
		{name: "first line in no format", content: "garbage\n2016-10-06T00:17:09.669794202Z stdout F line1\n",
			wantErr: "unsupported log format"},
		{name: "tail starting at a bad line", content: sampleLog, tail: ptr.To[int64](3), wantErr: "unsupported log format"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var stdout bytes.Buffer
			err := Read(t.Context(), writeLog(t, tc.content), "id", NewOptions(&v1.PodLogOptions{TailLines: tc.tail}, time.Now()), &runningRuntime{}, &stdout, &stdout)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil || stdout.String() != tc.wantStdout {
				t.Errorf("got %q, %v; want %q", stdout.String(), err, tc.wantStdout)
			}
		})
	}
}
