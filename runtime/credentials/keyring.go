package credentials

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/url"
	"path/filepath"
	"slices"
	"strings"

	"github.com/distribution/reference"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodekit/nodekit/objects"
)

// Credential is one registry login.
type Credential struct {
	Username string
	Password string
	// Source is the Secret the credential comes from; nil for one added
	// without a source (node-wide).
	Source *SecretRef
	// ServiceAccount is the service account whose token a
	// credential-provider plugin turned into this login (its service
	// account token mode); nil otherwise. Such a login is not node-wide:
	// the pods of that service account share it.
	ServiceAccount *ServiceAccountRef
}

// SecretRef identifies a Secret, its UID included: a Secret deleted and
// created again under the same name is another Secret.
type SecretRef struct {
	Namespace, Name string
	UID             types.UID
}

// AuthConfig is the credential as CRI's PullImage takes it: the username
// and password, as the kubelet sends them.
func (c Credential) AuthConfig() *runtimeapi.AuthConfig {
	return &runtimeapi.AuthConfig{Username: c.Username, Password: c.Password}
}

// Hash identifies the credential's secret material (not its source): two
// Secrets holding the same login have the same hash.
func (c Credential) Hash() string {
	h := sha256.New()
	h.Write([]byte(c.Username))
	h.Write([]byte{0})
	h.Write([]byte(c.Password))
	return hex.EncodeToString(h.Sum(nil))
}

// Entry is one registry's entry of a docker config.
type Entry struct {
	Username string `json:"username,omitempty"`
	Password string `json:"password,omitempty"`
	Email    string `json:"email,omitempty"`
}

// UnmarshalJSON reads an entry, decoding its auth field (base64 of
// "user:password", padded or not) over username and password.
func (e *Entry) UnmarshalJSON(data []byte) error {
	var raw struct {
		Username string `json:"username,omitempty"`
		Password string `json:"password,omitempty"`
		Email    string `json:"email,omitempty"`
		Auth     string `json:"auth,omitempty"`
	}
	if err := json.Unmarshal(data, &raw); err != nil {
		return err
	}
	e.Username, e.Password, e.Email = raw.Username, raw.Password, raw.Email
	if raw.Auth == "" {
		return nil
	}
	var dec []byte
	var err error
	if strings.HasSuffix(strings.TrimSpace(raw.Auth), "=") {
		dec, err = base64.StdEncoding.DecodeString(raw.Auth)
	} else {
		dec, err = base64.RawStdEncoding.DecodeString(raw.Auth)
	}
	if err != nil {
		return fmt.Errorf("auth field: %w", err)
	}
	user, pass, ok := strings.Cut(string(dec), ":")
	if !ok {
		return errors.New("auth field must be formatted as base64(username:password)")
	}
	e.Username, e.Password = user, pass
	return nil
}

// Config is a docker config: registry URL → entry (the legacy .dockercfg
// format, and the auths of .dockerconfigjson).
type Config map[string]Entry

// ParseDockerConfigJSON parses a .dockerconfigjson document.
func ParseDockerConfigJSON(data []byte) (Config, error) {
	var doc struct {
		Auths Config `json:"auths"`
	}
	if err := json.Unmarshal(data, &doc); err != nil {
		return nil, err
	}
	return doc.Auths, nil
}

// ParseDockercfg parses a legacy .dockercfg document.
func ParseDockercfg(data []byte) (Config, error) {
	var cfg Config
	if err := json.Unmarshal(data, &cfg); err != nil {
		return nil, err
	}
	return cfg, nil
}

// ConfigError is a pull Secret whose docker config does not parse.
type ConfigError struct {
	Namespace, Name string
	// Key is the Secret's key: .dockerconfigjson or .dockercfg.
	Key string
	Err error
}

func (e *ConfigError) Error() string {
	return fmt.Sprintf("image pull secret %s/%s: malformed %s: %v", e.Namespace, e.Name, e.Key, e.Err)
}

func (e *ConfigError) Unwrap() error { return e.Err }

// Keyring holds credentials indexed by registry URL. The zero value is
// an empty keyring.
type Keyring struct {
	// index are the keys, most specific (reverse lexical order) first.
	index []string
	creds map[string][]Credential
}

// NewKeyring returns the keyring of the docker-config Secrets among
// secrets, in their order; a Secret whose config does not parse fails it
// with a *ConfigError.
func NewKeyring(secrets []v1.Secret) (*Keyring, error) {
	kr := &Keyring{}
	for i := range secrets {
		s := &secrets[i]
		var key string
		var parse func([]byte) (Config, error)
		switch {
		case s.Type == v1.SecretTypeDockerConfigJson && len(s.Data[v1.DockerConfigJsonKey]) > 0:
			key, parse = v1.DockerConfigJsonKey, ParseDockerConfigJSON
		case s.Type == v1.SecretTypeDockercfg && len(s.Data[v1.DockerConfigKey]) > 0:
			key, parse = v1.DockerConfigKey, ParseDockercfg
		default:
			continue
		}
		cfg, err := parse(s.Data[key])
		if err != nil {
			return nil, &ConfigError{Namespace: s.Namespace, Name: s.Name, Key: key, Err: err}
		}
		kr.Add(&SecretRef{Namespace: s.Namespace, Name: s.Name, UID: s.UID}, cfg)
	}
	return kr, nil
}

// Add adds the entries of cfg, from source (nil: node-wide). An entry
// whose key is not a URL is skipped, as the kubelet skips it.
func (k *Keyring) Add(source *SecretRef, cfg Config) {
	if k.creds == nil {
		k.creds = map[string][]Credential{}
	}
	// The kubelet ranges over a map; sorted, two spellings of one
	// registry in one config come in a stable order.
	locs := make([]string, 0, len(cfg))
	for loc := range cfg {
		locs = append(locs, loc)
	}
	slices.Sort(locs)
	for _, loc := range locs {
		key, ok := entryKey(loc)
		if !ok {
			continue
		}
		e := cfg[loc]
		if _, seen := k.creds[key]; !seen {
			k.index = append(k.index, key)
		}
		k.creds[key] = append(k.creds[key], Credential{Username: e.Username, Password: e.Password, Source: source})
	}
	slices.SortFunc(k.index, func(a, b string) int { return strings.Compare(b, a) })
}

// entryKey is the index key of a docker config's registry URL: host and
// path, without scheme and without a leading /v1/ or /v2/.
func entryKey(loc string) (string, bool) {
	v := loc
	if !strings.HasPrefix(v, "https://") && !strings.HasPrefix(v, "http://") {
		v = "https://" + v
	}
	u, err := url.Parse(v)
	if err != nil {
		return "", false
	}
	p := u.Path
	if strings.HasPrefix(p, "/v2/") || strings.HasPrefix(p, "/v1/") {
		p = p[3:]
	}
	if p != "" && p != "/" {
		return u.Host + p, true
	}
	return u.Host, true
}

// The Docker Hub key and its names.
const defaultRegistryKey = "index.docker.io"

// Repository is the image's repository, normalized as the kubelet does
// (busybox:1.36 is docker.io/library/busybox), the name credentials are
// looked up by.
func Repository(image string) (string, error) {
	named, err := reference.ParseNormalizedNamed(image)
	if err != nil {
		return "", err
	}
	return named.Name(), nil
}

// Lookup returns the credentials for image, most specific first (see the
// package doc); nil when none matches. An image that does not parse gets
// none.
func (k *Keyring) Lookup(image string) []Credential {
	if k == nil {
		return nil
	}
	repo, err := Repository(image)
	if err != nil {
		return nil
	}
	return k.lookupRepo(repo)
}

func (k *Keyring) lookupRepo(repo string) []Credential {
	var out []Credential
	for _, key := range k.index {
		if urlsMatch(key, repo) {
			out = append(out, k.creds[key]...)
		}
	}
	if len(out) > 0 {
		return out
	}
	if isDefaultRegistry(repo) {
		return slices.Clone(k.creds[defaultRegistryKey])
	}
	return nil
}

// Len is the number of credentials in the keyring.
func (k *Keyring) Len() int {
	if k == nil {
		return 0
	}
	n := 0
	for _, c := range k.creds {
		n += len(c)
	}
	return n
}

// isDefaultRegistry tells whether repo pulls from Docker Hub.
func isDefaultRegistry(repo string) bool {
	first, _, found := strings.Cut(repo, "/")
	if first == "" {
		return false
	}
	if !found || first == "docker.io" || first == "index.docker.io" {
		return true
	}
	return !strings.ContainsAny(first, ".:")
}

// urlsMatch tells whether the schemeless target URL matches the schemeless
// glob URL: same number of host parts, each matching as a glob, equal
// ports, the glob's path a prefix of the target's.
func urlsMatch(glob, target string) bool {
	g, err := parseSchemeless(glob)
	if err != nil {
		return false
	}
	t, err := parseSchemeless(target)
	if err != nil {
		return false
	}
	gParts, gPort := splitHost(g.Host)
	tParts, tPort := splitHost(t.Host)
	if gPort != tPort || len(gParts) != len(tParts) || !strings.HasPrefix(t.Path, g.Path) {
		return false
	}
	for i, p := range gParts {
		if ok, err := filepath.Match(p, tParts[i]); err != nil || !ok {
			return false
		}
	}
	return true
}

func splitHost(hostport string) ([]string, string) {
	host, port, err := net.SplitHostPort(hostport)
	if err != nil {
		host, port = hostport, ""
	}
	return strings.Split(host, "."), port
}

// PodSecrets gets the pod's imagePullSecrets from get, in the pod's
// order, and names those it could not get (missing, or any other error),
// as the kubelet's getPullSecretsForPod: a pull goes on without them.
// Entries with an empty name are ignored. The service account's
// imagePullSecrets are the pod's: the API server's ServiceAccount
// admission copies them into the pod's spec.
func PodSecrets(ctx context.Context, get objects.SecretGetter, pod *v1.Pod) (secrets []v1.Secret, failed []string) {
	for _, ref := range pod.Spec.ImagePullSecrets {
		if ref.Name == "" {
			continue
		}
		if get == nil {
			failed = append(failed, ref.Name)
			continue
		}
		s, err := get.GetSecret(ctx, pod.Namespace, ref.Name)
		if err != nil || s == nil {
			failed = append(failed, ref.Name)
			continue
		}
		secrets = append(secrets, *s)
	}
	return secrets, failed
}

// parseSchemeless parses a URL written without its scheme.
func parseSchemeless(s string) (*url.URL, error) {
	return url.Parse("https://" + s)
}
