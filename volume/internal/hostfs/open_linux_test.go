//go:build linux

package hostfs

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

func TestOpenNoSymlinks(t *testing.T) {
	root := tree(t, "a/b/", "a/file", "secret/", "a/link -> $ROOT/secret", "dirlink -> a", "a/rel -> ../secret")
	for _, tc := range []struct {
		name     string
		path     string
		wantErr  error
		wantType fs.FileMode
	}{
		{name: "the root", path: "/", wantType: fs.ModeDir},
		{name: "dir", path: root + "/a/b", wantType: fs.ModeDir},
		{name: "file", path: root + "/a/file", wantType: 0},
		{name: "char device", path: "/dev/null", wantType: fs.ModeDevice | fs.ModeCharDevice},
		{name: "symlink last", path: root + "/a/link", wantErr: syscall.ELOOP},
		{name: "relative symlink last", path: root + "/a/rel", wantErr: syscall.ELOOP},
		{name: "symlink in the middle", path: root + "/dirlink/b", wantErr: syscall.ELOOP},
		{name: "missing", path: root + "/a/missing", wantErr: syscall.ENOENT},
		{name: "relative", path: "a/b", wantErr: syscall.EINVAL},
		{name: "unclean", path: root + "/a//b", wantErr: syscall.EINVAL},
		{name: "dot-dot", path: root + "/a/../secret", wantErr: syscall.EINVAL},
		{name: "magic link", path: "/proc/self/root/etc", wantErr: syscall.ELOOP},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, open := range []struct {
				name string
				f    func(string) (int, error)
			}{{"openat2", OpenNoSymlinks}, {"walk", walkChecked}} {
				fd, err := open.f(tc.path)
				if tc.wantErr != nil {
					if !errors.Is(err, tc.wantErr) {
						t.Fatalf("%s(%s): err %v, want %v", open.name, tc.path, err, tc.wantErr)
					}
					continue
				}
				if err != nil {
					t.Fatalf("%s: %v", open.name, err)
				}
				typ, err := TypeFD(fd)
				if err != nil || typ != tc.wantType {
					t.Errorf("%s: TypeFD = %v, %v; want %v", open.name, typ, err, tc.wantType)
				}
				at, err := FDPath(fd)
				if err != nil || at != tc.path {
					t.Errorf("%s: FDPath = %q, %v; want %q", open.name, at, err, tc.path)
				}
				same, err := SameFile(fd, tc.path)
				if err != nil || !same {
					t.Errorf("%s: SameFile = %v, %v", open.name, same, err)
				}
				CloseFD(fd)
			}
		})
	}
}

// walkChecked is the fallback walk with OpenNoSymlinks's argument checks.
func walkChecked(p string) (int, error) {
	if !filepath.IsAbs(p) || filepath.Clean(p) != p || HasBackstep(p) {
		return -1, &fs.PathError{Op: "open", Path: p, Err: syscall.EINVAL}
	}
	return openWalk(p)
}

func TestFDPathFollowsTheFile(t *testing.T) {
	root := tree(t, "a/", "gone")
	fd, err := OpenNoSymlinks(root + "/a")
	if err != nil {
		t.Fatal(err)
	}
	defer CloseFD(fd)
	if err := os.Rename(root+"/a", root+"/moved"); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("/etc", root+"/a"); err != nil {
		t.Fatal(err)
	}
	if at, err := FDPath(fd); err != nil || at != root+"/moved" {
		t.Errorf("FDPath after a move = %q, %v; want %s", at, err, root+"/moved")
	}
	gfd, err := OpenNoSymlinks(root + "/gone")
	if err != nil {
		t.Fatal(err)
	}
	defer CloseFD(gfd)
	if err := os.Remove(root + "/gone"); err != nil {
		t.Fatal(err)
	}
	if at, err := FDPath(gfd); err == nil {
		t.Errorf("FDPath of a deleted file = %q, want an error", at)
	}
}

func TestRBindFD(t *testing.T) {
	requireRoot(t)
	root := tree(t, "src/sub/", "target/", "ro/")
	if err := MountTmpfs(filepath.Join(root, "src/sub"), 1<<20); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = UnmountAll(filepath.Join(root, "src")) })
	if err := os.WriteFile(filepath.Join(root, "src/sub/data"), []byte("below"), 0o644); err != nil {
		t.Fatal(err)
	}
	fd, err := OpenNoSymlinks(filepath.Join(root, "src"))
	if err != nil {
		t.Fatal(err)
	}
	defer CloseFD(fd)
	for _, tc := range []struct {
		target   string
		readOnly bool
	}{{"target", false}, {"ro", true}} {
		target := filepath.Join(root, tc.target)
		if err := RBindFD(fd, target, tc.readOnly); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = UnmountAll(target) })
		if got, err := os.ReadFile(filepath.Join(target, "sub/data")); err != nil || string(got) != "below" {
			t.Errorf("%s: the mount below the source shows %q, %v; want it carried by the bind", tc.target, got, err)
		}
		err := os.WriteFile(filepath.Join(target, "w"), nil, 0o644)
		if tc.readOnly && !errors.Is(err, syscall.EROFS) {
			t.Errorf("%s: write into a read-only bind: %v, want EROFS", tc.target, err)
		}
		if !tc.readOnly && err != nil {
			t.Errorf("%s: write into the bind: %v", tc.target, err)
		}
	}
}
