// Command api writes and checks the listing of nodekit's exported API, as
// the Go project keeps api/go1.*.txt and checks it with cmd/api.
//
// The listing (api/next.txt) has one line per exported declaration of
// every package of the module but internal ones, examples, tests and
// commands, sorted: constants with their type and value, variables, funcs
// and methods with their signatures (parameter names left out), types with
// their exported fields, embedded types and interface methods. Types are
// qualified with their package's import path.
//
//	go run ./internal/cmd/api -w        # rewrite api/next.txt
//	go run ./internal/cmd/api -check    # fail when api/next.txt or CHANGELOG.md is behind the code
//
// -check regenerates the listing and fails when it differs from
// api/next.txt. It then compares api/next.txt with the listing of the
// last release (the api/vX.Y.Z.txt of the highest version) and fails when
// a name whose lines were added, removed or changed is not named in the
// Unreleased section of CHANGELOG.md (see CONTRIBUTING.md for the rule).
//
// hack/api.sh runs it.
package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"go/importer"
	"go/token"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

func main() {
	write := flag.Bool("w", false, "write the listing to api/next.txt")
	check := flag.Bool("check", false, "check api/next.txt against the code, and CHANGELOG.md against the listing of the last release")
	dir := flag.String("C", ".", "the module's root directory")
	flag.Parse()
	if err := run(*dir, *write, *check, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "api:", err)
		os.Exit(1)
	}
}

func run(dir string, write, check bool, stdout io.Writer) error {
	listing, err := generate(dir)
	if err != nil {
		return err
	}
	next := filepath.Join(dir, "api", "next.txt")
	switch {
	case write:
		if err := os.MkdirAll(filepath.Dir(next), 0o755); err != nil {
			return err
		}
		return os.WriteFile(next, listing, 0o644)
	case check:
		committed, err := os.ReadFile(next)
		if err != nil && !errors.Is(err, os.ErrNotExist) {
			return err
		}
		if d := diffLines(parseListing(committed), parseListing(listing)); len(d) > 0 {
			return fmt.Errorf("api/next.txt differs from the code's exported API:\n%s\n"+
				"Run hack/api.sh update, review the change, and name each changed name in CHANGELOG.md's Unreleased section", d)
		}
		base, basePath, err := lastRelease(filepath.Join(dir, "api"))
		if err != nil {
			return err
		}
		changelog, err := os.ReadFile(filepath.Join(dir, "CHANGELOG.md"))
		if err != nil {
			return err
		}
		if missing := unrecorded(parseListing(base), parseListing(listing), unreleased(string(changelog))); len(missing) > 0 {
			return fmt.Errorf("CHANGELOG.md's Unreleased section does not name these API changes (since %s):\n%s\n"+
				"Add a line naming each (in backquotes: `pkg.Name`, `pkg.Type.Member`, or `pkg` for a package added or removed)",
				filepath.Join("api", filepath.Base(basePath)), strings.Join(missing, "\n"))
		}
		return nil
	default:
		_, err := stdout.Write(listing)
		return err
	}
}

// listedPackage is what go list says of a package.
type listedPackage struct {
	ImportPath string
	Name       string
	Export     string
	DepOnly    bool
	Module     *struct{ Path string }
	Error      *struct{ Err string }
}

// generate returns the listing of the module in dir: go list compiles its
// packages (from the build cache when they did not change) and the
// listing is read from their export data.
func generate(dir string) ([]byte, error) {
	cmd := exec.Command("go", "list", "-e", "-export", "-deps", "-json=ImportPath,Name,Export,DepOnly,Module,Error", "./...")
	cmd.Dir = dir
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("go list: %v\n%s", err, stderr.Bytes())
	}
	exports := map[string]string{}
	var targets []listedPackage
	for dec := json.NewDecoder(bytes.NewReader(out)); dec.More(); {
		var p listedPackage
		if err := dec.Decode(&p); err != nil {
			return nil, fmt.Errorf("go list: %v", err)
		}
		if p.Error != nil {
			return nil, fmt.Errorf("go list: %s: %s", p.ImportPath, p.Error.Err)
		}
		exports[p.ImportPath] = p.Export
		if !p.DepOnly && p.Module != nil && listed(p.Module.Path, p.ImportPath, p.Name) {
			targets = append(targets, p)
		}
	}
	fset := token.NewFileSet()
	imp := importer.ForCompiler(fset, "gc", func(path string) (io.ReadCloser, error) {
		f, ok := exports[path]
		if !ok || f == "" {
			return nil, fmt.Errorf("no export data for %s", path)
		}
		return os.Open(f)
	})
	var lines []string
	for _, p := range targets {
		pkg, err := imp.Import(p.ImportPath)
		if err != nil {
			return nil, err
		}
		lines = append(lines, packageLines(pkg)...)
	}
	return formatListing(lines), nil
}

// listed says whether the package path of module is part of the listing:
// not internal, not an example, a test or a command.
func listed(module, path, name string) bool {
	if name == "main" {
		return false
	}
	rel, ok := strings.CutPrefix(path, module)
	if !ok || rel != "" && rel[0] != '/' {
		return false
	}
	for _, elem := range strings.Split(strings.TrimPrefix(rel, "/"), "/") {
		switch elem {
		case "internal", "examples", "test", "testdata", "hack":
			return false
		}
	}
	return true
}

const header = "# The exported API of nodekit's packages. Generated by hack/api.sh update: do not edit.\n"

// formatListing returns lines sorted, without duplicates, after the
// header.
func formatListing(lines []string) []byte {
	set := map[string]bool{}
	for _, l := range lines {
		set[l] = true
	}
	var b bytes.Buffer
	b.WriteString(header)
	for _, l := range sortedKeys(set) {
		b.WriteString(l)
		b.WriteByte('\n')
	}
	return b.Bytes()
}
