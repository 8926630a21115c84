package e2e

import (
	"archive/tar"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// registry is a private registry of the test's own on loopback, started
// by hack/registry.sh: it wants the login user:password.
type registry struct {
	addr, user, password string
}

// startRegistry starts a registry for the test, stopped when it ends, or
// skips when the registry is not installed (hack/registry.sh install).
func startRegistry(t *testing.T) *registry {
	t.Helper()
	if os.Geteuid() != 0 {
		skipOrFail(t, "the private registry's test starts containerd pods and needs root")
	}
	script, err := filepath.Abs("../../hack/registry.sh")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat("/usr/bin/docker-registry"); err != nil {
		skipOrFail(t, "no /usr/bin/docker-registry: run hack/registry.sh install")
	}
	dir := t.TempDir()
	run := func(args ...string) string {
		t.Helper()
		var stdout, stderr bytes.Buffer
		cmd := exec.Command(script, args...)
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		if err := cmd.Run(); err != nil {
			t.Fatalf("hack/registry.sh %s: %v\n%s%s", strings.Join(args, " "), err, stdout.String(), stderr.String())
		}
		return strings.TrimSpace(stdout.String())
	}
	t.Cleanup(func() { run("stop", "--dir", dir) })
	r := &registry{addr: run("start", "--dir", dir)}
	for file, v := range map[string]*string{"user": &r.user, "password": &r.password} {
		b, err := os.ReadFile(filepath.Join(dir, file))
		if err != nil {
			t.Fatal(err)
		}
		*v = strings.TrimSpace(string(b))
	}
	return r
}

// imagesCache is where hack/containerd.sh keeps its image tarballs.
func imagesCache() string {
	if c := os.Getenv("NODEKIT_CACHE"); c != "" {
		return filepath.Join(c, "images")
	}
	home, _ := os.UserHomeDir()
	return filepath.Join(home, ".cache", "nodekit", "images")
}

// pushLayout pushes the one image of an OCI image-layout tarball (as
// hack/containerd.sh builds them) to the registry as repo:tag, with the
// registry's login, through the distribution API (monolithic blob
// uploads, then the manifest).
func (r *registry) pushLayout(t *testing.T, layoutTar, repo, tag string) {
	t.Helper()
	blobs := map[string][]byte{}
	var index []byte
	f, err := os.Open(layoutTar)
	if err != nil {
		skipOrFail(t, "image tarball %s: %v (hack/containerd.sh images builds it)", layoutTar, err)
	}
	defer f.Close()
	tr := tar.NewReader(f)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		b, err := io.ReadAll(tr)
		if err != nil {
			t.Fatal(err)
		}
		name := strings.TrimPrefix(h.Name, "./")
		switch {
		case name == "index.json":
			index = b
		case strings.HasPrefix(name, "blobs/sha256/"):
			blobs["sha256:"+strings.TrimPrefix(name, "blobs/sha256/")] = b
		}
	}
	var idx struct {
		Manifests []struct {
			MediaType, Digest string
		}
	}
	if err := json.Unmarshal(index, &idx); err != nil || len(idx.Manifests) != 1 {
		t.Fatalf("index.json of %s: %v (%d manifests)", layoutTar, err, len(idx.Manifests))
	}
	mdesc := idx.Manifests[0]
	manifest := blobs[mdesc.Digest]
	var m struct {
		Config struct{ Digest string }
		Layers []struct{ Digest string }
	}
	if err := json.Unmarshal(manifest, &m); err != nil {
		t.Fatalf("manifest: %v", err)
	}
	// The pushed image gets a config of its own (a label naming the
	// repository), hence an image ID of its own: removing it from
	// containerd, which removes every reference of an image ID, must not
	// remove the busybox image the other tests use.
	manifest, m.Config.Digest = relabel(t, blobs, manifest, m.Config.Digest, repo)
	// No connection outlives the push (the fixture checks for leaked
	// goroutines).
	client := &http.Client{Timeout: time.Minute, Transport: &http.Transport{DisableKeepAlives: true}}
	defer client.CloseIdleConnections()
	do := func(method, u, contentType string, body []byte, want int) *http.Response {
		t.Helper()
		req, err := http.NewRequestWithContext(t.Context(), method, u, bytes.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		req.SetBasicAuth(r.user, r.password)
		if contentType != "" {
			req.Header.Set("Content-Type", contentType)
		}
		resp, err := client.Do(req)
		if err != nil {
			t.Fatalf("%s %s: %v", method, u, err)
		}
		defer resp.Body.Close()
		msg, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != want {
			t.Fatalf("%s %s: %s: %s", method, u, resp.Status, msg)
		}
		return resp
	}
	base := "http://" + r.addr + "/v2/" + repo
	digests := []string{m.Config.Digest}
	for _, l := range m.Layers {
		digests = append(digests, l.Digest)
	}
	for _, d := range digests {
		b, ok := blobs[d]
		if !ok {
			t.Fatalf("blob %s missing from %s", d, layoutTar)
		}
		resp := do(http.MethodPost, base+"/blobs/uploads/", "", nil, http.StatusAccepted)
		loc, err := resp.Location()
		if err != nil {
			t.Fatalf("upload location: %v", err)
		}
		q := loc.Query()
		q.Set("digest", d)
		loc.RawQuery = q.Encode()
		do(http.MethodPut, loc.String(), "application/octet-stream", b, http.StatusCreated)
	}
	do(http.MethodPut, base+"/manifests/"+url.PathEscape(tag), mdesc.MediaType, manifest, http.StatusCreated)
}

// relabel adds the label io.nodekit.e2e.repository=repo to the image
// config configDigest names, stores the new config in blobs, and returns
// the manifest pointing at it, and the new config's digest.
func relabel(t *testing.T, blobs map[string][]byte, manifest []byte, configDigest, repo string) ([]byte, string) {
	t.Helper()
	var cfg map[string]any
	if err := json.Unmarshal(blobs[configDigest], &cfg); err != nil {
		t.Fatalf("image config: %v", err)
	}
	inner, _ := cfg["config"].(map[string]any)
	if inner == nil {
		inner = map[string]any{}
		cfg["config"] = inner
	}
	labels, _ := inner["Labels"].(map[string]any)
	if labels == nil {
		labels = map[string]any{}
		inner["Labels"] = labels
	}
	labels["io.nodekit.e2e.repository"] = repo
	newCfg, err := json.Marshal(cfg)
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(newCfg)
	digest := "sha256:" + hex.EncodeToString(sum[:])
	blobs[digest] = newCfg
	var man map[string]any
	if err := json.Unmarshal(manifest, &man); err != nil {
		t.Fatalf("manifest: %v", err)
	}
	c, _ := man["config"].(map[string]any)
	if c == nil {
		t.Fatal("manifest without a config")
	}
	c["digest"], c["size"] = digest, len(newCfg)
	out, err := json.Marshal(man)
	if err != nil {
		t.Fatal(err)
	}
	return out, digest
}

// dockerConfigJSON is a .dockerconfigjson document with one login for
// the registry.
func (r *registry) dockerConfigJSON(user, password string) []byte {
	b, _ := json.Marshal(map[string]any{"auths": map[string]any{
		"http://" + r.addr: map[string]string{"username": user, "password": password},
	}})
	return b
}

func (r *registry) String() string { return fmt.Sprintf("registry %s", r.addr) }

// pushPrivate pushes busybox to the registry under a new repository named
// after prefix and returns the image's reference; the image is removed
// from f's containerd when the test ends.
func (r *registry) pushPrivate(t *testing.T, f *fixture, prefix string) string {
	t.Helper()
	repo := unique(prefix)
	r.pushLayout(t, imagesCache()+"/busybox.tar", repo, "1")
	image := r.addr + "/" + repo + ":1"
	t.Cleanup(func() {
		ctx, cancel := cleanupContext()
		defer cancel()
		if err := f.cri.RemoveImage(ctx, &runtimeapi.ImageSpec{Image: image}); err != nil {
			t.Errorf("RemoveImage %s: %v", image, err)
		}
	})
	return image
}
