package imagestore_test

import (
	"archive/tar"
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"

	"github.com/nodekit/nodekit/runtime"
	"github.com/nodekit/nodekit/runtime/process/imagestore"
)

// file is an entry of a test layer: a directory (name ends with "/"), a
// symbolic link (link set) or a regular file.
type file struct {
	name, body, link string
}

func layer(t *testing.T, files ...file) v1.Layer {
	t.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, f := range files {
		h := &tar.Header{Name: f.name, Mode: 0o644, Typeflag: tar.TypeReg, Size: int64(len(f.body))}
		switch {
		case strings.HasSuffix(f.name, "/"):
			h.Typeflag, h.Mode, h.Size = tar.TypeDir, 0o755, 0
		case f.link != "":
			h.Typeflag, h.Linkname, h.Size = tar.TypeSymlink, f.link, 0
		}
		if err := tw.WriteHeader(h); err != nil {
			t.Fatal(err)
		}
		if _, err := tw.Write([]byte(f.body)); err != nil {
			t.Fatal(err)
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	data := buf.Bytes()
	l, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(data)), nil })
	if err != nil {
		t.Fatal(err)
	}
	return l
}

func image(t *testing.T, env []string, layers ...v1.Layer) v1.Image {
	t.Helper()
	img, err := mutate.AppendLayers(empty.Image, layers...)
	if err != nil {
		t.Fatal(err)
	}
	cf, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	cf = cf.DeepCopy()
	cf.Config.Env = env
	cf.Config.WorkingDir = "/data"
	img, err = mutate.ConfigFile(img, cf)
	if err != nil {
		t.Fatal(err)
	}
	return img
}

func writeLayout(t *testing.T, dir string, imgs map[string]v1.Image) {
	t.Helper()
	p, err := layout.Write(dir, empty.Index)
	if err != nil {
		t.Fatal(err)
	}
	for ref, img := range imgs {
		if err := p.AppendImage(img, layout.WithAnnotations(map[string]string{"org.opencontainers.image.ref.name": ref})); err != nil {
			t.Fatal(err)
		}
	}
}

func newStore(t *testing.T) *imagestore.Store {
	t.Helper()
	s, err := imagestore.New(imagestore.Options{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(s.ImportDir(), 0o755); err != nil {
		t.Fatal(err)
	}
	return s
}

func TestNormalize(t *testing.T) {
	for ref, want := range map[string]string{
		"busybox":                         "docker.io/library/busybox:latest",
		"busybox:1.36":                    "docker.io/library/busybox:1.36",
		"docker.io/library/busybox:1.36":  "docker.io/library/busybox:1.36",
		"index.docker.io/library/busybox": "docker.io/library/busybox:latest",
		"registry.example/team/app:v2":    "registry.example/team/app:v2",
		"localhost:5000/app":              "localhost:5000/app:latest",
		"Not A Reference":                 "Not A Reference",
	} {
		if got := imagestore.Normalize(ref); got != want {
			t.Errorf("Normalize(%q) = %q, want %q", ref, got, want)
		}
	}
}

// TestPullLayoutAndTarball: images from an OCI layout and from an image
// tarball are unpacked (whiteouts applied), listed, found by reference
// and ID, shared by two references of the same image, and removed.
func TestPullLayoutAndTarball(t *testing.T) {
	s := newStore(t)
	base := layer(t, file{name: "etc/"}, file{name: "etc/os", body: "base\n"}, file{name: "etc/gone", body: "x"},
		file{name: "opaque/"}, file{name: "opaque/old", body: "x"}, file{name: "bin/"}, file{name: "bin/sh", link: "/bin/busybox"})
	top := layer(t, file{name: "etc/.wh.gone"}, file{name: "opaque/.wh..wh..opq"}, file{name: "opaque/new", body: "y"}, file{name: "data/"})
	app := image(t, []string{"PATH=/bin", "APP=1"}, base, top)
	writeLayout(t, filepath.Join(s.ImportDir(), "app"), map[string]v1.Image{"registry.example/app:1": app, "registry.example/app:latest": app})
	tag, _ := name.NewTag("registry.example/tool:2")
	tool := image(t, nil, layer(t, file{name: "tool", body: "tool"}))
	if err := tarball.WriteToFile(filepath.Join(s.ImportDir(), "tool.tar"), tag, tool); err != nil {
		t.Fatal(err)
	}

	img, err := s.Pull(t.Context(), "registry.example/app:1")
	if err != nil {
		t.Fatal(err)
	}
	cfgName, _ := app.ConfigName()
	if img.ID != cfgName.String() {
		t.Errorf("ID %s, want the config digest %s", img.ID, cfgName)
	}
	if diff := cmp.Diff([]string{"PATH=/bin", "APP=1"}, img.Env); diff != "" || img.WorkingDir != "/data" {
		t.Errorf("config env (-want +got):\n%s working dir %q", diff, img.WorkingDir)
	}
	var got []string
	_ = filepath.WalkDir(img.Rootfs, func(p string, d os.DirEntry, err error) error {
		if p != img.Rootfs {
			got = append(got, strings.TrimPrefix(p, img.Rootfs+"/"))
		}
		return err
	})
	want := []string{"bin", "bin/sh", "data", "etc", "etc/os", "opaque", "opaque/new"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("unpacked files (-want +got):\n%s", diff)
	}
	if l, err := os.Readlink(filepath.Join(img.Rootfs, "bin/sh")); err != nil || l != "/bin/busybox" {
		t.Errorf("bin/sh links to %q, %v", l, err)
	}
	if img.Size != uint64(len("base\n")+len("y")) {
		t.Errorf("size %d", img.Size)
	}

	again, err := s.Pull(t.Context(), "registry.example/app")
	if err != nil {
		t.Fatal(err)
	}
	if again.ID != img.ID || again.Rootfs != img.Rootfs {
		t.Errorf("second tag of the same image: %s at %s, want %s at %s (unpacked once)", again.ID, again.Rootfs, img.ID, img.Rootfs)
	}
	if _, err := s.Pull(t.Context(), "registry.example/tool:2"); err != nil {
		t.Fatal(err)
	}
	list, err := s.List()
	if err != nil {
		t.Fatal(err)
	}
	var tags [][]string
	for _, i := range list {
		tags = append(tags, i.RepoTags)
	}
	slices.SortFunc(tags, func(a, b []string) int { return strings.Compare(a[0], b[0]) })
	if diff := cmp.Diff([][]string{{"registry.example/app:1", "registry.example/app:latest"}, {"registry.example/tool:2"}}, tags); diff != "" {
		t.Errorf("tags (-want +got):\n%s", diff)
	}
	if byID, err := s.Get(img.ID); err != nil || byID.Rootfs != img.Rootfs {
		t.Errorf("Get(ID) = %v, %v", byID.Rootfs, err)
	}

	// One tag removed: the image stays; the last one: it goes.
	if err := s.Remove("registry.example/app:1"); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(img.Rootfs); err != nil {
		t.Errorf("image removed with a tag left: %v", err)
	}
	if err := s.Remove("registry.example/app:latest"); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(img.Rootfs); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("image files left after its last tag went: %v", err)
	}
	if _, err := s.Get(img.ID); !errors.Is(err, runtime.ErrNotFound) {
		t.Errorf("Get of a removed image: %v, want NotFound", err)
	}
	if err := s.Remove("registry.example/app:latest"); err != nil {
		t.Errorf("removing twice: %v", err)
	}
}

// TestPullErrors: an image in no source is NotFound with a message that
// says where it was looked for; a layer whose content does not match its
// digest is refused, naming the layer, and nothing is left unpacked.
func TestPullErrors(t *testing.T) {
	s := newStore(t)
	_, err := s.Pull(t.Context(), "nowhere:1")
	if !errors.Is(err, runtime.ErrNotFound) || !errors.Is(err, imagestore.ErrNotFound) ||
		!strings.Contains(err.Error(), `"docker.io/library/nowhere:1" is in no OCI layout or image tarball of `+s.ImportDir()) {
		t.Errorf("missing image: %v", err)
	}

	dir := filepath.Join(s.ImportDir(), "bad")
	img := image(t, nil, layer(t, file{name: "f", body: "content"}))
	writeLayout(t, dir, map[string]v1.Image{"bad:1": img})
	ls, _ := img.Layers()
	d, _ := ls[0].Digest()
	blob := filepath.Join(dir, "blobs", d.Algorithm, d.Hex)
	data, err := os.ReadFile(blob)
	if err != nil {
		t.Fatal(err)
	}
	data[len(data)/2] ^= 0xff
	if err := os.WriteFile(blob, data, 0o644); err != nil {
		t.Fatal(err)
	}
	_, err = s.Pull(t.Context(), "bad:1")
	if err == nil || !strings.Contains(err.Error(), "layer "+d.String()+" is corrupt") {
		t.Errorf("corrupt layer: %v", err)
	}
	if list, _ := s.List(); len(list) != 0 {
		t.Errorf("images after a failed pull: %v", list)
	}
	if entries, _ := os.ReadDir(filepath.Join(s.Dir(), "images")); len(entries) != 0 {
		t.Errorf("left in images/: %v", entries)
	}
}
