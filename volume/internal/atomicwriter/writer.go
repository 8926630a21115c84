package atomicwriter

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"
)

// The reserved names in a projected directory.
const (
	// DataDirName is the symlink to the current timestamped directory.
	DataDirName = "..data"
	// newDataDirName is the symlink renamed over DataDirName.
	newDataDirName = "..data_tmp"
	// tsPrefix starts the name of every timestamped directory (after the
	// ".."), the kubelet's layout: ..2006_01_02_15_04_05.<random>.
	tsLayout = "..2006_01_02_15_04_05."
)

// Limits on the payload's paths, the kubelet's.
const (
	maxFileNameLength = 255
	maxPathLength     = 4096
)

// File is one file of a payload.
type File struct {
	// Data is the file's content.
	Data []byte
	// Mode is the file's permission bits (at most 0777).
	Mode fs.FileMode
	// FsUser, when not nil, is the uid that owns the file (the kubelet's
	// FsUser, for service-account tokens).
	FsUser *int64
}

// Options change how Write lays out the files.
type Options struct {
	// FSGroup, when not nil, is the pod's fsGroup: every file and directory
	// written is given to that group, files get group read (mode|0440) and
	// directories group read and search and the setgid bit, as the
	// kubelet's SetVolumeOwnership does for a read-only volume. Defaults to
	// none.
	FSGroup *int64
}

// ErrInvalidPath is wrapped by the errors of payload paths Write refuses.
var ErrInvalidPath = errors.New("invalid path")

// Validate checks one payload path as the kubelet does: relative, not
// empty, without ".." components, not starting with "..", each component
// at most 255 bytes and the whole at most 4096.
func Validate(p string) error {
	switch {
	case p == "":
		return fmt.Errorf("%w: must not be empty", ErrInvalidPath)
	case path.IsAbs(p):
		return fmt.Errorf("%w %q: must be relative", ErrInvalidPath, p)
	case len(p) > maxPathLength:
		return fmt.Errorf("%w: must be at most %d characters", ErrInvalidPath, maxPathLength)
	}
	items := strings.Split(p, "/")
	for _, item := range items {
		if item == ".." {
			return fmt.Errorf("%w %q: must not contain '..'", ErrInvalidPath, p)
		}
		if len(item) > maxFileNameLength {
			return fmt.Errorf("%w %q: file names must be at most %d characters", ErrInvalidPath, p, maxFileNameLength)
		}
	}
	// Checked on the clean path too: "./..data" is "..data".
	c := path.Clean(p)
	if first, _, _ := strings.Cut(c, "/"); strings.HasPrefix(items[0], "..") || strings.HasPrefix(first, "..") {
		return fmt.Errorf("%w %q: must not start with '..'", ErrInvalidPath, p)
	}
	if c == "." {
		return fmt.Errorf("%w %q: names no file", ErrInvalidPath, p)
	}
	return nil
}

// clean validates the payload's paths and returns it keyed by clean paths.
func clean(payload map[string]File) (map[string]File, error) {
	out := make(map[string]File, len(payload))
	for p, f := range payload {
		if err := Validate(p); err != nil {
			return nil, err
		}
		if f.Mode&^fs.ModePerm != 0 {
			return nil, fmt.Errorf("%w %q: mode %#o has more than permission bits", ErrInvalidPath, p, uint32(f.Mode))
		}
		out[path.Clean(p)] = f
	}
	// A path may not be both a file and a directory ("a" and "a/b").
	for p := range out {
		for d := path.Dir(p); d != "."; d = path.Dir(d) {
			if _, ok := out[d]; ok {
				return nil, fmt.Errorf("%w: %q is both a file and the directory of %q", ErrInvalidPath, d, p)
			}
		}
	}
	return out, nil
}

// Current returns the timestamped directory ..data points at, "" when
// there is none (nothing written yet).
func Current(dir string) (string, error) {
	target, err := os.Readlink(filepath.Join(dir, DataDirName))
	if errors.Is(err, fs.ErrNotExist) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("reading %s: %w", DataDirName, err)
	}
	if strings.Contains(target, "/") || !strings.HasPrefix(target, "..") || target == ".." || target == DataDirName {
		return "", fmt.Errorf("%s in %s points at %q, not a timestamped directory", DataDirName, dir, target)
	}
	return target, nil
}

// Write projects payload into dir, which must exist: when the files there
// already have the payload's content, modes and owners, and no other file,
// it does nothing and returns false; otherwise it writes the new set in a
// new timestamped directory, swaps ..data to it and removes the old one,
// and returns true. Payload paths must pass Validate.
func Write(dir string, payload map[string]File, opts Options) (changed bool, err error) {
	files, err := clean(payload)
	if err != nil {
		return false, err
	}
	old, err := Current(dir)
	if err != nil {
		return false, err
	}
	if old != "" {
		same, err := matches(filepath.Join(dir, old), files, opts)
		if err != nil {
			return false, err
		}
		if same {
			return false, nil
		}
	}

	ts, err := os.MkdirTemp(dir, time.Now().UTC().Format(tsLayout))
	if err != nil {
		return false, err
	}
	tsName := filepath.Base(ts)
	swapped := false
	defer func() {
		if !swapped {
			_ = os.RemoveAll(ts)
		}
	}()
	// 0755 lets every user of the container walk the tree, whatever the
	// umask.
	if err := os.Chmod(ts, 0o755); err != nil {
		return false, err
	}
	if err := writeFiles(ts, files); err != nil {
		return false, err
	}
	if opts.FSGroup != nil {
		if err := setGroup(ts, *opts.FSGroup); err != nil {
			return false, err
		}
	}
	if err := linkTopLevel(dir, files); err != nil {
		return false, err
	}

	tmp := filepath.Join(dir, newDataDirName)
	if err := os.Remove(tmp); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return false, err
	}
	if err := os.Symlink(tsName, tmp); err != nil {
		return false, err
	}
	if err := os.Rename(tmp, filepath.Join(dir, DataDirName)); err != nil {
		_ = os.Remove(tmp)
		return false, err
	}
	swapped = true

	if err := removeStale(dir, tsName, files); err != nil {
		return true, err
	}
	return true, nil
}

// matches reports whether the timestamped directory ts holds exactly the
// files (content, mode and owners) and nothing else.
func matches(ts string, files map[string]File, opts Options) (bool, error) {
	seen := 0
	same := true
	err := filepath.WalkDir(ts, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if p == ts || d.IsDir() {
			return nil
		}
		rel, err := filepath.Rel(ts, p)
		if err != nil {
			return err
		}
		f, ok := files[filepath.ToSlash(rel)]
		if !ok || !d.Type().IsRegular() {
			same = false
			return filepath.SkipAll
		}
		seen++
		ok, err = fileMatches(p, f, opts)
		if err != nil {
			return err
		}
		if !ok {
			same = false
			return filepath.SkipAll
		}
		return nil
	})
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	return same && seen == len(files), nil
}

func fileMatches(p string, f File, opts Options) (bool, error) {
	fi, err := os.Lstat(p)
	if err != nil {
		return false, err
	}
	if fi.Mode().Perm() != finalMode(f.Mode, opts) || fi.Size() != int64(len(f.Data)) {
		return false, nil
	}
	if uid, gid, ok := owner(fi); ok {
		if f.FsUser != nil && uid != *f.FsUser {
			return false, nil
		}
		if opts.FSGroup != nil && gid != *opts.FSGroup {
			return false, nil
		}
	}
	data, err := os.ReadFile(p)
	if err != nil {
		return false, err
	}
	return bytes.Equal(data, f.Data), nil
}

// finalMode is the mode a file ends with: the kubelet's SetVolumeOwnership
// adds group read for an fsGroup.
func finalMode(m fs.FileMode, opts Options) fs.FileMode {
	if opts.FSGroup != nil {
		m |= 0o440
	}
	return m.Perm()
}

// writeFiles writes every file below the new timestamped directory ts.
func writeFiles(ts string, files map[string]File) error {
	for _, rel := range sortedKeys(files) {
		f := files[rel]
		full := filepath.Join(ts, filepath.FromSlash(rel))
		if d := filepath.Dir(filepath.FromSlash(rel)); d != "." {
			if err := mkdirAll(ts, d); err != nil {
				return err
			}
		}
		if err := writeFile(full, f); err != nil {
			return err
		}
	}
	return nil
}

// mkdirAll creates the relative directory rel below base, each with mode
// 0755 whatever the umask.
func mkdirAll(base, rel string) error {
	cur := base
	for _, c := range strings.Split(rel, string(filepath.Separator)) {
		cur = filepath.Join(cur, c)
		err := os.Mkdir(cur, 0o755)
		if errors.Is(err, fs.ErrExist) {
			continue
		}
		if err != nil {
			return err
		}
		if err := os.Chmod(cur, 0o755); err != nil {
			return err
		}
	}
	return nil
}

func writeFile(full string, f File) (err error) {
	fd, err := os.OpenFile(full, os.O_WRONLY|os.O_CREATE|os.O_EXCL|oNoFollow, 0o600)
	if err != nil {
		return err
	}
	defer func() {
		if cerr := fd.Close(); err == nil {
			err = cerr
		}
	}()
	if _, err := fd.Write(f.Data); err != nil {
		return err
	}
	// The mode without the umask.
	if err := fd.Chmod(f.Mode.Perm()); err != nil {
		return err
	}
	if f.FsUser != nil {
		if err := fd.Chown(int(*f.FsUser), -1); err != nil {
			return err
		}
	}
	return nil
}

// setGroup gives everything below ts, and ts, to gid, as the kubelet's
// SetVolumeOwnership does for a read-only volume.
func setGroup(ts string, gid int64) error {
	return filepath.WalkDir(ts, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		return chgrp(p, gid)
	})
}

// chgrp gives p to gid and adds group read (and search, setgid for a
// directory); a symlink only changes group.
func chgrp(p string, gid int64) error {
	if err := os.Lchown(p, -1, int(gid)); err != nil {
		return err
	}
	fi, err := os.Lstat(p)
	if err != nil {
		return err
	}
	if fi.Mode()&fs.ModeSymlink != 0 {
		return nil
	}
	mode := fi.Mode().Perm() | 0o440
	if fi.IsDir() {
		mode |= 0o110 | fs.ModeSetgid
	}
	return os.Chmod(p, mode|fi.Mode()&(fs.ModeSetgid|fs.ModeSticky))
}

// SetGroup gives the directory dir itself to gid, with group read and
// search and the setgid bit: the root of a volume with an fsGroup.
func SetGroup(dir string, gid int64) error { return chgrp(dir, gid) }

// linkTopLevel makes each top-level name of the payload a symlink to
// ..data/<name>, replacing a symlink that points elsewhere.
func linkTopLevel(dir string, files map[string]File) error {
	for _, name := range topLevel(files) {
		p := filepath.Join(dir, name)
		want := DataDirName + "/" + name
		target, err := os.Readlink(p)
		switch {
		case err == nil && target == want:
			continue
		case err == nil:
			if err := os.Remove(p); err != nil {
				return err
			}
		case errors.Is(err, fs.ErrNotExist):
		case errors.Is(err, syscall.EINVAL):
			return fmt.Errorf("%s is in the way of the projected file %s: not a symlink", p, name)
		default:
			return err
		}
		if err := os.Symlink(want, p); err != nil {
			return err
		}
	}
	return nil
}

// removeStale removes the top-level symlinks that the payload no longer
// has, and every timestamped directory but current (the previous one, and
// any left by a write that failed half-way).
func removeStale(dir, current string, files map[string]File) error {
	keep := map[string]bool{}
	for _, name := range topLevel(files) {
		keep[name] = true
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	var errs []error
	for _, e := range entries {
		name := e.Name()
		switch {
		case name == DataDirName || name == current || keep[name]:
		case strings.HasPrefix(name, ".."):
			if isTimestamped(name) && e.IsDir() {
				errs = append(errs, os.RemoveAll(filepath.Join(dir, name)))
			}
		case e.Type()&fs.ModeSymlink != 0:
			// Only our links: a symlink into ..data.
			if t, err := os.Readlink(filepath.Join(dir, name)); err == nil && strings.HasPrefix(t, DataDirName+"/") {
				errs = append(errs, os.Remove(filepath.Join(dir, name)))
			}
		}
	}
	return errors.Join(errs...)
}

// isTimestamped reports whether name is a timestamped directory's name.
func isTimestamped(name string) bool {
	if len(name) <= len(tsLayout) {
		return false
	}
	_, err := time.Parse(tsLayout, name[:len(tsLayout)])
	return err == nil
}

func topLevel(files map[string]File) []string {
	seen := map[string]bool{}
	for p := range files {
		first, _, _ := strings.Cut(p, "/")
		seen[first] = true
	}
	out := make([]string, 0, len(seen))
	for n := range seen {
		out = append(out, n)
	}
	slices.Sort(out)
	return out
}

func sortedKeys(files map[string]File) []string {
	out := make([]string, 0, len(files))
	for p := range files {
		out = append(out, p)
	}
	slices.Sort(out)
	return out
}
