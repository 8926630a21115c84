package e2e

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nodekit/nodekit"
)

// TestNodeCredentials: the logins the kubelet finds without a pull
// Secret pull from the private registry (hack/registry.sh): on
// containerd 2.x, a credential-provider plugin (a shell script, run with
// the kubelet's protocol, its request saved for the test); on containerd
// 1.6, the node's docker config file in the agent's root directory.
func TestNodeCredentials(t *testing.T) {
	reg := startRegistry(t)
	run := func(t *testing.T, endpointVar string, configure func(t *testing.T, o *nodekit.Options, rootDir string)) {
		f := newFixture(t, endpointVar)
		image := reg.pushPrivate(t, f, "nodekit-e2e/node-creds")
		a := f.agentWith(nil, "node credentials", func(o *nodekit.Options) { configure(t, o, f.rootDir) })
		r := strings.NewReplacer("$NAME", "plain", "$NS", f.ns, "$SECRETS", "[]", "$IMAGE", image)
		writeManifest(t, f.dir, "plain.yaml", r.Replace(pullSecretPod))
		eventually(t, 90*time.Second, f.pod("plain")+" Running without a pull Secret", func() bool { return a.running(f.pod("plain")) })
	}

	t.Run("plugin-containerd-2", func(t *testing.T) {
		run(t, envEndpoint2, func(t *testing.T, o *nodekit.Options, _ string) {
			dir := t.TempDir()
			bin := filepath.Join(dir, "bin")
			if err := os.MkdirAll(bin, 0o755); err != nil {
				t.Fatal(err)
			}
			resp, _ := json.Marshal(map[string]any{
				"apiVersion": "credentialprovider.kubelet.k8s.io/v1", "kind": "CredentialProviderResponse",
				"cacheKeyType": "Registry", "cacheDuration": "1m",
				"auth": map[string]any{reg.addr: map[string]string{"username": reg.user, "password": reg.password}},
			})
			script := fmt.Sprintf("#!/bin/sh\ncat > %s/request\necho '%s'\n", dir, resp)
			if err := os.WriteFile(filepath.Join(bin, "loopback-registry"), []byte(script), 0o755); err != nil {
				t.Fatal(err)
			}
			config := fmt.Sprintf(`apiVersion: kubelet.config.k8s.io/v1
kind: CredentialProviderConfig
providers:
- name: loopback-registry
  apiVersion: credentialprovider.kubelet.k8s.io/v1
  matchImages: [%q]
  defaultCacheDuration: 5m
`, reg.addr)
			if err := os.WriteFile(filepath.Join(dir, "config.yaml"), []byte(config), 0o600); err != nil {
				t.Fatal(err)
			}
			o.ImageCredentialProviderConfig, o.ImageCredentialProviderBinDir = filepath.Join(dir, "config.yaml"), bin
			t.Cleanup(func() {
				req, err := os.ReadFile(filepath.Join(dir, "request"))
				if err != nil || !strings.Contains(string(req), `"kind":"CredentialProviderRequest"`) || !strings.Contains(string(req), `"image":"`+reg.addr+`/`) {
					t.Errorf("the plugin's request: %q, %v", req, err)
				}
			})
		})
	})

	t.Run("docker-config-containerd-1.6", func(t *testing.T) {
		run(t, envEndpoint, func(t *testing.T, _ *nodekit.Options, rootDir string) {
			if err := os.MkdirAll(rootDir, 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(rootDir, "config.json"), reg.dockerConfigJSON(reg.user, reg.password), 0o600); err != nil {
				t.Fatal(err)
			}
		})
	})
}
