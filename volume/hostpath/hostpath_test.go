package hostpath_test

import (
	"errors"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"

	"github.com/nodekit/nodekit/volume"
	"github.com/nodekit/nodekit/volume/hostpath"
	"github.com/nodekit/nodekit/volume/volumetest"
)

// hostDir returns a physical temporary directory.
func hostDir(t *testing.T) string {
	t.Helper()
	d, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func hostPathVolume(name, path string, typ v1.HostPathType) *v1.Volume {
	v := &v1.Volume{Name: name, VolumeSource: v1.VolumeSource{HostPath: &v1.HostPathVolumeSource{Path: path}}}
	if typ != "" || name == "typed" {
		v.HostPath.Type = &typ
	}
	return v
}

// podMounting is a pod whose container mounts the volume, read-only or
// not.
func podMounting(vol *v1.Volume, readOnly bool) *v1.Pod {
	return &v1.Pod{Spec: v1.PodSpec{
		Volumes: []v1.Volume{*vol},
		Containers: []v1.Container{{Name: "app", VolumeMounts: []v1.VolumeMount{
			{Name: vol.Name, MountPath: "/mnt", ReadOnly: readOnly},
		}}},
	}}
}

// binds reports whether the plugins of these tests bind host paths: as
// root (CI runs the tests as root); otherwise they run with NoBind.
func binds() bool { return os.Geteuid() == 0 }

// newPlugin returns the plugin, with NoBind when the tests cannot mount.
func newPlugin(t *testing.T, opts hostpath.Options) *hostpath.Plugin {
	t.Helper()
	opts.NoBind = opts.NoBind || !binds()
	p, err := hostpath.New(opts)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// setUp sets the volume up in a fresh volume directory, torn down when the
// test ends.
func setUp(t *testing.T, p *hostpath.Plugin, vol *v1.Volume, readOnlyMounts bool) (volume.Mount, error) {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "volumes", "kubernetes.io~host-path", vol.Name)
	t.Cleanup(func() {
		if err := p.TearDown(t.Context(), volume.TearDownRequest{Name: vol.Name, Dir: dir}); err != nil {
			t.Errorf("TearDown: %v", err)
		}
		if _, err := os.Lstat(dir); err == nil {
			t.Errorf("TearDown left %s", dir)
		}
	})
	return p.SetUp(t.Context(), volume.SetUpRequest{Pod: podMounting(vol, readOnlyMounts), Volume: vol, Dir: dir})
}

// shows checks that got names the same file as want.HostPath (bound under
// the volume directory when the plugin binds), with want's name and
// read-only flag.
func shows(t *testing.T, got, want volume.Mount) {
	t.Helper()
	if got.Name != want.Name || got.ReadOnly != want.ReadOnly {
		t.Errorf("Mount %+v, want name %s read-only %v", got, want.Name, want.ReadOnly)
	}
	if binds() && got.HostPath == want.HostPath {
		t.Errorf("Mount names the host path %s itself, not its bind", got.HostPath)
	}
	a, err := os.Stat(got.HostPath)
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.Stat(want.HostPath)
	if err != nil {
		t.Fatal(err)
	}
	if !os.SameFile(a, b) {
		t.Errorf("Mount.HostPath %s is not %s", got.HostPath, want.HostPath)
	}
}

// blockDevice returns a block device under /dev, or "".
func blockDevice() string {
	entries, err := os.ReadDir("/dev")
	if err != nil {
		return ""
	}
	for _, e := range entries {
		if e.Type()&fs.ModeDevice != 0 && e.Type()&fs.ModeCharDevice == 0 {
			return filepath.Join("/dev", e.Name())
		}
	}
	return ""
}

func TestTypes(t *testing.T) {
	root := hostDir(t)
	dir := filepath.Join(root, "dir")
	file := filepath.Join(root, "file")
	sock := filepath.Join(root, "sock")
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(file, []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	block := blockDevice()
	missing := filepath.Join(root, "missing")

	type tc struct {
		name    string
		path    string
		typ     v1.HostPathType
		wantErr string // substring; "" for success
		skip    string
	}
	cases := []tc{
		{name: "unset existing", path: dir, typ: v1.HostPathUnset},
		{name: "unset missing", path: missing + "-unset", typ: v1.HostPathUnset},
		{name: "Directory", path: dir, typ: v1.HostPathDirectory},
		{name: "Directory missing", path: missing, typ: v1.HostPathDirectory, wantErr: "doesn't exist"},
		{name: "Directory on a file", path: file, typ: v1.HostPathDirectory, wantErr: "is not a directory, it's a File"},
		{name: "DirectoryOrCreate existing", path: dir, typ: v1.HostPathDirectoryOrCreate},
		{name: "DirectoryOrCreate on a file", path: file, typ: v1.HostPathDirectoryOrCreate, wantErr: "is not a directory"},
		{name: "File", path: file, typ: v1.HostPathFile},
		{name: "File missing", path: missing, typ: v1.HostPathFile, wantErr: "doesn't exist"},
		{name: "File on a directory", path: dir, typ: v1.HostPathFile, wantErr: "is not a file, it's a Directory"},
		{name: "File on a socket", path: sock, typ: v1.HostPathFile, wantErr: "is not a file, it's a Socket"},
		{name: "FileOrCreate existing", path: file, typ: v1.HostPathFileOrCreate},
		{name: "FileOrCreate on a directory", path: dir, typ: v1.HostPathFileOrCreate, wantErr: "is not a file"},
		{name: "FileOrCreate without its parent", path: filepath.Join(missing, "f"), typ: v1.HostPathFileOrCreate, wantErr: "no such file or directory"},
		{name: "Socket", path: sock, typ: v1.HostPathSocket},
		{name: "Socket on a file", path: file, typ: v1.HostPathSocket, wantErr: "is not a socket file"},
		{name: "CharDevice", path: "/dev/null", typ: v1.HostPathCharDev},
		{name: "CharDevice on a file", path: file, typ: v1.HostPathCharDev, wantErr: "is not a character device"},
		{name: "BlockDevice", path: block, typ: v1.HostPathBlockDev},
		{name: "BlockDevice on a char device", path: "/dev/null", typ: v1.HostPathBlockDev, wantErr: "is not a block device, it's a CharDevice"},
	}
	if block == "" {
		cases[len(cases)-2].skip = "no block device under /dev"
	}
	p := newPlugin(t, hostpath.Options{})
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if c.skip != "" {
				t.Skip(c.skip)
			}
			vol := hostPathVolume("typed", c.path, c.typ)
			m, err := setUp(t, p, vol, false)
			if c.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), c.wantErr) {
					t.Fatalf("SetUp: err %v, want one containing %q", err, c.wantErr)
				}
				if volume.IsPermanent(err) {
					t.Errorf("a failed type check is permanent (%v); the path may still appear", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if c.typ == v1.HostPathUnset {
				if _, err := os.Stat(c.path); err != nil && binds() {
					t.Fatalf("a missing unset path is not created for the bind: %v", err)
				}
				if err != nil {
					return // NoBind: the runtime creates it.
				}
			}
			shows(t, m, volume.Mount{Name: "typed", HostPath: c.path})
		})
	}
}

func TestCreate(t *testing.T) {
	root := hostDir(t)
	p := newPlugin(t, hostpath.Options{})
	for _, tc := range []struct {
		name     string
		path     string
		typ      v1.HostPathType
		wantDir  bool
		wantMode fs.FileMode
	}{
		{name: "DirectoryOrCreate with parents", path: "a/b/c", typ: v1.HostPathDirectoryOrCreate, wantDir: true, wantMode: 0o755},
		{name: "FileOrCreate", path: "f", typ: v1.HostPathFileOrCreate, wantMode: 0o644},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(root, tc.path)
			m, err := setUp(t, p, hostPathVolume("v", path, tc.typ), false)
			if err != nil {
				t.Fatal(err)
			}
			shows(t, m, volume.Mount{Name: "v", HostPath: path})
			fi, err := os.Stat(path)
			if err != nil {
				t.Fatal(err)
			}
			if fi.IsDir() != tc.wantDir || fi.Mode().Perm() != tc.wantMode {
				t.Errorf("created %v (dir %v), want mode %v (dir %v)", fi.Mode(), fi.IsDir(), tc.wantMode, tc.wantDir)
			}
			if !tc.wantDir && fi.Size() != 0 {
				t.Errorf("created file has %d bytes", fi.Size())
			}
		})
	}
}

func TestInvalid(t *testing.T) {
	p := newPlugin(t, hostpath.Options{})
	for _, tc := range []struct {
		name, path string
		typ        v1.HostPathType
		want       string
	}{
		{name: "empty", path: "", want: "must be absolute"},
		{name: "relative", path: "srv/data", want: "must be absolute"},
		{name: "dot-dot", path: "/srv/../etc", want: "must not contain '..'"},
		{name: "trailing dot-dot", path: "/srv/data/..", want: "must not contain '..'"},
		{name: "unknown type", path: "/srv", typ: "Fifo", want: `"Fifo" is an invalid hostPath type`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := setUp(t, p, hostPathVolume("v", tc.path, tc.typ), false)
			if !errors.Is(err, volume.ErrInvalid) || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("SetUp: err %v, want ErrInvalid containing %q", err, tc.want)
			}
		})
	}
}

func TestAllowedHostPaths(t *testing.T) {
	root := hostDir(t)
	for _, d := range []string{"allowed/x", "ro/x", "other", "allowedX"} {
		if err := os.MkdirAll(filepath.Join(root, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	links := map[string]string{
		"allowed/out":    filepath.Join(root, "other"),
		"allowed/in":     filepath.Join(root, "allowed/x"),
		"allowed/dangle": filepath.Join(root, "other/new"),
		"allowed/rel":    "../other",
		"ro/w":           filepath.Join(root, "allowed/x"),
		"plink":          filepath.Join(root, "allowed"),
	}
	for name, target := range links {
		if err := os.Symlink(target, filepath.Join(root, name)); err != nil {
			t.Fatal(err)
		}
	}
	allowed := []hostpath.AllowedHostPath{
		{PathPrefix: filepath.Join(root, "allowed") + "/"},
		{PathPrefix: filepath.Join(root, "ro"), ReadOnly: true},
	}
	list := "[" + root + "/allowed " + root + "/ro (read-only)]"
	type tc struct {
		name     string
		allowed  []hostpath.AllowedHostPath // defaults to allowed
		path     string
		typ      v1.HostPathType
		roMounts bool
		want     volume.Mount // HostPath relative to root
		wantErr  string       // substring of an ErrNotAllowed error
		notMade  string       // must not exist afterwards (relative to root)
	}
	for _, c := range []tc{
		{name: "inside", path: "allowed/x", want: volume.Mount{HostPath: "allowed/x"}},
		{name: "the prefix itself", path: "allowed", want: volume.Mount{HostPath: "allowed"}},
		{name: "unclean path is cleaned", path: "allowed//./x/", want: volume.Mount{HostPath: "allowed/x"}},
		{name: "create inside", path: "allowed/new/dir", typ: v1.HostPathDirectoryOrCreate, want: volume.Mount{HostPath: "allowed/new/dir"}},
		{name: "outside", path: "other", wantErr: root + "/other is outside the allowed host paths " + list},
		{name: "outside is not created", path: "other/made", typ: v1.HostPathDirectoryOrCreate, wantErr: "is outside", notMade: "other/made"},
		{name: "prefix matches whole components", path: "allowedX", wantErr: "is outside"},
		{name: "the root", path: "/", wantErr: "is outside"},
		{name: "symlink pointing outside", path: "allowed/out", wantErr: root + "/allowed/out resolves to " + root + "/other, outside the allowed host paths " + list},
		{name: "relative symlink pointing outside", path: "allowed/rel", wantErr: "resolves to " + root + "/other"},
		{name: "symlink in the middle of the path", path: "allowed/out/sub", typ: v1.HostPathDirectoryOrCreate, wantErr: "resolves to " + root + "/other/sub", notMade: "other/sub"},
		{name: "dangling symlink pointing outside", path: "allowed/dangle", typ: v1.HostPathDirectoryOrCreate, wantErr: "resolves to " + root + "/other/new", notMade: "other/new"},
		{name: "symlink staying inside", path: "allowed/in", want: volume.Mount{HostPath: "allowed/x"}},
		{name: "read-only, mounted read-only", path: "ro/x", roMounts: true, want: volume.Mount{HostPath: "ro/x", ReadOnly: true}},
		{name: "read-only, mounted writable", path: "ro/x", wantErr: root + "/ro/x is allowed read-only, but container app mounts it writable (set readOnly: true)"},
		{name: "read-only is not created", path: "ro/new", typ: v1.HostPathDirectoryOrCreate, roMounts: true, wantErr: "allowed read-only, so it is not created", notMade: "ro/new"},
		{name: "read-only path through a link to a writable one", path: "ro/w", roMounts: true, want: volume.Mount{HostPath: "allowed/x", ReadOnly: true}},
		{
			name:    "a writable entry wins over a read-only one",
			allowed: []hostpath.AllowedHostPath{{PathPrefix: root}, {PathPrefix: filepath.Join(root, "ro"), ReadOnly: true}},
			path:    "ro/x", want: volume.Mount{HostPath: "ro/x"},
		},
		{name: "an empty list allows nothing", allowed: []hostpath.AllowedHostPath{}, path: "allowed/x", wantErr: "outside the allowed host paths []"},
		{
			name:    "a symlinked prefix allows its target",
			allowed: []hostpath.AllowedHostPath{{PathPrefix: filepath.Join(root, "plink")}},
			path:    "plink/x", want: volume.Mount{HostPath: "allowed/x"},
		},
	} {
		t.Run(c.name, func(t *testing.T) {
			a := allowed
			if c.allowed != nil {
				a = c.allowed
			}
			p := newPlugin(t, hostpath.Options{AllowedHostPaths: a})
			path := c.path
			if path != "/" {
				path = root + "/" + path
			}
			vol := hostPathVolume("data", path, c.typ)
			m, err := setUp(t, p, vol, c.roMounts)
			if c.notMade != "" {
				if _, err := os.Lstat(filepath.Join(root, c.notMade)); err == nil {
					t.Errorf("%s was created", c.notMade)
				}
			}
			if c.wantErr != "" {
				if !errors.Is(err, volume.ErrNotAllowed) || !strings.Contains(err.Error(), c.wantErr) {
					t.Fatalf("SetUp: err %v\nwant ErrNotAllowed containing %q", err, c.wantErr)
				}
				if !strings.HasPrefix(err.Error(), "hostpath: volume data: ") {
					t.Errorf("error %q does not name the plugin and the volume", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			c.want.Name = "data"
			c.want.HostPath = filepath.Join(root, c.want.HostPath)
			shows(t, m, c.want)
		})
	}
}

func TestNewRejectsBadPrefixes(t *testing.T) {
	for _, prefix := range []string{"", "srv", "/srv/../etc"} {
		if _, err := hostpath.New(hostpath.Options{AllowedHostPaths: []hostpath.AllowedHostPath{{PathPrefix: prefix}}}); err == nil {
			t.Errorf("New accepted the prefix %q", prefix)
		}
	}
}

func TestPluginSuite(t *testing.T) {
	volumetest.PluginSuite(t, func(t *testing.T) volumetest.Fixture {
		root := hostDir(t)
		if err := os.Mkdir(filepath.Join(root, "dir"), 0o755); err != nil {
			t.Fatal(err)
		}
		p := newPlugin(t, hostpath.Options{AllowedHostPaths: []hostpath.AllowedHostPath{{PathPrefix: root}}})
		return volumetest.Fixture{
			Plugin: p,
			Volumes: []v1.Volume{
				*hostPathVolume("dir", filepath.Join(root, "dir"), v1.HostPathDirectory),
				*hostPathVolume("made", filepath.Join(root, "made"), v1.HostPathDirectoryOrCreate),
				*hostPathVolume("file", filepath.Join(root, "file"), v1.HostPathFileOrCreate),
			},
			Unsupported: []v1.Volume{{Name: "scratch", VolumeSource: v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{}}}},
		}
	})
}
