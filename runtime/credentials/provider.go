package credentials

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/go-logr/logr"
	v1 "k8s.io/api/core/v1"
)

// A Provider gives the node-wide credentials for a pull of image by pod:
// they are tried after those of the pod's imagePullSecrets. A Keyring
// (logins the caller holds), NodeFiles (the kubelet's node docker config
// files) and Plugins (the kubelet's credential-provider plugins) are
// Providers; Providers chains them.
type Provider interface {
	Credentials(ctx context.Context, pod *v1.Pod, image string) []Credential
}

// Credentials implements Provider: the keyring's Lookup of image.
func (k *Keyring) Credentials(_ context.Context, _ *v1.Pod, image string) []Credential {
	return k.Lookup(image)
}

// Providers chains Providers: the credentials of each, in order. A nil
// element is skipped.
type Providers []Provider

// Credentials implements Provider.
func (ps Providers) Credentials(ctx context.Context, pod *v1.Pod, image string) []Credential {
	var out []Credential
	for _, p := range ps {
		if p == nil {
			continue
		}
		out = append(out, p.Credentials(ctx, pod, image)...)
	}
	return out
}

// NodeFiles reads the node's docker config as the kubelet does, at each
// lookup (a login written while the agent runs is used at the next
// pull): the first config.json found in RootDir, the working directory,
// $HOME/.docker and /.docker ({"auths": ...}), else the first .dockercfg
// in RootDir, the working directory, $HOME and / (the legacy format). A
// file that does not parse is logged and the search goes on, as the
// kubelet's. Its credentials are node-wide: an image pulled with them is
// used by every pod.
type NodeFiles struct {
	// RootDir is the agent's root directory (the kubelet's
	// --root-dir); "" leaves it out of the search.
	RootDir string
	// Home is the home directory searched; "" is $HOME.
	Home string
	// Root is the file system's root searched last; "" is "/". Tests
	// point it elsewhere.
	Root string
	Log  logr.Logger
}

// Paths returns the files NodeFiles reads, in the order it tries them:
// each config.json, then each .dockercfg.
func (n NodeFiles) Paths() []string {
	home, root := n.Home, n.Root
	if home == "" {
		home = os.Getenv("HOME")
	}
	if root == "" {
		root = "/"
	}
	dirs := func(homeDir string, rootDir string) []string {
		var out []string
		if n.RootDir != "" {
			out = append(out, n.RootDir)
		}
		// The kubelet's working-directory entry is "", a relative path.
		out = append(out, "")
		if home != "" {
			out = append(out, homeDir)
		}
		return append(out, rootDir)
	}
	var out []string
	for _, d := range dirs(filepath.Join(home, ".docker"), filepath.Join(root, ".docker")) {
		out = append(out, filepath.Join(d, "config.json"))
	}
	for _, d := range dirs(home, root) {
		out = append(out, filepath.Join(d, ".dockercfg"))
	}
	return out
}

// Config returns the first node docker config found (see NodeFiles) and
// its path; none found is an empty config and "".
func (n NodeFiles) Config() (Config, string) {
	for _, p := range n.Paths() {
		data, err := os.ReadFile(p)
		if err != nil {
			if !errors.Is(err, fs.ErrNotExist) {
				n.Log.Error(err, "cannot read the node docker config", "path", p)
			}
			continue
		}
		parse := ParseDockerConfigJSON
		if filepath.Base(p) == ".dockercfg" {
			parse = ParseDockercfg
		}
		cfg, err := parse(data)
		if err != nil {
			n.Log.Error(err, "the node docker config does not parse; trying the next one", "path", p)
			continue
		}
		return cfg, p
	}
	return nil, ""
}

// Credentials implements Provider.
func (n NodeFiles) Credentials(_ context.Context, _ *v1.Pod, image string) []Credential {
	cfg, _ := n.Config()
	if len(cfg) == 0 {
		return nil
	}
	var kr Keyring
	kr.Add(nil, cfg)
	return kr.Lookup(image)
}
