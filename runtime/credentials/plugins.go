package credentials

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/go-logr/logr"
	"golang.org/x/sync/singleflight"
	authenticationv1 "k8s.io/api/authentication/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
	kubeletconfigv1 "k8s.io/kubelet/config/v1"
	"k8s.io/utils/clock"
	"sigs.k8s.io/yaml"
)

// Credential-provider plugins, as the kubelet runs them
// (--image-credential-provider-config and
// --image-credential-provider-bin-dir): a config names executables of a
// directory and the images each serves; for an image one matches, the
// plugin reads a CredentialProviderRequest on its standard input and
// writes a CredentialProviderResponse, whose logins are cached for the
// response's cacheDuration (or the provider's defaultCacheDuration) per
// image, registry or globally, as the response's cacheKeyType says.

// pluginAPIVersions are the plugin protocol versions the kubelet speaks.
var pluginAPIVersions = []string{
	"credentialprovider.kubelet.k8s.io/v1",
	"credentialprovider.kubelet.k8s.io/v1alpha1",
	"credentialprovider.kubelet.k8s.io/v1beta1",
}

// configAPIVersions are the versions of the CredentialProviderConfig file.
var configAPIVersions = []string{"kubelet.config.k8s.io/v1", "kubelet.config.k8s.io/v1alpha1", "kubelet.config.k8s.io/v1beta1"}

// pluginTimeout bounds one run of a plugin (the kubelet's catch-all).
const pluginTimeout = time.Minute

// globalCacheKey caches a response whose cacheKeyType is Global (angle
// brackets: no image or registry is spelled so).
const globalCacheKey = "<global>"

// PluginOptions configures Plugins.
type PluginOptions struct {
	// ConfigPath is the CredentialProviderConfig file, or a directory of
	// them (*.json, *.yaml, *.yml, read in lexical order), as the
	// kubelet's --image-credential-provider-config.
	ConfigPath string
	// BinDir holds the plugins' executables, named as the providers (the
	// kubelet's --image-credential-provider-bin-dir).
	BinDir string
	// ServiceAccount gets a pod's service account, for the providers
	// with tokenAttributes (service account token mode). Nil: such a
	// provider serves only the pods without a service account, when it
	// does not require one.
	ServiceAccount func(ctx context.Context, namespace, name string) (*v1.ServiceAccount, error)
	// Token requests a token of the service account namespace/name, for
	// the providers with tokenAttributes (the kubelet's TokenRequest,
	// bound to the pod).
	Token func(ctx context.Context, namespace, name string, req *authenticationv1.TokenRequest) (*authenticationv1.TokenRequest, error)
	// Clock defaults to the real clock.
	Clock clock.PassiveClock
	Log   logr.Logger
}

// Plugins runs the kubelet's credential-provider plugins. It is safe for
// concurrent use.
type Plugins struct {
	log       logr.Logger
	clock     clock.PassiveClock
	providers []*pluginProvider
}

type pluginProvider struct {
	cfg    kubeletconfigv1.CredentialProvider
	bin    string
	opts   *PluginOptions
	group  singleflight.Group
	mu     sync.Mutex
	cache  map[string]cachedAuth
	purged time.Time
}

type cachedAuth struct {
	cfg     Config
	expires time.Time
}

// NewPlugins reads and validates the config as the kubelet does (a
// config that does not validate, or a provider whose executable is
// missing, is an error naming it).
func NewPlugins(opts PluginOptions) (*Plugins, error) {
	if opts.Clock == nil {
		opts.Clock = clock.RealClock{}
	}
	if fi, err := os.Stat(opts.BinDir); err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil, fmt.Errorf("plugin binary directory %s did not exist", opts.BinDir)
		}
		return nil, fmt.Errorf("error inspecting binary directory %s: %w", opts.BinDir, err)
	} else if !fi.IsDir() {
		return nil, fmt.Errorf("plugin binary directory %s is not a directory", opts.BinDir)
	}
	cfg, err := ReadPluginConfig(opts.ConfigPath)
	if err != nil {
		return nil, err
	}
	if errs := ValidatePluginConfig(cfg); len(errs) > 0 {
		return nil, fmt.Errorf("failed to validate credential provider config: %v", errs.ToAggregate())
	}
	p := &Plugins{log: opts.Log, clock: opts.Clock}
	for _, c := range cfg.Providers {
		bin := filepath.Join(opts.BinDir, c.Name)
		if _, err := exec.LookPath(bin); err != nil {
			return nil, fmt.Errorf("plugin binary executable %s: %w", bin, err)
		}
		p.providers = append(p.providers, &pluginProvider{cfg: c, bin: bin, opts: &opts, cache: map[string]cachedAuth{}, purged: opts.Clock.Now()})
	}
	return p, nil
}

// ReadPluginConfig reads a CredentialProviderConfig file, or the
// *.json, *.yaml and *.yml files of a directory in lexical order merged
// (a provider name given twice is an error), as the kubelet does.
func ReadPluginConfig(path string) (*kubeletconfigv1.CredentialProviderConfig, error) {
	if path == "" {
		return nil, errors.New("credential provider config path is empty")
	}
	fi, err := os.Stat(path)
	if err != nil {
		return nil, fmt.Errorf("unable to access path %q: %w", path, err)
	}
	files := []string{path}
	if fi.IsDir() {
		entries, err := os.ReadDir(path)
		if err != nil {
			return nil, fmt.Errorf("unable to read directory %q: %w", path, err)
		}
		files = nil
		for _, e := range entries {
			switch filepath.Ext(e.Name()) {
			case ".json", ".yaml", ".yml":
				if !e.IsDir() {
					files = append(files, filepath.Join(path, e.Name()))
				}
			}
		}
		sort.Strings(files)
		if len(files) == 0 {
			return nil, fmt.Errorf("no configuration files found in directory %q", path)
		}
	}
	merged := &kubeletconfigv1.CredentialProviderConfig{}
	seen := map[string]bool{}
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			return nil, fmt.Errorf("unable to read file %q: %w", f, err)
		}
		var tm metav1.TypeMeta
		if err := yaml.Unmarshal(data, &tm); err != nil {
			return nil, fmt.Errorf("error decoding config %q: %w", f, err)
		}
		if tm.Kind != "CredentialProviderConfig" {
			return nil, fmt.Errorf("error decoding config %q: failed to decode %q (wrong Kind)", f, tm.Kind)
		}
		if !slices.Contains(configAPIVersions, tm.APIVersion) {
			return nil, fmt.Errorf("error decoding config %q: unexpected apiVersion %q", f, tm.APIVersion)
		}
		var c kubeletconfigv1.CredentialProviderConfig
		if err := yaml.UnmarshalStrict(data, &c); err != nil {
			return nil, fmt.Errorf("error decoding config %q: %w", f, err)
		}
		for _, p := range c.Providers {
			if seen[p.Name] {
				return nil, fmt.Errorf("duplicate provider name %q found in configuration file(s)", p.Name)
			}
			seen[p.Name] = true
			merged.Providers = append(merged.Providers, p)
		}
	}
	return merged, nil
}

// ValidatePluginConfig applies the kubelet's rules to a config.
func ValidatePluginConfig(cfg *kubeletconfigv1.CredentialProviderConfig) field.ErrorList {
	var errs field.ErrorList
	fp := field.NewPath("providers")
	if len(cfg.Providers) == 0 {
		errs = append(errs, field.Required(fp, "at least 1 item in plugins is required"))
	}
	seen := map[string]bool{}
	for _, p := range cfg.Providers {
		switch {
		case strings.Contains(p.Name, "/"):
			errs = append(errs, field.Invalid(fp.Child("name"), p.Name, "provider name cannot contain '/'"))
		case strings.Contains(p.Name, " "):
			errs = append(errs, field.Invalid(fp.Child("name"), p.Name, "provider name cannot contain spaces"))
		case p.Name == "." || p.Name == "..":
			errs = append(errs, field.Invalid(fp.Child("name"), p.Name, fmt.Sprintf("provider name cannot be '%s'", p.Name)))
		case p.Name == "":
			errs = append(errs, field.Required(fp.Child("name"), ""))
		}
		if seen[p.Name] {
			errs = append(errs, field.Duplicate(fp.Child("name"), p.Name))
		}
		seen[p.Name] = true
		if p.APIVersion == "" {
			errs = append(errs, field.Required(fp.Child("apiVersion"), ""))
		} else if !slices.Contains(pluginAPIVersions, p.APIVersion) {
			errs = append(errs, field.NotSupported(fp.Child("apiVersion"), p.APIVersion, pluginAPIVersions))
		}
		if len(p.MatchImages) == 0 {
			errs = append(errs, field.Required(fp.Child("matchImages"), "at least 1 item in matchImages is required"))
		}
		for _, m := range p.MatchImages {
			if err := checkSchemelessURL(m); err != nil {
				errs = append(errs, field.Invalid(fp.Child("matchImages"), m, "match image is invalid: "+err.Error()))
			}
		}
		if p.DefaultCacheDuration == nil {
			errs = append(errs, field.Required(fp.Child("defaultCacheDuration"), ""))
		} else if p.DefaultCacheDuration.Duration < 0 {
			errs = append(errs, field.Invalid(fp.Child("defaultCacheDuration"), p.DefaultCacheDuration, "must be greater than or equal to 0"))
		}
		if t := p.TokenAttributes; t != nil {
			tp := fp.Child("tokenAttributes")
			if t.ServiceAccountTokenAudience == "" {
				errs = append(errs, field.Required(tp.Child("serviceAccountTokenAudience"), ""))
			}
			if t.RequireServiceAccount == nil {
				errs = append(errs, field.Required(tp.Child("requireServiceAccount"), ""))
			}
			if p.APIVersion != pluginAPIVersions[0] {
				errs = append(errs, field.Forbidden(tp, "tokenAttributes is only supported for "+pluginAPIVersions[0]+" API version"))
			}
			if t.RequireServiceAccount != nil && !*t.RequireServiceAccount && len(t.RequiredServiceAccountAnnotationKeys) > 0 {
				errs = append(errs, field.Forbidden(tp.Child("requiredServiceAccountAnnotationKeys"), "requireServiceAccount cannot be false when requiredServiceAccountAnnotationKeys is set"))
			}
			errs = append(errs, annotationKeys(tp.Child("requiredServiceAccountAnnotationKeys"), t.RequiredServiceAccountAnnotationKeys)...)
			errs = append(errs, annotationKeys(tp.Child("optionalServiceAccountAnnotationKeys"), t.OptionalServiceAccountAnnotationKeys)...)
			var both []string
			for _, k := range t.RequiredServiceAccountAnnotationKeys {
				if slices.Contains(t.OptionalServiceAccountAnnotationKeys, k) {
					both = append(both, k)
				}
			}
			if len(both) > 0 {
				errs = append(errs, field.Invalid(tp, both, "annotation keys cannot be both required and optional"))
			}
			valid := []string{string(kubeletconfigv1.ServiceAccountServiceAccountTokenCacheType), string(kubeletconfigv1.TokenServiceAccountTokenCacheType)}
			switch {
			case t.CacheType == "":
				errs = append(errs, field.Required(tp.Child("cacheType"), "cacheType is required to be set when tokenAttributes is specified. Supported values are: "+strings.Join(valid, ", ")))
			case !slices.Contains(valid, string(t.CacheType)):
				errs = append(errs, field.NotSupported(tp.Child("cacheType"), t.CacheType, valid))
			}
		}
	}
	return errs
}

func annotationKeys(fp *field.Path, keys []string) field.ErrorList {
	var errs field.ErrorList
	seen := map[string]bool{}
	for _, k := range keys {
		for _, msg := range validation.IsQualifiedName(strings.ToLower(k)) {
			errs = append(errs, field.Invalid(fp, k, msg))
		}
		if seen[k] {
			errs = append(errs, field.Duplicate(fp, k))
		}
		seen[k] = true
	}
	return errs
}

// Credentials implements Provider: the logins of every provider whose
// matchImages match image's repository, from its cache or a run of its
// plugin. A plugin that fails is logged and gives none, as the kubelet's.
func (p *Plugins) Credentials(ctx context.Context, pod *v1.Pod, image string) []Credential {
	if p == nil {
		return nil
	}
	repo, err := Repository(image)
	if err != nil {
		return nil
	}
	var out []Credential
	for _, pp := range p.providers {
		cfg, sa, err := pp.provide(ctx, p.clock, repo, pod)
		if err != nil {
			p.log.Error(err, "failed getting credential from external registry credential provider", "provider", pp.cfg.Name, "image", repo)
			continue
		}
		if len(cfg) == 0 {
			continue
		}
		var kr Keyring
		kr.Add(nil, cfg)
		for _, c := range kr.lookupRepo(repo) {
			c.ServiceAccount = sa
			out = append(out, c)
		}
	}
	return out
}

func (pp *pluginProvider) matches(repo string) bool {
	for _, m := range pp.cfg.MatchImages {
		if urlsMatch(m, repo) {
			return true
		}
	}
	return false
}

// provide returns the provider's docker config for repo (nil when it
// does not serve it), and the service account its token came from.
func (pp *pluginProvider) provide(ctx context.Context, clk clock.PassiveClock, repo string, pod *v1.Pod) (Config, *ServiceAccountRef, error) {
	if !pp.matches(repo) {
		return nil, nil, nil
	}
	var (
		token, saKey string
		annotations  map[string]string
		sa           *ServiceAccountRef
	)
	if t := pp.cfg.TokenAttributes; t != nil {
		saName := ""
		if pod != nil {
			saName = pod.Spec.ServiceAccountName
		}
		if saName == "" {
			if t.RequireServiceAccount != nil && *t.RequireServiceAccount {
				return nil, nil, nil
			}
		} else {
			if pp.opts.ServiceAccount == nil || pp.opts.Token == nil {
				return nil, nil, fmt.Errorf("provider %s needs a token of service account %s/%s, and the agent has no API server to request it", pp.cfg.Name, pod.Namespace, saName)
			}
			acct, err := pp.opts.ServiceAccount(ctx, pod.Namespace, saName)
			if err != nil {
				return nil, nil, fmt.Errorf("failed to get service account %s/%s: %w", pod.Namespace, saName, err)
			}
			annotations = map[string]string{}
			for _, k := range t.RequiredServiceAccountAnnotationKeys {
				v, ok := acct.Annotations[k]
				if !ok {
					// A workload's way to opt in: not an error.
					return nil, nil, nil
				}
				annotations[k] = v
			}
			for _, k := range t.OptionalServiceAccountAnnotationKeys {
				if v, ok := acct.Annotations[k]; ok {
					annotations[k] = v
				}
			}
			tr, err := pp.opts.Token(ctx, pod.Namespace, saName, &authenticationv1.TokenRequest{
				ObjectMeta: metav1.ObjectMeta{UID: acct.UID},
				Spec: authenticationv1.TokenRequestSpec{
					Audiences:      []string{t.ServiceAccountTokenAudience},
					BoundObjectRef: &authenticationv1.BoundObjectReference{APIVersion: "v1", Kind: "Pod", Name: pod.Name, UID: pod.UID},
				},
			})
			if err != nil {
				return nil, nil, fmt.Errorf("error getting service account token %s/%s: %w", pod.Namespace, saName, err)
			}
			token = tr.Status.Token
			sa = &ServiceAccountRef{Namespace: pod.Namespace, Name: saName, UID: acct.UID}
			if t.CacheType == kubeletconfigv1.TokenServiceAccountTokenCacheType {
				saKey = keyOf("token", hashOf(token))
			} else {
				saKey = keyOf("sa", pod.Namespace, saName, string(acct.UID), annotationsKey(annotations))
			}
		}
	}

	if cfg, ok := pp.cached(clk, repo, saKey); ok {
		return cfg, sa, nil
	}
	flight := repo
	if token != "" {
		flight = keyOf(repo, hashOf(token), annotationsKey(annotations))
	}
	v, err, _ := pp.group.Do(flight, func() (any, error) {
		return pp.exec(ctx, repo, token, annotations)
	})
	if err != nil {
		return nil, nil, err
	}
	resp := v.(*pluginResponse)
	if token != "" && pp.cfg.TokenAttributes.CacheType != kubeletconfigv1.TokenServiceAccountTokenCacheType {
		for _, a := range resp.Auth {
			if a.Password == token {
				return nil, nil, fmt.Errorf("credential provider plugin %s returned the service account token as the password for image %q, which is not allowed when service account cache type is not set to 'Token'", pp.cfg.Name, repo)
			}
		}
	}
	var base string
	switch resp.CacheKeyType {
	case "Image":
		base = repo
	case "Registry":
		base, _, _ = strings.Cut(repo, "/")
	case "Global":
		base = globalCacheKey
	default:
		return nil, nil, fmt.Errorf("credential provider plugin %s did not return a valid cacheKeyType: %q", pp.cfg.Name, resp.CacheKeyType)
	}
	cfg := make(Config, len(resp.Auth))
	for k, a := range resp.Auth {
		cfg[k] = Entry{Username: a.Username, Password: a.Password}
	}
	d := pp.cfg.DefaultCacheDuration.Duration
	if resp.CacheDuration != nil {
		d = resp.CacheDuration.Duration
	}
	if d > 0 {
		pp.mu.Lock()
		pp.cache[keyOf(base, saKey)] = cachedAuth{cfg: cfg, expires: clk.Now().Add(d)}
		pp.mu.Unlock()
	}
	return cfg, sa, nil
}

// cached returns the cached config for repo: by image, then registry,
// then global.
func (pp *pluginProvider) cached(clk clock.PassiveClock, repo, saKey string) (Config, bool) {
	now := clk.Now()
	pp.mu.Lock()
	defer pp.mu.Unlock()
	if now.Sub(pp.purged) > 15*time.Minute {
		for k, c := range pp.cache {
			if now.After(c.expires) {
				delete(pp.cache, k)
			}
		}
		pp.purged = now
	}
	registry, _, _ := strings.Cut(repo, "/")
	for _, base := range []string{repo, registry, globalCacheKey} {
		k := keyOf(base, saKey)
		if c, ok := pp.cache[k]; ok {
			if now.After(c.expires) {
				delete(pp.cache, k)
				continue
			}
			return c.cfg, true
		}
	}
	return nil, false
}

// pluginResponse is a CredentialProviderResponse in any of the
// protocol's versions (they share their fields).
type pluginResponse struct {
	metav1.TypeMeta `json:",inline"`
	CacheKeyType    string           `json:"cacheKeyType"`
	CacheDuration   *metav1.Duration `json:"cacheDuration,omitempty"`
	Auth            map[string]struct {
		Username string `json:"username"`
		Password string `json:"password"`
	} `json:"auth,omitempty"`
}

// exec runs the plugin once: the request on its standard input, the
// response on its standard output, the config's args and env (after the
// agent's own environment).
func (pp *pluginProvider) exec(ctx context.Context, repo, token string, annotations map[string]string) (*pluginResponse, error) {
	req := struct {
		metav1.TypeMeta           `json:",inline"`
		Image                     string            `json:"image"`
		ServiceAccountToken       string            `json:"serviceAccountToken,omitempty"`
		ServiceAccountAnnotations map[string]string `json:"serviceAccountAnnotations,omitempty"`
	}{metav1.TypeMeta{APIVersion: pp.cfg.APIVersion, Kind: "CredentialProviderRequest"}, repo, token, annotations}
	in, err := json.Marshal(req)
	if err != nil {
		return nil, fmt.Errorf("failed to encode auth request: %w", err)
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), pluginTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, pp.bin, pp.cfg.Args...)
	var stdout, stderr bytes.Buffer
	cmd.Stdin, cmd.Stdout, cmd.Stderr = bytes.NewReader(in), &stdout, &stderr
	cmd.Env = os.Environ()
	for _, e := range pp.cfg.Env {
		cmd.Env = append(cmd.Env, e.Name+"="+e.Value)
	}
	if err := cmd.Run(); err != nil {
		if ctx.Err() != nil {
			err = ctx.Err()
		}
		return nil, fmt.Errorf("error execing credential provider plugin %s for image %s: %w: %s", pp.cfg.Name, repo, err, strings.TrimSpace(stderr.String()))
	}
	var tm metav1.TypeMeta
	if err := json.Unmarshal(stdout.Bytes(), &tm); err != nil {
		return nil, fmt.Errorf("error reading GVK from response of credential provider plugin %s: %w", pp.cfg.Name, err)
	}
	if tm.APIVersion != pp.cfg.APIVersion {
		return nil, fmt.Errorf("apiVersion from credential plugin response did not match expected apiVersion:%s, actual apiVersion:%s", pp.cfg.APIVersion, tm.APIVersion)
	}
	if tm.Kind != "CredentialProviderResponse" {
		return nil, fmt.Errorf("failed to decode CredentialProviderResponse, unexpected Kind: %q", tm.Kind)
	}
	var resp pluginResponse
	dec := json.NewDecoder(bytes.NewReader(stdout.Bytes()))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&resp); err != nil {
		// Not wrapped: the response may hold credentials.
		return nil, fmt.Errorf("error decoding credential provider plugin %s response from stdout", pp.cfg.Name)
	}
	return &resp, nil
}

// ServiceAccountRef identifies a service account, its UID included.
type ServiceAccountRef struct {
	Namespace, Name string
	UID             types.UID
}

func hashOf(s string) string {
	h := sha256.Sum256([]byte(s))
	return hex.EncodeToString(h[:])
}

// keyOf joins parts unambiguously (length-prefixed).
func keyOf(parts ...string) string {
	var b strings.Builder
	for _, p := range parts {
		fmt.Fprintf(&b, "%d:%s|", len(p), p)
	}
	return b.String()
}

func annotationsKey(a map[string]string) string {
	keys := make([]string, 0, len(a))
	for k := range a {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, 0, 2*len(keys))
	for _, k := range keys {
		parts = append(parts, k, a[k])
	}
	return keyOf(parts...)
}

// checkSchemelessURL tells whether s parses as a URL once given a
// scheme, as the kubelet checks matchImages.
func checkSchemelessURL(s string) error {
	if s == "" {
		return errors.New("empty")
	}
	_, err := parseSchemeless(s)
	return err
}
