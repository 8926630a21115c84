package credentials

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/go-logr/logr/funcr"
	authenticationv1 "k8s.io/api/authentication/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	kubeletconfigv1 "k8s.io/kubelet/config/v1"
	clocktesting "k8s.io/utils/clock/testing"
)

// pluginScript is a credential-provider plugin: it saves each request in
// $DIR/requests (one per line), and answers $DIR/response, or fails
// with a message when $DIR/fail exists.
const pluginScript = `#!/bin/sh
req=$(cat)
echo "$req" >> "$DIR/requests"
if [ -e "$DIR/fail" ]; then echo "no credentials for you" >&2; exit 3; fi
cat "$DIR/response"
`

type pluginFixture struct {
	t     *testing.T
	dir   string
	clock *clocktesting.FakeClock
}

func newPluginFixture(t *testing.T) *pluginFixture {
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "bin"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "bin", "test-plugin"), []byte(pluginScript), 0o755); err != nil {
		t.Fatal(err)
	}
	return &pluginFixture{t: t, dir: dir, clock: clocktesting.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))}
}

// config writes the plugin's config with the given provider fields (as
// YAML lines under the provider) and returns its path.
func (f *pluginFixture) config(extra string) string {
	f.t.Helper()
	cfg := `apiVersion: kubelet.config.k8s.io/v1
kind: CredentialProviderConfig
providers:
- name: test-plugin
  apiVersion: credentialprovider.kubelet.k8s.io/v1
  defaultCacheDuration: 10m
  env:
  - name: DIR
    value: ` + f.dir + `
` + extra
	p := filepath.Join(f.dir, "config.yaml")
	if err := os.WriteFile(p, []byte(cfg), 0o600); err != nil {
		f.t.Fatal(err)
	}
	return p
}

func (f *pluginFixture) respond(v string) {
	f.t.Helper()
	if err := os.WriteFile(filepath.Join(f.dir, "response"), []byte(v), 0o600); err != nil {
		f.t.Fatal(err)
	}
}

func (f *pluginFixture) requests() []map[string]any {
	f.t.Helper()
	data, err := os.ReadFile(filepath.Join(f.dir, "requests"))
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		f.t.Fatal(err)
	}
	var out []map[string]any
	for _, l := range strings.Split(strings.TrimSpace(string(data)), "\n") {
		var m map[string]any
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			f.t.Fatalf("request %q: %v", l, err)
		}
		out = append(out, m)
	}
	return out
}

func (f *pluginFixture) plugins(extra string, opts PluginOptions) *Plugins {
	f.t.Helper()
	opts.ConfigPath, opts.BinDir, opts.Clock = f.config(extra), filepath.Join(f.dir, "bin"), f.clock
	p, err := NewPlugins(opts)
	if err != nil {
		f.t.Fatal(err)
	}
	return p
}

func response(cacheKeyType, duration string, auth map[string][2]string) string {
	m := map[string]any{"apiVersion": "credentialprovider.kubelet.k8s.io/v1", "kind": "CredentialProviderResponse", "cacheKeyType": cacheKeyType}
	if duration != "" {
		m["cacheDuration"] = duration
	}
	a := map[string]any{}
	for k, v := range auth {
		a[k] = map[string]string{"username": v[0], "password": v[1]}
	}
	m["auth"] = a
	b, _ := json.Marshal(m)
	return string(b)
}

func logins(cs []Credential) []string {
	var out []string
	for _, c := range cs {
		out = append(out, c.Username+":"+c.Password)
	}
	return out
}

func TestPluginsRequestResponseAndCache(t *testing.T) {
	f := newPluginFixture(t)
	p := f.plugins("  matchImages: [\"*.example.com\", \"registry.local:5000\"]\n", PluginOptions{})
	f.respond(response("Registry", "", map[string][2]string{"*.example.com": {"u", "p"}}))
	ctx := context.Background()

	got := p.Credentials(ctx, nil, "a.example.com/team/app:1")
	if strings.Join(logins(got), ",") != "u:p" || got[0].Source != nil || got[0].ServiceAccount != nil {
		t.Fatalf("credentials %+v, want the plugin's node-wide u:p", got)
	}
	reqs := f.requests()
	if len(reqs) != 1 || reqs[0]["image"] != "a.example.com/team/app" || reqs[0]["kind"] != "CredentialProviderRequest" || reqs[0]["apiVersion"] != "credentialprovider.kubelet.k8s.io/v1" {
		t.Fatalf("requests %v, want one for the repository a.example.com/team/app", reqs)
	}
	// Cached per registry for the default 10m: another image of that
	// registry runs nothing.
	if got := p.Credentials(ctx, nil, "a.example.com/other"); len(got) != 1 {
		t.Errorf("from the cache: %v", got)
	}
	if n := len(f.requests()); n != 1 {
		t.Errorf("%d plugin runs, want 1 (cached by registry)", n)
	}
	// An image no matchImages entry covers runs nothing.
	if got := p.Credentials(ctx, nil, "docker.io/library/busybox"); got != nil {
		t.Errorf("busybox: %v", got)
	}
	// A login for another host than the image's is not given for it.
	if got := p.Credentials(ctx, nil, "registry.local:5000/app"); got != nil {
		t.Errorf("registry.local:5000 got the example.com login: %v", got)
	}
	if n := len(f.requests()); n != 2 {
		t.Errorf("%d plugin runs, want 2", n)
	}
	// Past the cache duration, the plugin runs again.
	f.clock.Step(11 * time.Minute)
	p.Credentials(ctx, nil, "a.example.com/team/app")
	if n := len(f.requests()); n != 3 {
		t.Errorf("%d plugin runs after expiry, want 3", n)
	}
}

func TestPluginsCacheKeyTypes(t *testing.T) {
	for _, tc := range []struct {
		keyType, duration string
		// second is pulled after first; runs is how many plugin runs
		// the two lookups take.
		first, second string
		runs          int
	}{
		{"Image", "", "a.example.com/x", "a.example.com/x", 1},
		{"Image", "", "a.example.com/x", "a.example.com/y", 2},
		{"Registry", "", "a.example.com/x", "a.example.com/y", 1},
		{"Registry", "", "a.example.com/x", "b.example.com/x", 2},
		{"Global", "", "a.example.com/x", "b.example.com/y", 1},
		{"Global", "0s", "a.example.com/x", "a.example.com/x", 2},
		{"Global", "1m", "a.example.com/x", "a.example.com/x", 1},
	} {
		f := newPluginFixture(t)
		p := f.plugins("  matchImages: [\"*.example.com\"]\n", PluginOptions{})
		f.respond(response(tc.keyType, tc.duration, map[string][2]string{"*.example.com": {"u", "p"}}))
		p.Credentials(context.Background(), nil, tc.first)
		if got := p.Credentials(context.Background(), nil, tc.second); len(got) != 1 {
			t.Errorf("%+v: %v", tc, got)
		}
		if n := len(f.requests()); n != tc.runs {
			t.Errorf("%+v: %d runs, want %d", tc, n, tc.runs)
		}
	}
}

func TestPluginsBadResponses(t *testing.T) {
	for name, setUp := range map[string]func(f *pluginFixture){
		"exit status": func(f *pluginFixture) {
			os.WriteFile(filepath.Join(f.dir, "fail"), nil, 0o600)
		},
		"not JSON":         func(f *pluginFixture) { f.respond("{oops") },
		"other apiVersion": func(f *pluginFixture) { f.respond(strings.Replace(response("Image", "", nil), "/v1", "/v1beta1", 1)) },
		"other kind": func(f *pluginFixture) {
			f.respond(strings.Replace(response("Image", "", nil), "CredentialProviderResponse", "Pod", 1))
		},
		"unknown cacheKey": func(f *pluginFixture) {
			f.respond(response("Forever", "", map[string][2]string{"*.example.com": {"u", "p"}}))
		},
		"unknown field":       func(f *pluginFixture) { f.respond(strings.Replace(response("Image", "", nil), "{", `{"extra":1,`, 1)) },
		"empty response body": func(f *pluginFixture) { f.respond("") },
	} {
		f := newPluginFixture(t)
		var logged strings.Builder
		p := f.plugins("  matchImages: [\"*.example.com\"]\n", PluginOptions{Log: testLogger(&logged)})
		setUp(f)
		if got := p.Credentials(context.Background(), nil, "a.example.com/x"); got != nil {
			t.Errorf("%s: credentials %v, want none", name, got)
		}
		if !strings.Contains(logged.String(), "test-plugin") {
			t.Errorf("%s: the log %q does not name the provider", name, logged.String())
		}
	}
}

func TestPluginsServiceAccountTokens(t *testing.T) {
	sa := &v1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "puller", UID: "sa-uid", Annotations: map[string]string{"example.com/role": "r1", "example.com/region": "eu"}}}
	var tokenReqs []*authenticationv1.TokenRequest
	opts := PluginOptions{
		ServiceAccount: func(_ context.Context, ns, name string) (*v1.ServiceAccount, error) {
			if ns == sa.Namespace && name == sa.Name {
				return sa, nil
			}
			return nil, errors.New("not found")
		},
		Token: func(_ context.Context, ns, name string, tr *authenticationv1.TokenRequest) (*authenticationv1.TokenRequest, error) {
			tokenReqs = append(tokenReqs, tr)
			out := tr.DeepCopy()
			out.Status.Token = "token-for-" + string(tr.Spec.BoundObjectRef.UID)
			return out, nil
		},
	}
	pod := func(name, sa string) *v1.Pod {
		return &v1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, UID: types.UID("uid-" + name)}, Spec: v1.PodSpec{ServiceAccountName: sa}}
	}
	token := `  matchImages: ["*.example.com"]
  tokenAttributes:
    serviceAccountTokenAudience: registry.example.com
    requireServiceAccount: true
    cacheType: ServiceAccount
    requiredServiceAccountAnnotationKeys: [example.com/role]
    optionalServiceAccountAnnotationKeys: [example.com/region, example.com/absent]
`
	f := newPluginFixture(t)
	p := f.plugins(token, opts)
	f.respond(response("Registry", "", map[string][2]string{"*.example.com": {"sa-user", "sa-pass"}}))
	ctx := context.Background()

	// A pod without a service account: the plugin requires one.
	if got := p.Credentials(ctx, pod("a", ""), "a.example.com/x"); got != nil || len(f.requests()) != 0 {
		t.Fatalf("no service account: %v, %d runs", got, len(f.requests()))
	}
	got := p.Credentials(ctx, pod("a", "puller"), "a.example.com/x")
	if len(got) != 1 || got[0].ServiceAccount == nil || *got[0].ServiceAccount != (ServiceAccountRef{Namespace: "ns", Name: "puller", UID: "sa-uid"}) {
		t.Fatalf("credentials %+v, want one for service account ns/puller", got)
	}
	reqs := f.requests()
	if len(reqs) != 1 || reqs[0]["serviceAccountToken"] != "token-for-uid-a" {
		t.Fatalf("requests %v, want the pod's token", reqs)
	}
	ann, _ := reqs[0]["serviceAccountAnnotations"].(map[string]any)
	if len(ann) != 2 || ann["example.com/role"] != "r1" || ann["example.com/region"] != "eu" {
		t.Errorf("annotations sent %v, want the required and the present optional one", ann)
	}
	tr := tokenReqs[0]
	if tr.Spec.Audiences[0] != "registry.example.com" || tr.Spec.BoundObjectRef.Kind != "Pod" || tr.Spec.BoundObjectRef.Name != "a" || tr.UID != "sa-uid" {
		t.Errorf("token request %+v", tr)
	}
	// cacheType ServiceAccount: another pod of the service account is
	// served from the cache (its token is still requested).
	p.Credentials(ctx, pod("b", "puller"), "a.example.com/y")
	if n := len(f.requests()); n != 1 {
		t.Errorf("%d runs for a second pod of the service account, want 1", n)
	}

	// The service account lacks a required annotation: the plugin is
	// not run, and it is not an error.
	delete(sa.Annotations, "example.com/role")
	f.clock.Step(time.Hour)
	if got := p.Credentials(ctx, pod("c", "puller"), "a.example.com/x"); got != nil || len(f.requests()) != 1 {
		t.Errorf("without the required annotation: %v, %d runs", got, len(f.requests()))
	}
	sa.Annotations["example.com/role"] = "r1"

	// A plugin answering the token itself as the password, with
	// cacheType ServiceAccount, is refused.
	f.respond(response("Registry", "", map[string][2]string{"*.example.com": {"u", "token-for-uid-d"}}))
	if got := p.Credentials(ctx, pod("d", "puller"), "a.example.com/x"); got != nil {
		t.Errorf("the token echoed as password was accepted: %v", got)
	}

	// Without an API server the token cannot be requested: logged, none.
	f2 := newPluginFixture(t)
	p2 := f2.plugins(token, PluginOptions{})
	f2.respond(response("Registry", "", map[string][2]string{"*.example.com": {"u", "p"}}))
	if got := p2.Credentials(ctx, pod("a", "puller"), "a.example.com/x"); got != nil {
		t.Errorf("no API server: %v", got)
	}
}

func TestPluginConfigValidation(t *testing.T) {
	yes, no := true, false
	valid := func() kubeletconfigv1.CredentialProvider {
		return kubeletconfigv1.CredentialProvider{
			Name: "p", MatchImages: []string{"*.example.com"}, APIVersion: "credentialprovider.kubelet.k8s.io/v1",
			DefaultCacheDuration: &metav1.Duration{Duration: time.Minute},
		}
	}
	for name, tc := range map[string]struct {
		change func(*kubeletconfigv1.CredentialProvider)
		want   string
	}{
		"valid":                {func(*kubeletconfigv1.CredentialProvider) {}, ""},
		"slash":                {func(p *kubeletconfigv1.CredentialProvider) { p.Name = "a/b" }, "cannot contain '/'"},
		"space":                {func(p *kubeletconfigv1.CredentialProvider) { p.Name = "a b" }, "cannot contain spaces"},
		"dotdot":               {func(p *kubeletconfigv1.CredentialProvider) { p.Name = ".." }, "cannot be '..'"},
		"no apiVersion":        {func(p *kubeletconfigv1.CredentialProvider) { p.APIVersion = "" }, "apiVersion: Required"},
		"bad apiVersion":       {func(p *kubeletconfigv1.CredentialProvider) { p.APIVersion = "v9" }, "Unsupported value"},
		"no matchImages":       {func(p *kubeletconfigv1.CredentialProvider) { p.MatchImages = nil }, "at least 1 item in matchImages"},
		"bad matchImage":       {func(p *kubeletconfigv1.CredentialProvider) { p.MatchImages = []string{"%zz"} }, "match image is invalid"},
		"no cache duration":    {func(p *kubeletconfigv1.CredentialProvider) { p.DefaultCacheDuration = nil }, "defaultCacheDuration: Required"},
		"negative duration":    {func(p *kubeletconfigv1.CredentialProvider) { p.DefaultCacheDuration.Duration = -1 }, "greater than or equal to 0"},
		"token no audience":    {func(p *kubeletconfigv1.CredentialProvider) { p.TokenAttributes = tokenAttrs("", &yes, "Token") }, "serviceAccountTokenAudience: Required"},
		"token no require":     {func(p *kubeletconfigv1.CredentialProvider) { p.TokenAttributes = tokenAttrs("a", nil, "Token") }, "requireServiceAccount: Required"},
		"token bad cache type": {func(p *kubeletconfigv1.CredentialProvider) { p.TokenAttributes = tokenAttrs("a", &yes, "Pod") }, "Unsupported value"},
		"token no cache type":  {func(p *kubeletconfigv1.CredentialProvider) { p.TokenAttributes = tokenAttrs("a", &yes, "") }, "cacheType is required"},
		"token v1beta1": {func(p *kubeletconfigv1.CredentialProvider) {
			p.APIVersion = "credentialprovider.kubelet.k8s.io/v1beta1"
			p.TokenAttributes = tokenAttrs("a", &yes, "Token")
		}, "only supported for credentialprovider.kubelet.k8s.io/v1"},
		"token required keys without requirement": {func(p *kubeletconfigv1.CredentialProvider) {
			p.TokenAttributes = tokenAttrs("a", &no, "Token")
			p.TokenAttributes.RequiredServiceAccountAnnotationKeys = []string{"a.io/b"}
		}, "requireServiceAccount cannot be false"},
		"token key both": {func(p *kubeletconfigv1.CredentialProvider) {
			p.TokenAttributes = tokenAttrs("a", &yes, "Token")
			p.TokenAttributes.RequiredServiceAccountAnnotationKeys = []string{"a.io/b"}
			p.TokenAttributes.OptionalServiceAccountAnnotationKeys = []string{"a.io/b"}
		}, "both required and optional"},
		"token bad key": {func(p *kubeletconfigv1.CredentialProvider) {
			p.TokenAttributes = tokenAttrs("a", &yes, "Token")
			p.TokenAttributes.OptionalServiceAccountAnnotationKeys = []string{"not a key!"}
		}, "optionalServiceAccountAnnotationKeys: Invalid"},
	} {
		p := valid()
		tc.change(&p)
		errs := ValidatePluginConfig(&kubeletconfigv1.CredentialProviderConfig{Providers: []kubeletconfigv1.CredentialProvider{p}})
		switch {
		case tc.want == "" && len(errs) > 0:
			t.Errorf("%s: %v", name, errs)
		case tc.want != "" && !strings.Contains(errs.ToAggregate().Error(), tc.want):
			t.Errorf("%s: errors %v, want %q", name, errs, tc.want)
		}
	}
	if errs := ValidatePluginConfig(&kubeletconfigv1.CredentialProviderConfig{}); len(errs) == 0 {
		t.Error("a config without providers validated")
	}
	p := valid()
	if errs := ValidatePluginConfig(&kubeletconfigv1.CredentialProviderConfig{Providers: []kubeletconfigv1.CredentialProvider{p, p}}); !strings.Contains(errs.ToAggregate().Error(), "Duplicate") {
		t.Errorf("two providers of one name: %v", errs)
	}
}

func tokenAttrs(audience string, require *bool, cacheType string) *kubeletconfigv1.ServiceAccountTokenAttributes {
	return &kubeletconfigv1.ServiceAccountTokenAttributes{ServiceAccountTokenAudience: audience, RequireServiceAccount: require, CacheType: kubeletconfigv1.ServiceAccountTokenCacheType(cacheType)}
}

func TestNewPluginsErrors(t *testing.T) {
	f := newPluginFixture(t)
	good := f.config("  matchImages: [\"*.example.com\"]\n")
	bin := filepath.Join(f.dir, "bin")
	dir := t.TempDir()
	write := func(name, content string) string {
		p := filepath.Join(dir, name)
		os.WriteFile(p, []byte(content), 0o600)
		return p
	}
	for name, tc := range map[string]struct {
		config, bin, want string
	}{
		"no bin dir":     {good, filepath.Join(f.dir, "nope"), "did not exist"},
		"no config":      {filepath.Join(dir, "none.yaml"), bin, "unable to access path"},
		"not YAML":       {write("bad.yaml", "{{"), bin, "error decoding config"},
		"wrong kind":     {write("kind.yaml", "apiVersion: kubelet.config.k8s.io/v1\nkind: KubeletConfiguration\n"), bin, "wrong Kind"},
		"unknown field":  {write("field.yaml", "apiVersion: kubelet.config.k8s.io/v1\nkind: CredentialProviderConfig\nproviders: []\nextra: 1\n"), bin, "unknown field"},
		"no providers":   {write("empty.yaml", "apiVersion: kubelet.config.k8s.io/v1\nkind: CredentialProviderConfig\nproviders: []\n"), bin, "at least 1 item"},
		"missing binary": {write("missing.yaml", strings.Replace(mustRead(t, good), "test-plugin", "other-plugin", 1)), bin, "other-plugin"},
	} {
		_, err := NewPlugins(PluginOptions{ConfigPath: tc.config, BinDir: tc.bin})
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want an error with %q", name, err, tc.want)
		}
	}

	// A directory of configs is merged in lexical order; a name given
	// twice is refused.
	cdir := t.TempDir()
	os.WriteFile(filepath.Join(cdir, "a.yaml"), []byte(mustRead(t, good)), 0o600)
	os.WriteFile(filepath.Join(cdir, "ignored.txt"), []byte("{{"), 0o600)
	if _, err := NewPlugins(PluginOptions{ConfigPath: cdir, BinDir: bin}); err != nil {
		t.Errorf("a directory with one config: %v", err)
	}
	os.WriteFile(filepath.Join(cdir, "b.json"), []byte(`{"apiVersion":"kubelet.config.k8s.io/v1","kind":"CredentialProviderConfig","providers":[{"name":"test-plugin","apiVersion":"credentialprovider.kubelet.k8s.io/v1","matchImages":["x.io"],"defaultCacheDuration":"1m"}]}`), 0o600)
	if _, err := NewPlugins(PluginOptions{ConfigPath: cdir, BinDir: bin}); err == nil || !strings.Contains(err.Error(), `duplicate provider name "test-plugin"`) {
		t.Errorf("a name in two files: %v", err)
	}
}

func mustRead(t *testing.T, p string) string {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestNodeFiles(t *testing.T) {
	root, home, rootDir := t.TempDir(), t.TempDir(), t.TempDir()
	n := NodeFiles{RootDir: rootDir, Home: home, Root: root}
	write := func(p, s string) {
		os.MkdirAll(filepath.Dir(p), 0o755)
		if err := os.WriteFile(p, []byte(s), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	want := []string{
		filepath.Join(rootDir, "config.json"), "config.json", filepath.Join(home, ".docker", "config.json"), filepath.Join(root, ".docker", "config.json"),
		filepath.Join(rootDir, ".dockercfg"), ".dockercfg", filepath.Join(home, ".dockercfg"), filepath.Join(root, ".dockercfg"),
	}
	if got := n.Paths(); strings.Join(got, ",") != strings.Join(want, ",") {
		t.Errorf("paths %v, want %v", got, want)
	}
	lookup := func() string {
		return strings.Join(logins(n.Credentials(context.Background(), nil, "reg.example.com/app")), ",")
	}
	if got := lookup(); got != "" {
		t.Errorf("no files: %q", got)
	}
	write(filepath.Join(root, ".dockercfg"), `{"reg.example.com": {"username": "legacy", "password": "p"}}`)
	if got := lookup(); got != "legacy:p" {
		t.Errorf("/.dockercfg: %q", got)
	}
	// config.json anywhere comes before any .dockercfg.
	write(filepath.Join(root, ".docker", "config.json"), `{"auths": {"reg.example.com": {"auth": "cm9vdDpw"}}}`)
	if got := lookup(); got != "root:p" {
		t.Errorf("/.docker/config.json: %q", got)
	}
	write(filepath.Join(home, ".docker", "config.json"), `{"auths": {"reg.example.com": {"username": "home", "password": "p"}}}`)
	if got := lookup(); got != "home:p" {
		t.Errorf("$HOME/.docker/config.json: %q", got)
	}
	// A file that does not parse is skipped, with a log line.
	var logged strings.Builder
	n.Log = testLogger(&logged)
	write(filepath.Join(rootDir, "config.json"), `{oops`)
	if got := lookup(); got != "home:p" || !strings.Contains(logged.String(), filepath.Join(rootDir, "config.json")) {
		t.Errorf("a malformed root-dir config: %q, log %q", got, logged.String())
	}
	write(filepath.Join(rootDir, "config.json"), `{"auths": {"reg.example.com": {"username": "rootdir", "password": "p"}}}`)
	if got := lookup(); got != "rootdir:p" {
		t.Errorf("the root dir's config.json: %q", got)
	}
	if cfg, path := n.Config(); path != filepath.Join(rootDir, "config.json") || len(cfg) != 1 {
		t.Errorf("Config() = %v, %q", cfg, path)
	}
}

func TestProvidersChain(t *testing.T) {
	var a, b Keyring
	a.Add(nil, Config{"reg.example.com": {Username: "a"}})
	b.Add(nil, Config{"reg.example.com": {Username: "b"}})
	var nilKeyring *Keyring
	got := Providers{&a, nil, nilKeyring, &b}.Credentials(context.Background(), nil, "reg.example.com/x")
	if strings.Join(logins(got), ",") != "a:,b:" {
		t.Errorf("chain: %v", logins(got))
	}
}

// testLogger logs every line, errors included, into b.
func testLogger(b *strings.Builder) logr.Logger {
	var mu sync.Mutex
	return funcr.New(func(prefix, args string) {
		mu.Lock()
		defer mu.Unlock()
		b.WriteString(prefix + " " + args + "\n")
	}, funcr.Options{Verbosity: 10})
}
