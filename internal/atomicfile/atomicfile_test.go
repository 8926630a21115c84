package atomicfile

import (
	"os"
	"path/filepath"
	"testing"
)

// TestWriteFile: the file gets the new content, mode 0600, its missing
// directory is created, and no temporary file is left; a failed write
// leaves the old content.
func TestWriteFile(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "a", "b")
	path := filepath.Join(dir, "state.json")
	for _, content := range []string{"one", "two"} {
		if err := WriteFile(path, []byte(content), 0o700); err != nil {
			t.Fatal(err)
		}
		got, err := os.ReadFile(path)
		if err != nil || string(got) != content {
			t.Fatalf("content %q, %v; want %q", got, err, content)
		}
	}
	fi, err := os.Stat(path)
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("mode %v, %v; want 0600", fi.Mode(), err)
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 1 {
		t.Errorf("%d files in the directory, want 1 (no temporary file left)", len(entries))
	}

	// A directory in path's place: the rename fails, nothing is left.
	blocked := filepath.Join(dir, "blocked")
	if err := os.MkdirAll(filepath.Join(blocked, "x"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := WriteFile(blocked, []byte("three"), 0o700); err == nil {
		t.Error("writing over a non-empty directory succeeded")
	}
	entries, _ = os.ReadDir(dir)
	if len(entries) != 2 {
		t.Errorf("%d entries after a failed write, want 2 (no temporary file left)", len(entries))
	}
}
