package scale

import (
	"os"
	"strings"
	"syscall"
	"testing"
	"time"
)

func TestParseStatCPU(t *testing.T) {
	// A command name with spaces and parentheses; utime 250, stime 50 ticks.
	line := "4242 (a) b (c)) S 1 4242 4242 0 -1 4194560 100 0 0 0 250 50 0 0 20 0 9 0 123 456 789\n"
	got, err := parseStatCPU(line)
	if err != nil {
		t.Fatal(err)
	}
	if want := 3 * time.Second; got != want {
		t.Errorf("cpu %v, want %v", got, want)
	}
	for _, bad := range []string{"", "1 (x S 1 2", "1 (x) S 1 2 3", "1 (x) S 1 2 3 4 5 6 7 8 9 10 x 1 2"} {
		if _, err := parseStatCPU(bad); err == nil {
			t.Errorf("parseStatCPU(%q) did not fail", bad)
		}
	}
}

// TestProcCPU reads this process's CPU from /proc and checks it against
// getrusage, after burning some.
func TestProcCPU(t *testing.T) {
	var ru syscall.Rusage
	used := func() time.Duration {
		if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
			t.Fatal(err)
		}
		return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	}
	for end := time.Now().Add(30 * time.Second); used() < 300*time.Millisecond && time.Now().Before(end); {
	}
	got, err := procCPU(os.Getpid())
	if err != nil {
		t.Skipf("no /proc: %v", err)
	}
	want := used()
	if got < 250*time.Millisecond || got > want+50*time.Millisecond || got < want-100*time.Millisecond {
		t.Errorf("/proc says %v of CPU, getrusage %v", got, want)
	}
	rss, err := procRSS(os.Getpid())
	if err != nil || rss < 1<<20 {
		t.Errorf("rss %d, %v", rss, err)
	}
}

func TestCountWrites(t *testing.T) {
	const log = `{"kind":"Event","stage":"ResponseComplete","verb":"create","userAgent":"nodekit-scale-harness","objectRef":{"resource":"pods","namespace":"default","name":"p"},"requestReceivedTimestamp":"2026-01-01T00:00:01.000000Z"}
{"kind":"Event","stage":"ResponseComplete","verb":"patch","userAgent":"kwok/v0.0.0","objectRef":{"resource":"pods","subresource":"status","namespace":"default","name":"p"},"requestReceivedTimestamp":"2026-01-01T00:00:02.000000Z"}
{"kind":"Event","stage":"ResponseComplete","verb":"patch","userAgent":"hollow-nodes/v0.0.0","objectRef":{"resource":"pods","subresource":"status","namespace":"default","name":"q"},"requestReceivedTimestamp":"2026-01-01T00:00:03.000000Z"}
{"kind":"Event","stage":"ResponseComplete","verb":"delete","userAgent":"kwok/v0.0.0","objectRef":{"resource":"pods","namespace":"default","name":"p"},"requestReceivedTimestamp":"2026-01-01T00:00:04.000000Z"}
{"kind":"Event","stage":"ResponseComplete","verb":"update","userAgent":"kwok/v0.0.0","objectRef":{"resource":"leases","namespace":"kube-node-lease","name":"n"},"requestReceivedTimestamp":"2026-01-01T00:00:05.000000Z"}
{"kind":"Event","stage":"ResponseComplete","verb":"update","userAgent":"kube-apiserver/v1.37.2","objectRef":{"resource":"leases","namespace":"kube-system","name":"a"},"requestReceivedTimestamp":"2026-01-01T00:00:05.000000Z"}
{"kind":"Event","stage":"ResponseComplete","verb":"patch","userAgent":"kwok/v0.0.0","objectRef":{"resource":"podsx","namespace":"default","name":"p"},"requestReceivedTimestamp":"2026-01-01T00:00:06.000000Z"}
not json
`
	at := func(s int) time.Time { return time.Date(2026, 1, 1, 0, 0, s, 0, time.UTC) }
	exclude := []string{harnessAgent, "kube-apiserver/"}
	for _, c := range []struct {
		name string
		f    writeFilter
		want int
	}{
		{"all writes", writeFilter{}, 6},
		{"simulators' writes", writeFilter{excludeAgents: exclude}, 4},
		{"simulators' pod writes", writeFilter{excludeAgents: exclude, namespace: "default", resource: "pods"}, 2},
		{"from", writeFilter{excludeAgents: exclude, resource: "pods", from: at(3)}, 1},
		{"to", writeFilter{excludeAgents: exclude, resource: "pods", to: at(2)}, 1},
		{"window", writeFilter{excludeAgents: exclude, from: at(3), to: at(5)}, 2},
	} {
		got, by, err := countWrites(strings.NewReader(log), c.f)
		if err != nil {
			t.Fatal(err)
		}
		if got != c.want {
			t.Errorf("%s: %d writes (%v), want %d", c.name, got, by, c.want)
		}
	}
	// A line beyond the bound ends the count with an error.
	if _, _, err := countWrites(strings.NewReader(strings.Repeat("x", 2<<20)), writeFilter{}); err == nil {
		t.Error("a 2 MiB line did not fail")
	}
}
