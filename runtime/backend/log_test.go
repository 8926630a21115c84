package backend

import (
	"bytes"
	"strings"
	"testing"
	"time"
)

func TestLogWriter(t *testing.T) {
	var out bytes.Buffer
	w := NewLogWriter(&out, "stdout")
	w.now = func() time.Time { return time.Date(2026, 12, 1, 14, 0, 0, 123456789, time.UTC) }
	long := strings.Repeat("x", MaxLogLineSize+10)
	for _, chunk := range []string{"hel", "lo\nsecond\n\n", long, "\nend"} {
		if _, err := w.Write([]byte(chunk)); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	ts := "2026-12-01T14:00:00.123456789Z stdout "
	want := ts + "F hello\n" + ts + "F second\n" + ts + "F \n" +
		ts + "P " + long[:MaxLogLineSize] + "\n" + ts + "F " + long[MaxLogLineSize:] + "\n" + ts + "P end\n"
	if got := out.String(); got != want {
		t.Errorf("log =\n%q\nwant\n%q", got, want)
	}
}
