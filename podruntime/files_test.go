package podruntime

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

func TestMkdirs(t *testing.T) {
	root := t.TempDir()
	dir := filepath.Join(root, "pods", "uid", "containers", "c")
	if err := mkdirs(dir, 0o750); err != nil {
		t.Fatal(err)
	}
	for _, d := range []string{filepath.Join(root, "pods"), filepath.Join(root, "pods", "uid"), dir} {
		if fi, err := os.Stat(d); err != nil || !fi.IsDir() {
			t.Fatalf("%s: %v, want a directory", d, err)
		}
	}
	// Existing directories are fine; a file where a directory goes is not.
	if err := mkdirs(dir, 0o750); err != nil {
		t.Fatalf("again: %v", err)
	}
	file := filepath.Join(root, "file")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := mkdirs(file, 0o750); err == nil {
		t.Fatal("a file in place of the directory: no error")
	}
	if err := mkdirs(filepath.Join(file, "sub"), 0o750); err == nil {
		t.Fatal("a file in place of a parent: no error")
	}
}

func TestWriteFile(t *testing.T) {
	old := syscall.Umask(0o077)
	defer syscall.Umask(old)
	dir := t.TempDir()
	path := filepath.Join(dir, "f")
	if err := writeFile(path, []byte("a longer first content"), 0o666); err != nil {
		t.Fatal(err)
	}
	// Written again: truncated, and the mode is perm whatever the umask.
	if err := writeFile(path, []byte("second"), 0o666); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(path)
	if err != nil || string(b) != "second" {
		t.Fatalf("content %q, %v; want %q", b, err, "second")
	}
	fi, err := os.Stat(path)
	if err != nil || fi.Mode().Perm() != 0o666 {
		t.Fatalf("mode %v, %v; want 0666", fi.Mode(), err)
	}
	err = writeFile(filepath.Join(dir, "missing", "f"), nil, 0o644)
	var pe *fs.PathError
	if !errors.Is(err, fs.ErrNotExist) || !errors.As(err, &pe) || pe.Op != "open" {
		t.Fatalf("in a missing directory: %v, want a not-exist open error", err)
	}
}
