package imagestore

import (
	"archive/tar"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"golang.org/x/sys/unix"
)

// extract writes the image's flattened file system (mutate.Extract:
// layers merged, whiteouts and opaque directories applied) under root and
// returns the size of its regular files. Entries cannot leave root: ".."
// stops at root, and an entry through a symbolic link is refused; device nodes are skipped
// (the container's /dev is made at its start). As root, owners are kept.
func extract(ctx context.Context, img v1.Image, root string) (uint64, error) {
	rc := mutate.Extract(img)
	defer rc.Close()
	tr := tar.NewReader(rc)
	chown := os.Geteuid() == 0
	var size uint64
	var links []*tar.Header // hard links, made once their targets exist
	for {
		if err := ctx.Err(); err != nil {
			return 0, err
		}
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return 0, fmt.Errorf("unpack: %w", err)
		}
		path, err := inRoot(root, h.Name)
		if err != nil {
			return 0, err
		}
		if path == root {
			continue
		}
		mode := os.FileMode(h.Mode).Perm()
		if h.Mode&04000 != 0 {
			mode |= os.ModeSetuid
		}
		if h.Mode&02000 != 0 {
			mode |= os.ModeSetgid
		}
		if h.Mode&01000 != 0 {
			mode |= os.ModeSticky
		}
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			return 0, fmt.Errorf("unpack %s: %w", h.Name, err)
		}
		switch h.Typeflag {
		case tar.TypeDir:
			if fi, err := os.Lstat(path); err == nil && fi.IsDir() {
				err = os.Chmod(path, mode)
				if err != nil {
					return 0, fmt.Errorf("unpack %s: %w", h.Name, err)
				}
			} else if err := os.Mkdir(path, mode); err != nil {
				return 0, fmt.Errorf("unpack %s: %w", h.Name, err)
			}
		case tar.TypeReg:
			f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_TRUNC|unix.O_NOFOLLOW, mode)
			if err != nil {
				return 0, fmt.Errorf("unpack %s: %w", h.Name, err)
			}
			n, err := io.Copy(f, tr)
			if cerr := f.Close(); err == nil {
				err = cerr
			}
			if err != nil {
				return 0, fmt.Errorf("unpack %s: %w", h.Name, err)
			}
			size += uint64(n)
			if err := os.Chmod(path, mode); err != nil { // beyond the umask
				return 0, fmt.Errorf("unpack %s: %w", h.Name, err)
			}
		case tar.TypeSymlink:
			_ = os.Remove(path)
			if err := os.Symlink(h.Linkname, path); err != nil {
				return 0, fmt.Errorf("unpack %s: %w", h.Name, err)
			}
		case tar.TypeLink:
			links = append(links, h)
			continue
		default:
			continue // devices, FIFOs: not needed in a container's image
		}
		if chown {
			if err := os.Lchown(path, h.Uid, h.Gid); err != nil {
				return 0, fmt.Errorf("unpack %s: %w", h.Name, err)
			}
		}
	}
	for _, h := range links {
		path, err := inRoot(root, h.Name)
		if err != nil {
			return 0, err
		}
		target, err := inRoot(root, h.Linkname)
		if err != nil {
			return 0, err
		}
		_ = os.Remove(path)
		if err := os.Link(target, path); err != nil {
			return 0, fmt.Errorf("unpack %s: hard link to %s: %w", h.Name, h.Linkname, err)
		}
	}
	return size, nil
}

// inRoot returns the path of the archive entry name under root, refusing
// parents that are symbolic links (a link in an
// image could otherwise point an entry at the host's files).
func inRoot(root, name string) (string, error) {
	// Cleaned from "/", ".." cannot climb above root.
	path := filepath.Join(root, filepath.Clean("/"+name))
	// Every existing parent must be a directory, not a link.
	for dir := filepath.Dir(path); len(dir) > len(root); dir = filepath.Dir(dir) {
		fi, err := os.Lstat(dir)
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err != nil {
			return "", fmt.Errorf("unpack %s: %w", name, err)
		}
		if !fi.IsDir() {
			return "", fmt.Errorf("unpack: entry %q goes through %s, which is not a directory", name, strings.TrimPrefix(dir, root))
		}
	}
	return path, nil
}
