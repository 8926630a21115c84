package certificate

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"
)

// pairStore keeps certificate and key pairs in one directory as the
// kubelet's certificate store does: each in a PEM file of its own,
// <prefix>-<date>.pem (the certificates, then the key), and
// <prefix>-current.pem a symbolic link to the latest. It also reads the
// pair <prefix>.crt and <prefix>.key when there is no current link, as the
// kubelet's does. Unlike the kubelet's, each file is written to a
// temporary file first and renamed, so that a crash leaves no partial
// pair; the link is made as <prefix>-updated.pem and renamed over
// <prefix>-current.pem, as the kubelet's is.
type pairStore struct {
	dir, prefix string
	now         func() time.Time
}

func (s *pairStore) path(qualifier string) string {
	return filepath.Join(s.dir, s.prefix+"-"+qualifier+".pem")
}

// recover completes an update that a crash interrupted: the updated link
// becomes the current one when there is no current one.
func (s *pairStore) recover() error {
	current, updated := s.path("current"), s.path("updated")
	if _, err := os.Stat(current); err == nil || !errors.Is(err, os.ErrNotExist) {
		return err
	}
	fi, err := os.Lstat(updated)
	switch {
	case errors.Is(err, os.ErrNotExist):
		return nil
	case err != nil:
		return err
	case fi.Mode()&os.ModeSymlink == 0:
		return fmt.Errorf("certificate: %s is not a symbolic link", updated)
	}
	return os.Rename(updated, current)
}

// current loads the current pair, with its leaf parsed; an error wrapping
// os.ErrNotExist when there is none.
func (s *pairStore) current() (*tls.Certificate, error) {
	current := s.path("current")
	if _, err := os.Stat(current); err == nil {
		return loadPair(current, current)
	} else if !errors.Is(err, os.ErrNotExist) {
		return nil, err
	}
	crt, key := filepath.Join(s.dir, s.prefix+".crt"), filepath.Join(s.dir, s.prefix+".key")
	_, errC := os.Stat(crt)
	_, errK := os.Stat(key)
	if errC == nil && errK == nil {
		return loadPair(crt, key)
	}
	return nil, fmt.Errorf("certificate: no certificate and key at %s or %s and %s: %w", current, crt, key, os.ErrNotExist)
}

func loadPair(crt, key string) (*tls.Certificate, error) {
	cert, err := tls.LoadX509KeyPair(crt, key)
	if err != nil {
		return nil, fmt.Errorf("certificate: loading %s: %w", crt, err)
	}
	// tls.LoadX509KeyPair fills Leaf (Go 1.23 and later).
	if cert.Leaf == nil {
		if cert.Leaf, err = x509.ParseCertificate(cert.Certificate[0]); err != nil {
			return nil, fmt.Errorf("certificate: loading %s: %w", crt, err)
		}
	}
	return &cert, nil
}

// update checks that certPEM holds certificates for keyPEM's key, writes
// them in a new dated file, and points the current link to it.
func (s *pairStore) update(certPEM, keyPEM []byte) (*tls.Certificate, error) {
	var buf bytes.Buffer
	for rest := certPEM; ; {
		var b *pem.Block
		b, rest = pem.Decode(rest)
		if b == nil {
			break
		}
		if b.Type != "CERTIFICATE" {
			continue
		}
		if _, err := x509.ParseCertificate(b.Bytes); err != nil {
			return nil, fmt.Errorf("invalid issued certificate: %w", err)
		}
		_ = pem.Encode(&buf, &pem.Block{Type: "CERTIFICATE", Bytes: b.Bytes})
	}
	if buf.Len() == 0 {
		return nil, errors.New("the issued certificate holds no PEM certificate")
	}
	buf.Write(keyPEM)
	cert, err := tls.X509KeyPair(buf.Bytes(), buf.Bytes())
	if err != nil {
		return nil, fmt.Errorf("invalid issued certificate: %w", err)
	}
	if cert.Leaf == nil {
		if cert.Leaf, err = x509.ParseCertificate(cert.Certificate[0]); err != nil {
			return nil, fmt.Errorf("invalid issued certificate: %w", err)
		}
	}

	if err := os.MkdirAll(s.dir, 0o700); err != nil {
		return nil, fmt.Errorf("certificate directory: %w", err)
	}
	dated := s.path(s.now().Format("2006-01-02-15-04-05"))
	if err := writeFileAtomic(dated, buf.Bytes()); err != nil {
		return nil, err
	}
	abs, err := filepath.Abs(dated)
	if err != nil {
		return nil, err
	}
	updated := s.path("updated")
	if err := os.Remove(updated); err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("removing %s: %w", updated, err)
	}
	if err := os.Symlink(abs, updated); err != nil {
		return nil, fmt.Errorf("linking the new pair: %w", err)
	}
	if err := os.Rename(updated, s.path("current")); err != nil {
		return nil, fmt.Errorf("making the new pair current: %w", err)
	}
	return &cert, nil
}

// writeFileAtomic writes data (with mode 0600) to a temporary file next to
// path, syncs it, and renames it to path.
func writeFileAtomic(path string, data []byte) error {
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*")
	if err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	tmp := f.Name()
	_, err = f.Write(data)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err != nil {
		_ = os.Remove(tmp)
		return fmt.Errorf("writing %s: %w", path, err)
	}
	return nil
}
