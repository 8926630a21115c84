package atomicwriter

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestValidate(t *testing.T) {
	for _, tc := range []struct {
		path string
		ok   bool
	}{
		{"key", true},
		{".hidden", true},
		{"sub/dir/file", true},
		{"a//b", true},
		{"./key", true},
		{"", false},
		{"/abs", false},
		{"..", false},
		{"a/../b", false},
		{"..data", false},
		{"..foo/bar", false},
		{"./..data", false},
		{".", false},
		{strings.Repeat("x", 256), false},
		{strings.Repeat("x/", 2049), false},
	} {
		name := tc.path
		if len(name) > 20 {
			name = name[:20] + "..."
		}
		t.Run(name, func(t *testing.T) {
			err := Validate(tc.path)
			if (err == nil) != tc.ok {
				t.Errorf("Validate(%q) = %v, want ok %v", tc.path, err, tc.ok)
			}
			if err != nil && !errors.Is(err, ErrInvalidPath) {
				t.Errorf("Validate(%q) = %v, not ErrInvalidPath", tc.path, err)
			}
		})
	}
}

// tree returns what a reader of dir sees: every regular file reached
// through the visible names, with its mode, and the names starting with
// "..".
func tree(t *testing.T, dir string) map[string]string {
	t.Helper()
	out := map[string]string{}
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), "..") {
			continue
		}
		root := filepath.Join(dir, e.Name())
		if fi, err := os.Stat(root); err == nil && fi.IsDir() {
			root += "/"
		}
		err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			fi, err := os.Stat(p)
			if err != nil {
				return err
			}
			if fi.IsDir() {
				return nil
			}
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			rel, _ := filepath.Rel(dir, filepath.Clean(p))
			out[rel] = fmt.Sprintf("%s %#o", b, fi.Mode().Perm())
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	return out
}

func current(t *testing.T, dir string) string {
	t.Helper()
	c, err := Current(dir)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func hidden(t *testing.T, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), "..") {
			out = append(out, e.Name())
		}
	}
	sort.Strings(out)
	return out
}

func write(t *testing.T, dir string, payload map[string]File, opts Options) bool {
	t.Helper()
	changed, err := Write(dir, payload, opts)
	if err != nil {
		t.Fatalf("Write: %v", err)
	}
	return changed
}

func TestWrite(t *testing.T) {
	old := syscall.Umask(0o077)
	defer syscall.Umask(old)
	dir := t.TempDir()

	first := map[string]File{
		"key":          {Data: []byte("v1"), Mode: 0o644},
		"sub/file":     {Data: []byte("nested"), Mode: 0o400},
		"sub/deep/x":   {Data: []byte("x"), Mode: 0o644},
		"./other/file": {Data: nil, Mode: 0o755},
	}
	if !write(t, dir, first, Options{}) {
		t.Fatal("first Write reported no change")
	}
	want := map[string]string{
		"key":        "v1 0644",
		"sub/file":   "nested 0400",
		"sub/deep/x": "x 0644",
		"other/file": " 0755",
	}
	if diff := cmp.Diff(want, tree(t, dir)); diff != "" {
		t.Errorf("files after the first Write (-want +got):\n%s", diff)
	}
	ts1 := current(t, dir)
	if !isTimestamped(ts1) {
		t.Errorf("..data points at %q, not a timestamped directory", ts1)
	}
	for _, name := range []string{"key", "sub", "other"} {
		target, err := os.Readlink(filepath.Join(dir, name))
		if err != nil || target != "..data/"+name {
			t.Errorf("%s is a link to %q (%v), want ..data/%s", name, target, err, name)
		}
	}
	fi, err := os.Stat(filepath.Join(dir, ts1, "sub", "deep"))
	if err != nil || fi.Mode().Perm() != 0o755 {
		t.Errorf("a directory of the payload: %v, %v; want mode 0755 whatever the umask", fi.Mode(), err)
	}

	// The same payload again: nothing is written.
	if write(t, dir, first, Options{}) {
		t.Error("Write of an unchanged payload reported a change")
	}
	if ts := current(t, dir); ts != ts1 {
		t.Errorf("..data moved from %s to %s for an unchanged payload", ts1, ts)
	}

	// A change of content: a new directory, the old one gone.
	second := map[string]File{
		"key":      {Data: []byte("v2"), Mode: 0o644},
		"sub/file": {Data: []byte("nested"), Mode: 0o400},
	}
	if !write(t, dir, second, Options{}) {
		t.Fatal("Write of a changed payload reported no change")
	}
	ts2 := current(t, dir)
	if ts2 == ts1 {
		t.Fatal("..data still points at the old directory")
	}
	want = map[string]string{"key": "v2 0644", "sub/file": "nested 0400"}
	if diff := cmp.Diff(want, tree(t, dir)); diff != "" {
		t.Errorf("files after the second Write (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{ts2, "..data"}, hidden(t, dir)); diff != "" {
		t.Errorf("hidden names (-want +got):\n%s", diff)
	}
	if _, err := os.Lstat(filepath.Join(dir, "other")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("the link of a removed top-level name is still there: %v", err)
	}

	// A change of mode only is a change.
	third := map[string]File{
		"key":      {Data: []byte("v2"), Mode: 0o600},
		"sub/file": {Data: []byte("nested"), Mode: 0o400},
	}
	if !write(t, dir, third, Options{}) {
		t.Error("Write of a payload whose mode changed reported no change")
	}
	// A file removed from a directory that stays.
	fourth := map[string]File{"key": {Data: []byte("v2"), Mode: 0o600}, "sub/other": {Data: []byte("o"), Mode: 0o644}}
	if !write(t, dir, fourth, Options{}) {
		t.Error("Write of a payload with a file renamed reported no change")
	}
	want = map[string]string{"key": "v2 0600", "sub/other": "o 0644"}
	if diff := cmp.Diff(want, tree(t, dir)); diff != "" {
		t.Errorf("files after the fourth Write (-want +got):\n%s", diff)
	}

	// An empty payload leaves only ..data and an empty directory.
	if !write(t, dir, nil, Options{}) {
		t.Error("Write of an empty payload reported no change")
	}
	if got := tree(t, dir); len(got) != 0 {
		t.Errorf("files after an empty Write: %v", got)
	}
	if write(t, dir, map[string]File{}, Options{}) {
		t.Error("a second empty Write reported a change")
	}
}

func TestWriteRemovesLeftovers(t *testing.T) {
	dir := t.TempDir()
	write(t, dir, map[string]File{"a": {Data: []byte("1"), Mode: 0o644}}, Options{})
	// A write that died after creating its directory, and a stale ..data_tmp.
	stale := filepath.Join(dir, "..2001_01_01_00_00_00.12345")
	if err := os.Mkdir(stale, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Base(stale), filepath.Join(dir, newDataDirName)); err != nil {
		t.Fatal(err)
	}
	// A file of someone else's is kept.
	if err := os.WriteFile(filepath.Join(dir, "..keep"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	write(t, dir, map[string]File{"a": {Data: []byte("2"), Mode: 0o644}}, Options{})
	if diff := cmp.Diff([]string{current(t, dir), "..data", "..keep"}, hidden(t, dir)); diff != "" {
		t.Errorf("hidden names (-want +got):\n%s", diff)
	}
}

func TestWriteRefuses(t *testing.T) {
	for _, tc := range []struct {
		name    string
		payload map[string]File
		setup   func(t *testing.T, dir string)
	}{
		{name: "reserved name", payload: map[string]File{"..data": {Mode: 0o644}}},
		{name: "absolute", payload: map[string]File{"/etc/passwd": {Mode: 0o644}}},
		{name: "escaping", payload: map[string]File{"a/../../b": {Mode: 0o644}}},
		{name: "file and directory", payload: map[string]File{"a": {Mode: 0o644}, "a/b": {Mode: 0o644}}},
		{name: "mode beyond permissions", payload: map[string]File{"a": {Mode: 0o4755}}},
		{
			name:    "a file in the way",
			payload: map[string]File{"a": {Mode: 0o644}},
			setup: func(t *testing.T, dir string) {
				if err := os.WriteFile(filepath.Join(dir, "a"), []byte("mine"), 0o644); err != nil {
					t.Fatal(err)
				}
			},
		},
		{
			name:    "..data not a timestamped directory",
			payload: map[string]File{"a": {Mode: 0o644}},
			setup: func(t *testing.T, dir string) {
				if err := os.Symlink("/etc", filepath.Join(dir, DataDirName)); err != nil {
					t.Fatal(err)
				}
			},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			if tc.setup != nil {
				tc.setup(t, dir)
			}
			before := hidden(t, dir)
			if _, err := Write(dir, tc.payload, Options{}); err == nil {
				t.Fatal("Write succeeded")
			}
			if diff := cmp.Diff(before, hidden(t, dir)); diff != "" {
				t.Errorf("a refused Write left hidden names (-before +after):\n%s", diff)
			}
		})
	}
}

func requireRoot(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root to change owners (CI runs as root)")
	}
}

func TestWriteOwners(t *testing.T) {
	requireRoot(t)
	dir := t.TempDir()
	gid, uid := int64(4242), int64(1001)
	payload := map[string]File{
		"token":    {Data: []byte("jwt"), Mode: 0o600, FsUser: &uid},
		"sub/conf": {Data: []byte("c"), Mode: 0o644},
	}
	write(t, dir, payload, Options{FSGroup: &gid})
	ts := filepath.Join(dir, current(t, dir))
	for _, tc := range []struct {
		path string
		mode fs.FileMode
		uid  int64
	}{
		{"token", 0o640, uid},
		{"sub/conf", 0o644, 0},
		{"sub", 0o755 | fs.ModeSetgid | fs.ModeDir, 0},
	} {
		fi, err := os.Lstat(filepath.Join(ts, tc.path))
		if err != nil {
			t.Fatal(err)
		}
		st := fi.Sys().(*syscall.Stat_t)
		if fi.Mode() != tc.mode || int64(st.Gid) != gid || int64(st.Uid) != tc.uid {
			t.Errorf("%s: mode %v uid %d gid %d, want %v uid %d gid %d", tc.path, fi.Mode(), st.Uid, st.Gid, tc.mode, tc.uid, gid)
		}
	}
	if write(t, dir, payload, Options{FSGroup: &gid}) {
		t.Error("an unchanged payload with an fsGroup was written again")
	}
	other := int64(4343)
	if !write(t, dir, payload, Options{FSGroup: &other}) {
		t.Error("a change of fsGroup was not written")
	}
}

// TestWriteAtomic reads the files while they are rewritten: a reader sees
// one version of each file whole, never a part, and through ..data one
// version of the whole set.
func TestWriteAtomic(t *testing.T) {
	dir := t.TempDir()
	const size = 64 << 10
	payload := func(v int) map[string]File {
		b := bytes.Repeat([]byte{byte('a' + v%26)}, size)
		return map[string]File{"a": {Data: b, Mode: 0o644}, "dir/b": {Data: b, Mode: 0o644}}
	}
	write(t, dir, payload(0), Options{})

	var stop atomic.Bool
	var reads, vanished atomic.Int64
	errs := make(chan error, 4)
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			for !stop.Load() {
				// Through ..data: both files of one version.
				ts, err := os.Readlink(filepath.Join(dir, DataDirName))
				if err != nil {
					errs <- err
					return
				}
				a, errA := os.ReadFile(filepath.Join(dir, ts, "a"))
				b, errB := os.ReadFile(filepath.Join(dir, ts, "dir", "b"))
				if errors.Is(errA, fs.ErrNotExist) || errors.Is(errB, fs.ErrNotExist) {
					// The old directory was removed after the swap.
					vanished.Add(1)
					continue
				}
				if errA != nil || errB != nil {
					errs <- errors.Join(errA, errB)
					return
				}
				if len(a) != size || !bytes.Equal(a, b) || bytes.Count(a, a[:1]) != size {
					errs <- fmt.Errorf("read a mix: len(a)=%d len(b)=%d", len(a), len(b))
					return
				}
				// Through the visible name: one whole version.
				v, err := os.ReadFile(filepath.Join(dir, "a"))
				if err == nil && (len(v) != size || bytes.Count(v, v[:1]) != size) {
					errs <- fmt.Errorf("read a partial file of %d bytes", len(v))
					return
				}
				reads.Add(1)
			}
		})
	}
	for v := 1; v <= 200; v++ {
		if !write(t, dir, payload(v), Options{}) {
			t.Fatalf("version %d not written", v)
		}
	}
	stop.Store(true)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if reads.Load() == 0 {
		t.Error("no read completed")
	}
	t.Logf("%d consistent reads, %d found their directory already replaced", reads.Load(), vanished.Load())
}
