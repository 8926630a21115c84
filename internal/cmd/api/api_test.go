package main

import (
	"go/ast"
	"go/importer"
	"go/parser"
	"go/token"
	"go/types"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

const fixture = `package p

import "context"

type Kind int

const (
	A Kind = iota
	B
)

const Name = "p"

var Err error

type Options struct {
	Logger  context.Context
	Size    int
	hidden  bool
	Base
	base
}

type Base struct{ ID string }

func (Base) Hello(string, ...int) (int, error) { return 0, nil }

type base struct{ Hidden string }

func (*base) Promoted() {}

type Runnable interface {
	Run(ctx context.Context) error
}

type Sealed interface {
	Get() string
	sealed()
}

type Func func(ctx context.Context) error

func (f Func) Run(ctx context.Context) error { return f(ctx) }

type Set[K comparable] struct{ m map[K]bool }

func (s *Set[K]) Add(k K) {}

type Alias = Options

func New(name string, opts Options) (*Options, error) { return nil, nil }

func Map[K comparable, V any](m map[K]V) []K { return nil }

func unexported() {}
`

func TestPackageLines(t *testing.T) {
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, "p.go", fixture, 0)
	if err != nil {
		t.Fatal(err)
	}
	pkg, err := (&types.Config{Importer: importer.Default()}).Check("example.com/m/p", fset, []*ast.File{f}, nil)
	if err != nil {
		t.Fatal(err)
	}
	got := strings.Split(strings.TrimSuffix(string(formatListing(packageLines(pkg))), "\n"), "\n")
	want := []string{
		strings.TrimSuffix(header, "\n"),
		"pkg example.com/m/p, const A Kind = 0",
		"pkg example.com/m/p, const B Kind = 1",
		`pkg example.com/m/p, const Name untyped string = "p"`,
		"pkg example.com/m/p, func Map[K comparable, V any](map[K]V) []K",
		"pkg example.com/m/p, func New(string, Options) (*Options, error)",
		"pkg example.com/m/p, method (*Options) Promoted()",
		"pkg example.com/m/p, method (*Set[K]) Add(K)",
		"pkg example.com/m/p, method (Base) Hello(string, ...int) (int, error)",
		"pkg example.com/m/p, method (Func) Run(context.Context) error",
		"pkg example.com/m/p, method (Options) Hello(string, ...int) (int, error)",
		"pkg example.com/m/p, type Alias = Options",
		"pkg example.com/m/p, type Base struct",
		"pkg example.com/m/p, type Base struct, ID string",
		"pkg example.com/m/p, type Func func(ctx context.Context) error",
		"pkg example.com/m/p, type Kind int",
		"pkg example.com/m/p, type Options struct",
		"pkg example.com/m/p, type Options struct, Logger context.Context",
		"pkg example.com/m/p, type Options struct, Size int",
		"pkg example.com/m/p, type Options struct, embedded Base",
		"pkg example.com/m/p, type Runnable interface",
		"pkg example.com/m/p, type Runnable interface, Run(context.Context) error",
		"pkg example.com/m/p, type Sealed interface",
		"pkg example.com/m/p, type Sealed interface, Get() string",
		"pkg example.com/m/p, type Sealed interface, unexported methods",
		"pkg example.com/m/p, type Set[K comparable] struct",
		"pkg example.com/m/p, var Err error",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("listing (-want +got):\n%s", diff)
	}
}

func TestListed(t *testing.T) {
	const m = "github.com/nodekit/nodekit"
	for path, want := range map[string]bool{
		m: true, m + "/node": true, m + "/runtime/cri": true, m + "/nodeserver/hook": true,
		m + "/internal/upkeep": false, m + "/volume/internal/objectvolume": false, m + "/test/e2e": false,
		m + "/examples/minimal-agent": false, m + "/hack/pause": false, m + "kit/x": false,
	} {
		if got := listed(m, path, "x"); got != want {
			t.Errorf("listed(%s) = %v, want %v", path, got, want)
		}
	}
	if listed(m, m+"/cmd", "main") {
		t.Errorf("a command is listed")
	}
}

func TestLineName(t *testing.T) {
	const m = "github.com/nodekit/nodekit"
	for line, want := range map[string]string{
		"pkg " + m + ", func New(Options) (*Agent, error)":                                  "nodekit.New",
		"pkg " + m + "/node, const DefaultMaxPods untyped int = 110":                        "node.DefaultMaxPods",
		"pkg " + m + "/runtime/cri, method (*Client) Close() error":                         "runtime/cri.Client.Close",
		"pkg " + m + "/x, method (Set[K]) Add(K)":                                           "x.Set.Add",
		"pkg " + m + ", type Options struct, Node " + m + "/node.Options":                   "nodekit.Options.Node",
		"pkg " + m + ", type Options struct":                                                "nodekit.Options",
		"pkg " + m + ", type Options struct, embedded *" + m + "/node.Options":              "nodekit.Options.Options",
		"pkg " + m + "/sources, type Source interface, Run(context.Context, chan<- Update)": "sources.Source.Run",
		"pkg " + m + "/sources, type Sealed interface, unexported methods":                  "sources.Sealed",
		"pkg " + m + "/x, type Set[K comparable] struct, Items []K":                         "x.Set.Items",
		"pkg " + m + "/x, var Err error":                                                    "x.Err",
	} {
		if got := lineName(m, line).full(); got != want {
			t.Errorf("lineName(%q) = %q, want %q", line, got, want)
		}
	}
}

const (
	root   = "pkg github.com/nodekit/nodekit, "
	node   = "pkg github.com/nodekit/nodekit/node, "
	runPkg = "pkg github.com/nodekit/nodekit/run, "
)

func set(lines ...string) map[string]bool {
	return parseListing([]byte(strings.Join(lines, "\n")))
}

func TestUnrecorded(t *testing.T) {
	old := set(
		root+"func New(Options) (*Agent, error)",
		root+"type Group struct",
		root+"type Group struct, Parts []string",
		node+"func KubernetesVersion() string",
		node+"type Options struct",
		node+"type Options struct, AgentVersion string",
	)
	for _, tc := range []struct {
		name    string
		new     map[string]bool
		spans   []string
		missing []string // the names reported
	}{{
		name: "no change",
		new:  old,
	}, {
		name:    "a renamed func is two names",
		new:     set(root+"func New(Options) (*Agent, error)", root+"type Group struct", root+"type Group struct, Parts []string", node+"func KubeVersion() string", node+"type Options struct", node+"type Options struct, AgentVersion string"),
		spans:   []string{"node.KubeVersion"},
		missing: []string{"node.KubernetesVersion"},
	}, {
		name:  "a rename recorded old → new",
		new:   set(root+"func New(Options) (*Agent, error)", root+"type Group struct", root+"type Group struct, Parts []string", node+"func KubeVersion() string", node+"type Options struct", node+"type Options struct, AgentVersion string"),
		spans: []string{"node.KubernetesVersion", "node.KubeVersion()"},
	}, {
		name:    "a changed signature; a longer name does not name a shorter one",
		new:     set(root+"func New(Options, int) (*Agent, error)", root+"type Group struct", root+"type Group struct, Parts []string", node+"func KubernetesVersion() string", node+"type Options struct", node+"type Options struct, AgentVersion string"),
		spans:   []string{"nodekit.NewAgent", "nodekit.News"},
		missing: []string{"nodekit.New"},
	}, {
		name:  "a signature named with its arguments",
		new:   set(root+"func New(Options, int) (*Agent, error)", root+"type Group struct", root+"type Group struct, Parts []string", node+"func KubernetesVersion() string", node+"type Options struct", node+"type Options struct, AgentVersion string"),
		spans: []string{"nodekit.New(opts, n)"},
	}, {
		name:  "a type moved to a new package: the type and the package name all its lines",
		new:   set(root+"func New(Options) (*Agent, error)", runPkg+"type Group struct", runPkg+"type Group struct, Parts []string", runPkg+"func New() *Group", node+"func KubernetesVersion() string", node+"type Options struct", node+"type Options struct, AgentVersion string"),
		spans: []string{"nodekit.Group", "run"},
	}, {
		name:  "a type turned into an alias: the type names its members",
		new:   set(root+"func New(Options) (*Agent, error)", root+"type Group = github.com/nodekit/nodekit/internal/g.Group", root+"type Group struct, Parts []github.com/nodekit/nodekit/internal/g.Part", node+"func KubernetesVersion() string", node+"type Options struct", node+"type Options struct, AgentVersion string"),
		spans: []string{"nodekit.Group"},
	}, {
		name:    "a field removed: its type's mention is not enough, since the type stays",
		new:     set(root+"func New(Options) (*Agent, error)", root+"type Group struct", root+"type Group struct, Parts []string", node+"func KubernetesVersion() string", node+"type Options struct"),
		spans:   []string{"node.Options"},
		missing: []string{"node.Options.AgentVersion"},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			var got []string
			for _, m := range unrecorded(old, tc.new, tc.spans) {
				n, _, _ := strings.Cut(strings.TrimPrefix(m, "  `"), "`")
				got = append(got, n)
			}
			if diff := cmp.Diff(tc.missing, got); diff != "" {
				t.Errorf("unrecorded (-want +got):\n%s", diff)
			}
		})
	}
}

func TestUnreleased(t *testing.T) {
	const changelog = "# Changelog\n\n## [Unreleased]\n\n### Changed\n- `node.New(client, name, opts)` takes the name; `a` and `b`\n- broken `quote\n\n## [0.1.0] - 2026-01-01\n- `old.Name`\n"
	want := []string{"node.New(client, name, opts)", "a", "b"}
	if diff := cmp.Diff(want, unreleased(changelog)); diff != "" {
		t.Errorf("unreleased (-want +got):\n%s", diff)
	}
}

func TestLastRelease(t *testing.T) {
	dir := t.TempDir()
	for _, f := range []string{"v0.9.0.txt", "v0.10.0.txt", "v0.2.5.txt", "next.txt", "v1.txt"} {
		if err := os.WriteFile(filepath.Join(dir, f), []byte(f), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	b, path, err := lastRelease(dir)
	if err != nil || string(b) != "v0.10.0.txt" || filepath.Base(path) != "v0.10.0.txt" {
		t.Errorf("lastRelease = %q, %q, %v; want v0.10.0.txt", b, path, err)
	}
}
