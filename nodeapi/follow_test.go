package nodeapi_test

import (
	"bufio"
	"context"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/nodekit/nodekit/internal/leakcheck"
	"github.com/nodekit/nodekit/nodeapi"
)

// followDuration is how long TestFollowMemoryFlat follows; the issue's
// target is a minute (go test -run TestFollowMemoryFlat ./nodeapi/
// -follow-duration=1m); CI runs the 10 s default.
var followDuration = flag.Duration("follow-duration", 10*time.Second, "how long TestFollowMemoryFlat runs its 10 log followers")

// TestFollowMemoryFlat runs 10 concurrent follow requests
// (/containerLogs?follow=true) against a log appended to all along, for
// -follow-duration, sampling the live heap each second: the heap of the
// last third of the run must not exceed that of the first third by more
// than 4 MiB, while the followers read every byte written (tens of MiB in
// all), so nothing the follows read is kept.
func TestFollowMemoryFlat(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: the follow memory test runs for -follow-duration")
	}
	const followers = 10
	f := newFixture(t)
	h, err := nodeapi.New(f.options(nil))
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	defer srv.Close()

	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	var wg sync.WaitGroup
	defer wg.Wait()

	// The followers count what they read.
	var read [followers]atomic.Int64
	for i := range followers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			req, err := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL+"/containerLogs/default/web/app?follow=true", nil)
			if err != nil {
				t.Error(err)
				return
			}
			resp, err := srv.Client().Do(req)
			if err != nil {
				t.Error(err)
				return
			}
			defer resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				t.Errorf("follower %d: %s", i, resp.Status)
				return
			}
			buf := make([]byte, 32<<10)
			for {
				n, err := resp.Body.Read(buf)
				read[i].Add(int64(n))
				if err != nil {
					return
				}
			}
		}()
	}

	// The writer appends 200 records of 100 bytes every 50 ms (400 kB/s);
	// wrote counts the message bytes (what the followers get).
	lf, err := os.OpenFile(f.logPath, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer lf.Close()
	w := bufio.NewWriter(lf)
	var wrote int64
	const msg = "the quick brown fox jumps over the lazy dog 0123456789 abcdefghijklmnopqrstuvwxyz\n"
	wrote = int64(len("hello\noops\n")) // the fixture's lines
	write := func() {
		for range 200 {
			fmt.Fprintf(w, "%s stdout F %s", time.Now().UTC().Format(time.RFC3339Nano), msg)
			wrote += int64(len(msg))
		}
		if err := w.Flush(); err != nil {
			t.Fatal(err)
		}
	}

	var samples []uint64
	writeTick := time.NewTicker(50 * time.Millisecond)
	defer writeTick.Stop()
	sampleTick := time.NewTicker(time.Second)
	defer sampleTick.Stop()
	// The run lasts -follow-duration, and until 9 samples at least (a
	// loaded machine may skip ticks).
	end := time.After(*followDuration)
	ended := false
	for !ended || len(samples) < 9 {
		select {
		case <-writeTick.C:
			write()
		case <-sampleTick.C:
			samples = append(samples, leakcheck.LiveHeap())
		case <-end:
			ended = true
		}
	}

	// Every follower reads all that was written before it ends.
	deadline := time.Now().Add(time.Minute)
	for i := range followers {
		for read[i].Load() < wrote {
			if time.Now().After(deadline) {
				t.Fatalf("follower %d read %d of %d bytes", i, read[i].Load(), wrote)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	cancel()
	wg.Wait()

	third := len(samples) / 3
	first, last := median(samples[:third]), median(samples[len(samples)-third:])
	t.Logf("%d followers read %.1f MiB each in %v; live heap: first third %.1f MiB, last third %.1f MiB, max %.1f MiB",
		followers, float64(wrote)/(1<<20), *followDuration, mib(first), mib(last), mib(slices.Max(samples)))
	if last > first+4<<20 {
		t.Errorf("the live heap grew from %.1f MiB to %.1f MiB while %d followers ran", mib(first), mib(last), followers)
	}
}

func median(s []uint64) uint64 {
	s = slices.Clone(s)
	slices.Sort(s)
	return s[len(s)/2]
}

func mib(v uint64) float64 { return float64(v) / (1 << 20) }

// TestFollowClientGoesAway: a follower that goes away mid-stream ends its
// request on the node, with no goroutine left behind, while the log is
// still being written.
func TestFollowClientGoesAway(t *testing.T) {
	defer leakcheck.VerifyNone(t, goleak.IgnoreCurrent())
	f := newFixture(t)
	h, err := nodeapi.New(f.options(nil))
	if err != nil {
		t.Fatal(err)
	}
	var active atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		active.Add(1)
		defer active.Add(-1)
		h.ServeHTTP(w, r)
	}))
	defer srv.Close()
	tr := &http.Transport{}
	defer tr.CloseIdleConnections()
	resp, err := (&http.Client{Transport: tr}).Get(srv.URL + "/containerLogs/default/web/app?follow=true")
	if err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, len("hello\noops\n"))
	if _, err := io.ReadFull(resp.Body, buf); err != nil || string(buf) != "hello\noops\n" {
		t.Fatalf("read %q, %v", buf, err)
	}
	// The client goes away: its connection closes.
	resp.Body.Close()
	tr.CloseIdleConnections()
	lf, err := os.OpenFile(f.logPath, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer lf.Close()
	deadline := time.Now().Add(30 * time.Second)
	for active.Load() != 0 {
		if time.Now().After(deadline) {
			t.Fatal("the follow request still runs 30 s after its client went away")
		}
		// More lines: the follow's write to the closed connection fails.
		fmt.Fprintf(lf, "%s stdout F more\n", time.Now().UTC().Format(time.RFC3339Nano))
		time.Sleep(10 * time.Millisecond)
	}
}
