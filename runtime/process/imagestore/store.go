package imagestore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"

	"github.com/go-logr/logr"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/tarball"

	"github.com/nodekit/nodekit/runtime"
	"github.com/nodekit/nodekit/runtime/process"
)

// ErrNotFound is the class of look-ups of an image the store does not
// have (or, for Pull, that no source under ImportDir holds). It matches
// runtime.ErrNotFound.
var ErrNotFound = fmt.Errorf("imagestore: image not found: %w", runtime.ErrNotFound)

// Options configure a Store.
type Options struct {
	// Dir holds the unpacked images (<Dir>/images/<ID>/rootfs, one per
	// image config digest) and the store's index of references
	// (<Dir>/refs.json). Required; an absolute path.
	Dir string
	// ImportDir holds the images Pull imports: OCI image layouts
	// (directories with an index.json, each image named by its
	// org.opencontainers.image.ref.name annotation) and image tarballs
	// ("docker save" format, *.tar, named by their RepoTags). Defaults to
	// <Dir>/import.
	ImportDir string
	// Logger receives a line for each image unpacked. Defaults to
	// discarding.
	Logger logr.Logger
}

// Image is an image of the store: a process.Image, so that a Store is a
// process.ImageStore.
type Image = process.Image

var _ process.ImageStore = (*Store)(nil)

// Store keeps images unpacked on disk: Pull imports one from ImportDir
// and unpacks it once per image ID; Get, List and Remove serve and forget
// them. It is safe for concurrent use and holds no goroutine.
type Store struct {
	opts Options
	log  logr.Logger

	mu sync.Mutex // held over Pull's unpack: pulls are serialized
}

// index is refs.json: what the store knows.
type index struct {
	Refs   map[string]string `json:"refs"`   // normalized reference → ID
	Images map[string]*entry `json:"images"` // ID → image
}

type entry struct {
	Size   uint64    `json:"size"`
	Config v1.Config `json:"config"`
}

// New returns a Store on opts.Dir. It does no I/O.
func New(opts Options) (*Store, error) {
	if opts.Dir == "" || !filepath.IsAbs(opts.Dir) {
		return nil, fmt.Errorf("imagestore: Dir %q is not an absolute path", opts.Dir)
	}
	if opts.ImportDir == "" {
		opts.ImportDir = filepath.Join(opts.Dir, "import")
	}
	return &Store{opts: opts, log: opts.Logger.WithName("imagestore")}, nil
}

// Dir is the store's directory.
func (s *Store) Dir() string { return s.opts.Dir }

// ImportDir is where Pull finds images.
func (s *Store) ImportDir() string { return s.opts.ImportDir }

// Normalize returns the full form of an image reference
// ("busybox" → "docker.io/library/busybox:latest"), or ref itself when it
// does not parse.
func Normalize(ref string) string {
	r, err := name.ParseReference(ref)
	if err != nil {
		return ref
	}
	reg := r.Context().RegistryStr()
	if reg == name.DefaultRegistry {
		reg = "docker.io"
	}
	n := reg + "/" + r.Context().RepositoryStr()
	if d, ok := r.(name.Digest); ok {
		return n + "@" + d.DigestStr()
	}
	return n + ":" + r.Identifier()
}

func (s *Store) readIndex() (*index, error) {
	idx := &index{Refs: map[string]string{}, Images: map[string]*entry{}}
	data, err := os.ReadFile(filepath.Join(s.opts.Dir, "refs.json"))
	if errors.Is(err, os.ErrNotExist) {
		return idx, nil
	}
	if err != nil {
		return nil, fmt.Errorf("imagestore: %w", err)
	}
	if err := json.Unmarshal(data, idx); err != nil {
		return nil, fmt.Errorf("imagestore: %s: %w", filepath.Join(s.opts.Dir, "refs.json"), err)
	}
	if idx.Refs == nil {
		idx.Refs = map[string]string{}
	}
	if idx.Images == nil {
		idx.Images = map[string]*entry{}
	}
	return idx, nil
}

func (s *Store) writeIndex(idx *index) error {
	data, err := json.Marshal(idx)
	if err != nil {
		return err
	}
	path := filepath.Join(s.opts.Dir, "refs.json")
	if err := os.WriteFile(path+".tmp", data, 0o600); err != nil {
		return fmt.Errorf("imagestore: %w", err)
	}
	if err := os.Rename(path+".tmp", path); err != nil {
		return fmt.Errorf("imagestore: %w", err)
	}
	return nil
}

func (s *Store) rootfs(id string) string {
	return filepath.Join(s.opts.Dir, "images", strings.TrimPrefix(id, "sha256:"), "rootfs")
}

func (s *Store) image(idx *index, id string) Image {
	e := idx.Images[id]
	img := Image{ID: id, Size: e.Size, Env: e.Config.Env, WorkingDir: e.Config.WorkingDir, Entrypoint: e.Config.Entrypoint, Cmd: e.Config.Cmd, Rootfs: s.rootfs(id)}
	for ref, rid := range idx.Refs {
		if rid == id {
			img.RepoTags = append(img.RepoTags, ref)
		}
	}
	slices.Sort(img.RepoTags)
	return img
}

// lookup finds ref (a reference or an image ID) in the index.
func lookup(idx *index, ref string) (string, bool) {
	if _, ok := idx.Images[ref]; ok {
		return ref, true
	}
	if _, ok := idx.Images["sha256:"+ref]; ok && len(ref) == 64 {
		return "sha256:" + ref, true
	}
	id, ok := idx.Refs[Normalize(ref)]
	return id, ok
}

// Get returns the image ref names (a reference, normalized as Normalize
// does, or an image ID), or an error matching ErrNotFound.
func (s *Store) Get(ref string) (Image, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	idx, err := s.readIndex()
	if err != nil {
		return Image{}, err
	}
	id, ok := lookup(idx, ref)
	if !ok {
		return Image{}, fmt.Errorf("%w: %q", ErrNotFound, ref)
	}
	return s.image(idx, id), nil
}

// List returns the store's images, sorted by ID.
func (s *Store) List() ([]Image, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	idx, err := s.readIndex()
	if err != nil {
		return nil, err
	}
	var out []Image
	for id := range idx.Images {
		out = append(out, s.image(idx, id))
	}
	slices.SortFunc(out, func(a, b Image) int { return strings.Compare(a.ID, b.ID) })
	return out, nil
}

// Remove forgets ref: a reference loses its tag, and the image goes (its
// unpacked file system removed) when no tag is left; an image ID removes
// the image and all its tags. Removing what the store does not have is
// not an error. The caller makes sure no container uses the image.
func (s *Store) Remove(ref string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	idx, err := s.readIndex()
	if err != nil {
		return err
	}
	id, ok := lookup(idx, ref)
	if !ok {
		return nil
	}
	if _, isID := idx.Images[ref]; isID || strings.TrimPrefix(id, "sha256:") == ref {
		for r, rid := range idx.Refs {
			if rid == id {
				delete(idx.Refs, r)
			}
		}
	} else {
		delete(idx.Refs, Normalize(ref))
	}
	tagged := false
	for _, rid := range idx.Refs {
		tagged = tagged || rid == id
	}
	if !tagged {
		delete(idx.Images, id)
	}
	if err := s.writeIndex(idx); err != nil {
		return err
	}
	if !tagged {
		if err := os.RemoveAll(filepath.Dir(s.rootfs(id))); err != nil {
			return fmt.Errorf("imagestore: remove image %s: %w", id, err)
		}
	}
	return nil
}

// Pull imports the image ref names from ImportDir: it finds it in the OCI
// layouts and image tarballs there, unpacks it unless an image of the same
// ID is unpacked already, and tags it. An image no source holds is an
// error matching ErrNotFound; a layer that does not match its digest or
// does not unpack is an error naming the layer.
func (s *Store) Pull(ctx context.Context, ref string) (Image, error) {
	want := Normalize(ref)
	img, err := s.find(want)
	if err != nil {
		return Image{}, err
	}
	cfgName, err := img.ConfigName()
	if err != nil {
		return Image{}, fmt.Errorf("imagestore: image %s: %w", ref, err)
	}
	id := cfgName.String()

	s.mu.Lock()
	defer s.mu.Unlock()
	idx, err := s.readIndex()
	if err != nil {
		return Image{}, err
	}
	if _, ok := idx.Images[id]; !ok {
		cf, err := img.ConfigFile()
		if err != nil {
			return Image{}, fmt.Errorf("imagestore: image %s: config: %w", ref, err)
		}
		if err := os.MkdirAll(filepath.Join(s.opts.Dir, "images"), 0o700); err != nil {
			return Image{}, fmt.Errorf("imagestore: %w", err)
		}
		size, err := s.unpack(ctx, img, id)
		if err != nil {
			return Image{}, fmt.Errorf("imagestore: image %s: %w", ref, err)
		}
		idx.Images[id] = &entry{Size: size, Config: cf.Config}
		s.log.Info("unpacked image", "image", want, "id", id, "size", size)
	}
	idx.Refs[want] = id
	if err := s.writeIndex(idx); err != nil {
		return Image{}, err
	}
	return s.image(idx, id), nil
}

// unpack verifies the image's layers and unpacks its flattened file system
// (whiteouts applied) into a new directory renamed into place.
func (s *Store) unpack(ctx context.Context, img v1.Image, id string) (uint64, error) {
	layers, err := img.Layers()
	if err != nil {
		return 0, err
	}
	for _, l := range layers {
		if err := verifyLayer(l); err != nil {
			return 0, err
		}
	}
	final := filepath.Dir(s.rootfs(id))
	tmp, err := os.MkdirTemp(filepath.Join(s.opts.Dir, "images"), ".unpack-")
	if err != nil {
		return 0, err
	}
	defer os.RemoveAll(tmp)
	root := filepath.Join(tmp, "rootfs")
	if err := os.Mkdir(root, 0o755); err != nil {
		return 0, err
	}
	size, err := extract(ctx, img, root)
	if err != nil {
		return 0, err
	}
	_ = os.RemoveAll(final) // a leftover of an unpack that did not finish
	if err := os.Rename(tmp, final); err != nil {
		return 0, err
	}
	return size, nil
}

// verifyLayer reads the layer's blob and checks it against its digest.
func verifyLayer(l v1.Layer) error {
	d, err := l.Digest()
	if err != nil {
		return fmt.Errorf("layer: %w", err)
	}
	rc, err := l.Compressed()
	if err != nil {
		return fmt.Errorf("layer %s: %w", d, err)
	}
	defer rc.Close()
	h, _, err := v1.SHA256(rc)
	if err != nil {
		return fmt.Errorf("layer %s: %w", d, err)
	}
	if h != d {
		return fmt.Errorf("layer %s is corrupt: its content has digest %s", d, h)
	}
	return nil
}

// find looks for the image named want (normalized) in ImportDir.
func (s *Store) find(want string) (v1.Image, error) {
	entries, err := os.ReadDir(s.opts.ImportDir)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("imagestore: %w", err)
	}
	var problems []string
	for _, e := range entries {
		path := filepath.Join(s.opts.ImportDir, e.Name())
		var img v1.Image
		var err error
		switch {
		case e.IsDir():
			img, err = fromLayout(path, want)
		case strings.HasSuffix(e.Name(), ".tar"):
			img, err = fromTarball(path, want)
		default:
			continue
		}
		if err != nil {
			problems = append(problems, err.Error())
			continue
		}
		if img != nil {
			return img, nil
		}
	}
	msg := fmt.Sprintf("%v: %q is in no OCI layout or image tarball of %s", ErrNotFound, want, s.opts.ImportDir)
	if len(problems) > 0 {
		msg += " (unreadable: " + strings.Join(problems, "; ") + ")"
	}
	return nil, &notFoundError{msg: msg}
}

type notFoundError struct{ msg string }

func (e *notFoundError) Error() string { return e.msg }
func (e *notFoundError) Is(target error) bool {
	return target == ErrNotFound || target == runtime.ErrNotFound
}

// fromLayout returns the image of the OCI layout at path whose reference
// annotation names want, or nil.
func fromLayout(path, want string) (v1.Image, error) {
	p, err := layout.FromPath(path)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	ii, err := p.ImageIndex()
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	im, err := ii.IndexManifest()
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	for _, d := range im.Manifests {
		ref := d.Annotations["org.opencontainers.image.ref.name"]
		if ref == "" {
			ref = d.Annotations["io.containerd.image.name"]
		}
		if ref == "" || Normalize(ref) != want {
			continue
		}
		if !d.MediaType.IsImage() {
			return nil, fmt.Errorf("%s: %s is a %s, not an image manifest", path, ref, d.MediaType)
		}
		img, err := ii.Image(d.Digest)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		return img, nil
	}
	return nil, nil
}

// fromTarball returns the image of the tarball at path tagged want, or
// nil.
func fromTarball(path, want string) (v1.Image, error) {
	opener := func() (io.ReadCloser, error) { return os.Open(path) }
	m, err := tarball.LoadManifest(opener)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	for _, d := range m {
		for _, tag := range d.RepoTags {
			if Normalize(tag) != want {
				continue
			}
			t, err := name.NewTag(tag)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", path, err)
			}
			img, err := tarball.Image(opener, &t)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", path, err)
			}
			return img, nil
		}
	}
	return nil, nil
}
