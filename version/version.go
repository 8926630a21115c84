package version

import (
	"runtime/debug"
	"strings"
)

// Path is nodekit's module path.
const Path = "github.com/nodekit/nodekit"

// Devel is the version Go gives a module built from a working tree rather
// than fetched at a version.
const Devel = "(devel)"

// DefaultKubernetes is the Kubernetes version nodekit follows, when the
// binary does not tell the version of k8s.io/api it was built with.
const DefaultKubernetes = "v1.37.2"

// maxLen bounds each string read from the build information.
const maxLen = 128

// Info is what a binary's build information says of nodekit.
type Info struct {
	// Version is nodekit's module version: a release (v0.1.0), a
	// pseudo-version (v0.1.1-0.20261207042500-0ff7b2d1234a, possibly with
	// +dirty), or Devel.
	Version string
	// Revision is the VCS revision the binary was built from, when the
	// build recorded it (nodekit built in its own repository with VCS
	// stamping on); Modified says the working tree had changes.
	Revision string
	Modified bool
	// Kubernetes is the Kubernetes version nodekit follows, v1.N.P for the
	// k8s.io/api v0.N.P the binary was built with, else DefaultKubernetes.
	Kubernetes string
	// Go is the Go version the binary was built with.
	Go string
}

// Get returns what the running binary's build information says of
// nodekit.
func Get() Info {
	bi, _ := debug.ReadBuildInfo() // nil when !ok
	return FromBuildInfo(bi)
}

// FromBuildInfo returns what bi says of nodekit; a nil bi (a binary built
// without module support) gives Devel and DefaultKubernetes.
func FromBuildInfo(bi *debug.BuildInfo) Info {
	info := Info{Version: Devel, Kubernetes: DefaultKubernetes}
	if bi == nil {
		return info
	}
	info.Go = bound(bi.GoVersion)
	if bi.Main.Path == Path {
		info.Version = moduleVersion(&bi.Main)
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				info.Revision = bound(s.Value)
			case "vcs.modified":
				info.Modified = s.Value == "true"
			}
		}
	}
	for _, d := range bi.Deps {
		switch d.Path {
		case Path:
			info.Version = moduleVersion(d)
		case "k8s.io/api":
			if k, ok := kubernetes(moduleVersion(d)); ok {
				info.Kubernetes = k
			}
		}
	}
	return info
}

// moduleVersion is m's version, its replacement's when it is replaced
// (Devel for a replacement by a directory).
func moduleVersion(m *debug.Module) string {
	v := m.Version
	if m.Replace != nil {
		v = m.Replace.Version
	}
	if v == "" {
		return Devel
	}
	return bound(v)
}

// kubernetes is the Kubernetes version of the staging modules' version v:
// v1.N.P for v0.N.P; pre-releases and pseudo-versions are not one.
func kubernetes(v string) (string, bool) {
	rest, ok := strings.CutPrefix(v, "v0.")
	if !ok || strings.ContainsAny(rest, "-+") || strings.Count(rest, ".") != 1 {
		return "", false
	}
	return "v1." + rest, true
}

// Module is nodekit's version as the Node's annotation nodekit.io/version
// shows it: Version, followed by the VCS revision (and "dirty" when the
// tree had changes) when Version is Devel and the build recorded one.
func (i Info) Module() string {
	if i.Version != Devel || i.Revision == "" {
		return i.Version
	}
	s := i.Version + " " + short(i.Revision)
	if i.Modified {
		s += " dirty"
	}
	return s
}

// KubeletVersion is the Node's status.nodeInfo.kubeletVersion: the
// Kubernetes version nodekit follows with nodekit's version as build
// metadata, v1.37.2+nodekit.v0.1.0, a semantic version whose major, minor
// and patch are the Kubernetes version's, so that version skew checks see
// the kubelet nodekit follows. Characters build metadata may not hold
// become '-', a '+' of Version becomes '.', and "(devel)" becomes "devel"
// (with the VCS revision, when known).
func (i Info) KubeletVersion() string {
	ids := []string{"nodekit"}
	if i.Version == Devel || i.Version == "" {
		ids = append(ids, "devel")
		if i.Revision != "" {
			ids = append(ids, short(i.Revision))
			if i.Modified {
				ids = append(ids, "dirty")
			}
		}
	} else {
		ids = append(ids, strings.Split(strings.ReplaceAll(i.Version, "+", "."), ".")...)
	}
	var b strings.Builder
	b.WriteString(i.kubernetes())
	sep := "+"
	for _, id := range ids {
		id = strings.Map(func(r rune) rune {
			if r >= '0' && r <= '9' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r == '-' {
				return r
			}
			return '-'
		}, id)
		if id == "" {
			continue
		}
		b.WriteString(sep)
		b.WriteString(id)
		sep = "."
	}
	return b.String()
}

// String is what a binary's --version prints:
// "nodekit v0.1.0 (kubernetes v1.37.2, go1.26.8)".
func (i Info) String() string {
	s := "nodekit " + i.Module() + " (kubernetes " + i.kubernetes()
	if i.Go != "" {
		s += ", " + i.Go
	}
	return s + ")"
}

func (i Info) kubernetes() string {
	if i.Kubernetes == "" {
		return DefaultKubernetes
	}
	return i.Kubernetes
}

// short is the first 12 characters of a VCS revision, as Go's
// pseudo-versions show it.
func short(rev string) string {
	if len(rev) > 12 {
		return rev[:12]
	}
	return rev
}

// bound cuts a string of the build information to maxLen bytes.
func bound(s string) string {
	if len(s) > maxLen {
		return s[:maxLen]
	}
	return s
}
