package hostfs

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestWithin(t *testing.T) {
	for _, tc := range []struct {
		path, base string
		want       bool
	}{
		{"/data", "/data", true},
		{"/data/x", "/data", true},
		{"/data/x/y", "/data", true},
		{"/database", "/data", false},
		{"/dat", "/data", false},
		{"/", "/data", false},
		{"/anything", "/", true},
		{"/", "/", true},
	} {
		t.Run(tc.path+" in "+tc.base, func(t *testing.T) {
			if got := Within(tc.path, tc.base); got != tc.want {
				t.Errorf("Within(%q, %q) = %v, want %v", tc.path, tc.base, got, tc.want)
			}
		})
	}
}

func TestHasBackstep(t *testing.T) {
	for p, want := range map[string]bool{
		"a/b":      false,
		"..":       true,
		"a/../b":   true,
		"a/..b":    false,
		"..a/b":    false,
		"/srv/../": true,
		"a/b/..":   true,
	} {
		if got := HasBackstep(p); got != want {
			t.Errorf("HasBackstep(%q) = %v, want %v", p, got, want)
		}
	}
}

// tree builds files, directories and symlinks under a temporary
// directory: "d/" is a directory, "l -> target" a symlink, anything else a
// file. It returns the directory, physical.
func tree(t *testing.T, entries ...string) string {
	t.Helper()
	root, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		switch {
		case strings.Contains(e, " -> "):
			name, target, _ := strings.Cut(e, " -> ")
			target = strings.ReplaceAll(target, "$ROOT", root)
			if err := os.Symlink(target, filepath.Join(root, name)); err != nil {
				t.Fatal(err)
			}
		case strings.HasSuffix(e, "/"):
			if err := os.MkdirAll(filepath.Join(root, e), 0o755); err != nil {
				t.Fatal(err)
			}
		default:
			if err := os.WriteFile(filepath.Join(root, e), nil, 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	return root
}

func TestResolve(t *testing.T) {
	root := tree(t,
		"a/b/", "a/file",
		"abs -> $ROOT/a",
		"rel -> a/b",
		"up -> a/b/../..",
		"dangling -> $ROOT/nowhere/deep",
		"chain1 -> chain2", "chain2 -> rel",
		"loop1 -> loop2", "loop2 -> loop1",
		"a/b/escape -> ../../../",
	)
	for _, tc := range []struct {
		name, path, want string
		err              error
	}{
		{name: "plain", path: "a/b", want: "a/b"},
		{name: "missing tail appended", path: "a/b/c/d", want: "a/b/c/d"},
		{name: "absolute link", path: "abs/b", want: "a/b"},
		{name: "relative link", path: "rel", want: "a/b"},
		{name: "link with dot-dot", path: "up/a", want: "a"},
		{name: "dangling link followed", path: "dangling/x", want: "nowhere/deep/x"},
		{name: "chain", path: "chain1/z", want: "a/b/z"},
		{name: "link leaving the tree", path: "a/b/escape", want: "<parent>"},
		{name: "loop", path: "loop1", err: syscall.ELOOP},
		{name: "component through a file", path: "a/file/x", err: syscall.ENOTDIR},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Resolve(filepath.Join(root, tc.path))
			if tc.err != nil {
				if !errors.Is(err, tc.err) {
					t.Fatalf("Resolve: err %v, want %v", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			want := filepath.Join(root, tc.want)
			if tc.want == "<parent>" {
				want = filepath.Dir(root)
			}
			if got != want {
				t.Errorf("Resolve(%s) = %s, want %s", tc.path, got, want)
			}
		})
	}
	if _, err := Resolve("relative"); err == nil {
		t.Error("Resolve of a relative path succeeded")
	}
}

func TestExistingPrefix(t *testing.T) {
	root := tree(t, "a/b/", "f")
	dir, missing, err := ExistingPrefix(filepath.Join(root, "a/b/c/d"))
	if err != nil {
		t.Fatal(err)
	}
	if dir != filepath.Join(root, "a/b") {
		t.Errorf("dir = %s, want %s/a/b", dir, root)
	}
	if diff := cmp.Diff([]string{"c", "d"}, missing); diff != "" {
		t.Errorf("missing (-want +got):\n%s", diff)
	}
	if _, _, err := ExistingPrefix(filepath.Join(root, "f/x")); !errors.Is(err, syscall.ENOTDIR) {
		t.Errorf("through a file: err %v, want ENOTDIR", err)
	}
}

func TestMkdirNoFollow(t *testing.T) {
	root := tree(t, "base/", "outside/", "base/link -> $ROOT/outside")
	if err := MkdirNoFollow(filepath.Join(root, "base"), []string{"x", "y"}, 0o711); err != nil {
		t.Fatal(err)
	}
	for _, d := range []string{"base/x", "base/x/y"} {
		fi, err := os.Stat(filepath.Join(root, d))
		if err != nil {
			t.Fatal(err)
		}
		if fi.Mode().Perm() != 0o711 {
			t.Errorf("%s mode %v, want 0711 whatever the umask", d, fi.Mode().Perm())
		}
	}
	// A symlink where a directory is to be created is not followed.
	err := MkdirNoFollow(filepath.Join(root, "base"), []string{"link", "z"}, 0o755)
	if err == nil {
		t.Fatal("MkdirNoFollow went through a symlink")
	}
	if _, err := os.Lstat(filepath.Join(root, "outside/z")); err == nil {
		t.Error("a directory was created through the symlink")
	}
}

func TestCreateFileNoFollow(t *testing.T) {
	root := tree(t, "dir/", "target", "dir/link -> $ROOT/target")
	created, err := CreateFileNoFollow(filepath.Join(root, "dir/new"), 0o640)
	if err != nil || !created {
		t.Fatalf("CreateFileNoFollow = %v, %v; want created", created, err)
	}
	fi, err := os.Stat(filepath.Join(root, "dir/new"))
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode() != 0o640 {
		t.Errorf("mode %v, want 0640", fi.Mode())
	}
	created, err = CreateFileNoFollow(filepath.Join(root, "dir/new"), 0o640)
	if err != nil || created {
		t.Errorf("existing file: CreateFileNoFollow = %v, %v; want not created, no error", created, err)
	}
	// An existing symlink is left alone (and reported as existing).
	created, err = CreateFileNoFollow(filepath.Join(root, "dir/link"), 0o644)
	if err != nil || created {
		t.Errorf("symlink: CreateFileNoFollow = %v, %v; want not created, no error", created, err)
	}
}

func TestOpenBeneath(t *testing.T) {
	root := tree(t, "vol/a/b/", "vol/a/file", "secret", "vol/a/link -> $ROOT/secret", "vol/dirlink -> a")
	base := filepath.Join(root, "vol")
	for _, tc := range []struct {
		name    string
		rel     []string
		wantErr error
	}{
		{name: "base", rel: nil},
		{name: "dir", rel: []string{"a", "b"}},
		{name: "file", rel: []string{"a", "file"}},
		{name: "symlink last", rel: []string{"a", "link"}, wantErr: syscall.ELOOP},
		{name: "symlink in the middle", rel: []string{"dirlink", "b"}, wantErr: syscall.ELOOP},
		{name: "dot-dot", rel: []string{"a", ".."}, wantErr: syscall.EINVAL},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fd, err := OpenBeneath(base, tc.rel)
			if tc.wantErr != nil {
				if !errors.Is(err, tc.wantErr) {
					t.Fatalf("OpenBeneath(%v): err %v, want %v", tc.rel, err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			defer CloseFD(fd)
			same, err := SameFile(fd, filepath.Join(append([]string{base}, tc.rel...)...))
			if err != nil || !same {
				t.Errorf("SameFile = %v, %v; want the opened file", same, err)
			}
		})
	}
}

func TestParseMountInfo(t *testing.T) {
	in := strings.Join([]string{
		"22 27 0:21 / /proc rw,relatime - proc proc rw",
		"36 35 98:0 /mnt1 /mnt\\040two rw,noatime master:1 shared:2 - ext3 /dev/root rw,errors=continue",
		"40 36 0:50 / /var/lib/x\\134y rw - tmpfs tmpfs rw,size=1024k",
		"",
	}, "\n")
	got, err := ParseMountInfo(strings.NewReader(in))
	if err != nil {
		t.Fatal(err)
	}
	want := []MountInfo{
		{MountPoint: "/proc", FSType: "proc", Source: "proc", Options: "rw,relatime"},
		{MountPoint: "/mnt two", FSType: "ext3", Source: "/dev/root", Options: "rw,noatime"},
		{MountPoint: `/var/lib/x\y`, FSType: "tmpfs", Source: "tmpfs", Options: "rw"},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("ParseMountInfo (-want +got):\n%s", diff)
	}
	for _, bad := range []string{
		"1 2 3 4 5",
		"22 27 0:21 / /proc rw,relatime shared:1 x y z",
	} {
		if _, err := ParseMountInfo(strings.NewReader(bad)); err == nil {
			t.Errorf("ParseMountInfo(%q) succeeded", bad)
		}
	}
}

func FuzzParseMountInfo(f *testing.F) {
	f.Add("36 35 98:0 /mnt1 /mnt\\040two rw,noatime master:1 - ext3 /dev/root rw,errors=continue\n")
	f.Add("22 27 0:21 / /proc rw,relatime - proc proc rw")
	f.Add("\\")
	f.Fuzz(func(t *testing.T, s string) {
		mounts, err := ParseMountInfo(strings.NewReader(s))
		if err != nil {
			return
		}
		if lines := strings.Count(s, "\n") + 1; len(mounts) > lines {
			t.Errorf("%d mounts from %d lines", len(mounts), lines)
		}
	})
}

func TestUnder(t *testing.T) {
	mounts := []MountInfo{
		{MountPoint: "/"},
		{MountPoint: "/pods/a"},
		{MountPoint: "/pods/a/x/y"},
		{MountPoint: "/pods/ab"},
		{MountPoint: "/pods/a/x", Source: "first"},
		{MountPoint: "/pods/a/x", Source: "second"},
	}
	var got []string
	for _, m := range Under(mounts, "/pods/a") {
		got = append(got, m.MountPoint+m.Source)
	}
	want := []string{"/pods/a/x/y", "/pods/a/xsecond", "/pods/a/xfirst", "/pods/a"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Under (-want +got):\n%s", diff)
	}
}

func requireRoot(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root to mount (CI runs as root)")
	}
}

func TestMountsAndRemoveAllUnmounted(t *testing.T) {
	requireRoot(t)
	root := tree(t, "pod/volumes/v/", "pod/volumes/v/file", "pod/plugins/")
	mnt := filepath.Join(root, "pod/plugins")
	if err := MountTmpfs(mnt, 1<<20); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = Unmount(mnt) })
	ok, typ, err := IsMountPoint(mnt)
	if err != nil || !ok || typ != "tmpfs" {
		t.Fatalf("IsMountPoint = %v, %q, %v; want a tmpfs", ok, typ, err)
	}
	if ok, _, _ := IsMountPoint(filepath.Join(root, "pod")); ok {
		t.Error("the pod directory is reported as a mount point")
	}
	err = RemoveAllUnmounted(filepath.Join(root, "pod"))
	if !errors.Is(err, ErrMounted) {
		t.Fatalf("RemoveAllUnmounted with a mount below: err %v, want ErrMounted", err)
	}
	if _, err := os.Stat(filepath.Join(root, "pod/volumes/v/file")); err != nil {
		t.Errorf("something was removed: %v", err)
	}
	if err := UnmountAll(filepath.Join(root, "pod")); err != nil {
		t.Fatal(err)
	}
	if err := RemoveAllUnmounted(filepath.Join(root, "pod")); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Lstat(filepath.Join(root, "pod")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("pod directory still there: %v", err)
	}
	if err := RemoveAllUnmounted(filepath.Join(root, "pod")); err != nil {
		t.Errorf("removing a missing directory: %v", err)
	}
}

func TestBindFD(t *testing.T) {
	requireRoot(t)
	root := tree(t, "src/", "src/data", "target/")
	if err := os.WriteFile(filepath.Join(root, "src/data"), []byte("hello"), 0o644); err != nil {
		t.Fatal(err)
	}
	fd, err := OpenBeneath(root, []string{"src"})
	if err != nil {
		t.Fatal(err)
	}
	// Swap the source for a symlink once it is open: the bind still shows
	// the opened directory.
	if err := os.Rename(filepath.Join(root, "src"), filepath.Join(root, "moved")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("/etc", filepath.Join(root, "src")); err != nil {
		t.Fatal(err)
	}
	target := filepath.Join(root, "target")
	if err := BindFD(fd, target); err != nil {
		t.Fatal(err)
	}
	CloseFD(fd)
	t.Cleanup(func() { _ = Unmount(target) })
	got, err := os.ReadFile(filepath.Join(target, "data"))
	if err != nil || string(got) != "hello" {
		t.Errorf("bound directory shows %q, %v; want the opened directory's file", got, err)
	}
}
