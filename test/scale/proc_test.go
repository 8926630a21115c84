package scale

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"
)

// clockTicks is USER_HZ, the unit of utime and stime in /proc/PID/stat:
// 100 on every Linux architecture Go runs on.
const clockTicks = 100

// procCPU returns the CPU (user and system) the process pid has used, from
// /proc/PID/stat, with its 10 ms resolution.
func procCPU(pid int) (time.Duration, error) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	return parseStatCPU(string(data))
}

// parseStatCPU reads utime and stime (fields 14 and 15) of a
// /proc/PID/stat line. The command name, field 2, is in parentheses and may
// hold spaces and parentheses: the fields are counted after its last ')'.
func parseStatCPU(stat string) (time.Duration, error) {
	i := strings.LastIndexByte(stat, ')')
	if i < 0 {
		return 0, errors.New("stat: no ')' after the command name")
	}
	f := strings.Fields(stat[i+1:])
	// f[0] is field 3 (state): utime is field 14, f[11].
	if len(f) < 13 {
		return 0, fmt.Errorf("stat: %d fields after the command name", len(f))
	}
	var ticks int64
	for _, s := range f[11:13] {
		v, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			return 0, fmt.Errorf("stat: %w", err)
		}
		ticks += v
	}
	return time.Duration(ticks) * time.Second / clockTicks, nil
}

// procRSS returns the resident set of process pid (VmRSS), in bytes.
func procRSS(pid int) (int64, error) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	return parseVmRSS(string(data))
}

func parseVmRSS(status string) (int64, error) {
	for line := range strings.Lines(status) {
		if rest, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			if err != nil {
				return 0, fmt.Errorf("VmRSS: %w", err)
			}
			return kb << 10, nil
		}
	}
	return 0, errors.New("no VmRSS in status")
}

// auditPolicy logs every write at Metadata level, once, when it completes,
// and nothing else.
const auditPolicy = `apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: [RequestReceived, ResponseStarted, Panic]
rules:
- level: Metadata
  verbs: [create, update, patch, delete, deletecollection]
- level: None
`

// auditWrite is what the benchmark reads of an audit event.
type auditWrite struct {
	Verb      string
	UserAgent string
	Resource  string // e.g. pods, pods/status
	Namespace string
	At        time.Time
}

// writeFilter selects the writes counted.
type writeFilter struct {
	// excludeAgents are User-Agent prefixes not counted: the benchmark's
	// own client, the API server's own writes.
	excludeAgents []string
	// namespace and resource, when set, must match; resource "pods"
	// matches pods and its subresources.
	namespace, resource string
	// from and to, when set, bound the request's receive time.
	from, to time.Time
}

func (f writeFilter) match(w auditWrite) bool {
	switch w.Verb {
	case "create", "update", "patch":
	default:
		return false
	}
	for _, p := range f.excludeAgents {
		if strings.HasPrefix(w.UserAgent, p) {
			return false
		}
	}
	if f.namespace != "" && w.Namespace != f.namespace {
		return false
	}
	if f.resource != "" && w.Resource != f.resource && !strings.HasPrefix(w.Resource, f.resource+"/") {
		return false
	}
	if !f.from.IsZero() && w.At.Before(f.from) {
		return false
	}
	if !f.to.IsZero() && w.At.After(f.to) {
		return false
	}
	return true
}

// countWrites counts the completed writes of an audit log (JSON lines)
// that f matches, and returns them by resource too. Lines it cannot read
// are skipped; a line longer than 1 MiB ends the count with an error.
func countWrites(r io.Reader, f writeFilter) (int, map[string]int, error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	n, by := 0, map[string]int{}
	for sc.Scan() {
		var ev struct {
			Stage     string
			Verb      string
			UserAgent string
			ObjectRef *struct {
				Resource, Subresource, Namespace string
			}
			RequestReceivedTimestamp time.Time
		}
		if err := json.Unmarshal(sc.Bytes(), &ev); err != nil || ev.Stage != "ResponseComplete" || ev.ObjectRef == nil {
			continue
		}
		w := auditWrite{Verb: ev.Verb, UserAgent: ev.UserAgent, Resource: ev.ObjectRef.Resource,
			Namespace: ev.ObjectRef.Namespace, At: ev.RequestReceivedTimestamp}
		if ev.ObjectRef.Subresource != "" {
			w.Resource += "/" + ev.ObjectRef.Subresource
		}
		if f.match(w) {
			n++
			by[w.Verb+" "+w.Resource]++
		}
	}
	return n, by, sc.Err()
}

func countWritesFile(path string, f writeFilter) (int, map[string]int, error) {
	fh, err := os.Open(path)
	if err != nil {
		return 0, nil, err
	}
	defer fh.Close()
	return countWrites(fh, f)
}
