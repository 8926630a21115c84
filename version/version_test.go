package version_test

import (
	"runtime/debug"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	kversion "k8s.io/apimachinery/pkg/util/version"

	"github.com/nodekit/nodekit/version"
)

func TestFromBuildInfo(t *testing.T) {
	api := &debug.Module{Path: "k8s.io/api", Version: "v0.37.2"}
	for _, tc := range []struct {
		name string
		bi   *debug.BuildInfo
		want version.Info
	}{{
		name: "no build information",
		want: version.Info{Version: "(devel)", Kubernetes: "v1.37.2"},
	}, {
		name: "a dependency at a release",
		bi: &debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Path: "example.com/agent", Version: "v1.2.3"},
			Deps:     []*debug.Module{api, {Path: version.Path, Version: "v0.4.1"}},
			Settings: []debug.BuildSetting{{Key: "vcs.revision", Value: "feedface"}}}, // the program's, not nodekit's
		want: version.Info{Version: "v0.4.1", Kubernetes: "v1.37.2", Go: "go1.26.8"},
	}, {
		name: "a dependency replaced by another version",
		bi: &debug.BuildInfo{Main: debug.Module{Path: "example.com/agent"}, Deps: []*debug.Module{api,
			{Path: version.Path, Version: "v0.4.1", Replace: &debug.Module{Path: "example.com/fork", Version: "v0.4.2"}}}},
		want: version.Info{Version: "v0.4.2", Kubernetes: "v1.37.2"},
	}, {
		name: "a dependency replaced by a directory",
		bi: &debug.BuildInfo{Main: debug.Module{Path: "example.com/agent"}, Deps: []*debug.Module{
			{Path: version.Path, Version: "v0.4.1", Replace: &debug.Module{Path: "../nodekit"}}}},
		want: version.Info{Version: "(devel)", Kubernetes: "v1.37.2"},
	}, {
		name: "built in the repository at a tag",
		bi: &debug.BuildInfo{Main: debug.Module{Path: version.Path, Version: "v0.2.0"}, Deps: []*debug.Module{
			{Path: "k8s.io/api", Version: "v0.38.1"}},
			Settings: []debug.BuildSetting{{Key: "vcs.revision", Value: "0ff7b2d1234a5678"}, {Key: "vcs.modified", Value: "false"}}},
		want: version.Info{Version: "v0.2.0", Revision: "0ff7b2d1234a5678", Kubernetes: "v1.38.1"},
	}, {
		name: "built in the repository without VCS stamping",
		bi:   &debug.BuildInfo{Main: debug.Module{Path: version.Path, Version: "(devel)"}, Deps: []*debug.Module{api}},
		want: version.Info{Version: "(devel)", Kubernetes: "v1.37.2"},
	}, {
		name: "built in a modified tree",
		bi: &debug.BuildInfo{Main: debug.Module{Path: version.Path, Version: "(devel)"},
			Settings: []debug.BuildSetting{{Key: "vcs.revision", Value: "0ff7b2d1234a5678"}, {Key: "vcs.modified", Value: "true"}}},
		want: version.Info{Version: "(devel)", Revision: "0ff7b2d1234a5678", Modified: true, Kubernetes: "v1.37.2"},
	}, {
		name: "a pre-release of k8s.io/api is not a Kubernetes version",
		bi: &debug.BuildInfo{Main: debug.Module{Path: version.Path, Version: "(devel)"}, Deps: []*debug.Module{
			{Path: "k8s.io/api", Version: "v0.38.0-alpha.1"}}},
		want: version.Info{Version: "(devel)", Kubernetes: "v1.37.2"},
	}, {
		name: "versions longer than the bound are cut",
		bi:   &debug.BuildInfo{Main: debug.Module{Path: version.Path, Version: "v0.1.0-" + strings.Repeat("a", 500)}},
		want: version.Info{Version: ("v0.1.0-" + strings.Repeat("a", 500))[:128], Kubernetes: "v1.37.2"},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, version.FromBuildInfo(tc.bi)); diff != "" {
				t.Errorf("FromBuildInfo (-want +got):\n%s", diff)
			}
		})
	}
}

func TestKubeletVersion(t *testing.T) {
	for _, tc := range []struct {
		info            version.Info
		kubelet, module string
	}{
		{version.Info{Version: "v0.1.0", Kubernetes: "v1.37.2"}, "v1.37.2+nodekit.v0.1.0", "v0.1.0"},
		{version.Info{Version: "v0.2.0-rc.1", Kubernetes: "v1.38.0"}, "v1.38.0+nodekit.v0.2.0-rc.1", "v0.2.0-rc.1"},
		{version.Info{Version: "v0.1.1-0.20261207042500-0ff7b2d1234a+dirty", Kubernetes: "v1.37.2"},
			"v1.37.2+nodekit.v0.1.1-0.20261207042500-0ff7b2d1234a.dirty", "v0.1.1-0.20261207042500-0ff7b2d1234a+dirty"},
		{version.Info{Version: "(devel)", Kubernetes: "v1.37.2"}, "v1.37.2+nodekit.devel", "(devel)"},
		{version.Info{Version: "(devel)", Revision: "0ff7b2d1234a5678", Modified: true, Kubernetes: "v1.37.2"},
			"v1.37.2+nodekit.devel.0ff7b2d1234a.dirty", "(devel) 0ff7b2d1234a dirty"},
		{version.Info{Version: "v0.1.0+in/compat_ible..x"}, "v1.37.2+nodekit.v0.1.0.in-compat-ible.x", "v0.1.0+in/compat_ible..x"},
		{version.Info{}, "v1.37.2+nodekit.devel", ""},
	} {
		got := tc.info.KubeletVersion()
		if got != tc.kubelet {
			t.Errorf("%+v.KubeletVersion() = %q, want %q", tc.info, got, tc.kubelet)
		}
		if got := tc.info.Module(); got != tc.module {
			t.Errorf("%+v.Module() = %q, want %q", tc.info, got, tc.module)
		}
		// What the control plane does with it: a semantic version that
		// compares equal to the Kubernetes version nodekit follows.
		v, err := kversion.ParseSemantic(got)
		if err != nil {
			t.Errorf("kubeletVersion %q is not a semantic version: %v", got, err)
			continue
		}
		k := kversion.MustParseSemantic(cmpOr(tc.info.Kubernetes, version.DefaultKubernetes))
		if c, _ := v.Compare(k.String()); c != 0 || v.PreRelease() != "" {
			t.Errorf("kubeletVersion %q does not compare equal to %s", got, k)
		}
	}
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

func TestString(t *testing.T) {
	got := version.Info{Version: "v0.1.0", Kubernetes: "v1.37.2", Go: "go1.26.8"}.String()
	if want := "nodekit v0.1.0 (kubernetes v1.37.2, go1.26.8)"; got != want {
		t.Errorf("String() = %q, want %q", got, want)
	}
}

// TestGet reads the test binary's own build information: nodekit is its
// main module and k8s.io/api one of its dependencies.
func TestGet(t *testing.T) {
	i := version.Get()
	if i.Version == "" || i.Go == "" {
		t.Errorf("Get() = %+v, want a version and a Go version", i)
	}
	if _, err := kversion.ParseSemantic(i.Kubernetes); err != nil || !strings.HasPrefix(i.Kubernetes, "v1.") {
		t.Errorf("Get().Kubernetes = %q, want v1.N.P", i.Kubernetes)
	}
}
