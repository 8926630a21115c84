package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
)

// parseListing returns the set of lines of a listing, comments and blank
// lines left out.
func parseListing(b []byte) map[string]bool {
	set := map[string]bool{}
	for _, l := range strings.Split(string(b), "\n") {
		if l = strings.TrimSpace(l); l != "" && !strings.HasPrefix(l, "#") {
			set[l] = true
		}
	}
	return set
}

// diffLines is the lines removed from old (-) and added in new (+),
// sorted by line.
func diffLines(old, new map[string]bool) string {
	all := map[string]bool{}
	for l := range old {
		if !new[l] {
			all[l] = true
		}
	}
	for l := range new {
		if !old[l] {
			all[l] = true
		}
	}
	var b strings.Builder
	for _, l := range sortedKeys(all) {
		sign := "+"
		if old[l] {
			sign = "-"
		}
		fmt.Fprintf(&b, "%s %s\n", sign, l)
	}
	return strings.TrimSuffix(b.String(), "\n")
}

var releaseFile = regexp.MustCompile(`^v(\d+)\.(\d+)\.(\d+)\.txt$`)

// lastRelease returns the listing of the highest released version in dir
// (api/vX.Y.Z.txt) and its file.
func lastRelease(dir string) ([]byte, string, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, "", err
	}
	var best string
	var bestV [3]int
	for _, e := range entries {
		m := releaseFile.FindStringSubmatch(e.Name())
		if m == nil {
			continue
		}
		var v [3]int
		for i := range v {
			v[i], _ = strconv.Atoi(m[i+1])
		}
		if best == "" || v[0] > bestV[0] || v[0] == bestV[0] && (v[1] > bestV[1] || v[1] == bestV[1] && v[2] > bestV[2]) {
			best, bestV = e.Name(), v
		}
	}
	if best == "" {
		return nil, "", errors.New("no listing of a release (api/vX.Y.Z.txt) to compare CHANGELOG.md's Unreleased section with")
	}
	path := filepath.Join(dir, best)
	b, err := os.ReadFile(path)
	return b, path, err
}

// unreleased returns the names in backquotes of CHANGELOG.md's Unreleased
// section (from "## [Unreleased]" to the next "## " heading).
func unreleased(changelog string) []string {
	var spans []string
	in := false
	for _, l := range strings.Split(changelog, "\n") {
		if strings.HasPrefix(l, "## ") {
			in = strings.HasPrefix(strings.ToLower(l), "## [unreleased]")
			continue
		}
		if !in {
			continue
		}
		parts := strings.Split(l, "`")
		for i := 1; i < len(parts)-1; i += 2 {
			spans = append(spans, parts[i])
		}
	}
	return spans
}

// unrecorded returns, for each name whose lines differ between the
// listings old and new, the lines and the name, when no span names it.
// A span names a name when it is the name or starts with it followed by
// a character that cannot continue it ("`node.New(client, name, opts)`"
// names node.New). A member (pkg.Type.Member) is named too by its type
// when the type's own line was added, removed or changed (a type added,
// removed, or turned into an alias), and every name of a package added or
// removed by the package ("`podsync`").
func unrecorded(old, new map[string]bool, spans []string) []string {
	module := modulePath(old, new)
	named := func(name string) bool {
		for _, s := range spans {
			if rest, ok := strings.CutPrefix(s, name); ok && (rest == "" || !isNameByte(rest[0])) {
				return true
			}
		}
		return false
	}
	pkgs := func(set map[string]bool) map[string]bool {
		m := map[string]bool{}
		for l := range set {
			m[lineName(module, l).pkg] = true
		}
		return m
	}
	oldPkgs, newPkgs := pkgs(old), pkgs(new)
	added, removed := map[string]bool{}, map[string]bool{}
	for l := range old {
		if !new[l] {
			removed[l] = true
		}
	}
	for l := range new {
		if !old[l] {
			added[l] = true
		}
	}
	// The types whose own line (type T ...) was added, removed or changed.
	typeChanged := map[string]bool{}
	for _, set := range []map[string]bool{added, removed} {
		for l := range set {
			if n := lineName(module, l); n.member == "" && isTypeLine(l) {
				typeChanged[n.pkg+"."+n.name] = true
			}
		}
	}
	var missing []string
	seen := map[string]bool{}
	for _, set := range []map[string]bool{removed, added} {
		for _, l := range sortedKeys(set) {
			n := lineName(module, l)
			full := n.full()
			if seen[full] {
				continue
			}
			seen[full] = true
			if oldPkgs[n.pkg] != newPkgs[n.pkg] && named(n.pkg) {
				continue // a package added or removed
			}
			if named(full) || n.member != "" && typeChanged[n.pkg+"."+n.name] && named(n.pkg+"."+n.name) {
				continue
			}
			d := diffLines(linesOf(module, old, full), linesOf(module, new, full))
			missing = append(missing, fmt.Sprintf("  `%s`:\n    %s", full, strings.ReplaceAll(d, "\n", "\n    ")))
		}
	}
	return missing
}

// linesOf is the lines of set for the name full.
func linesOf(module string, set map[string]bool, full string) map[string]bool {
	m := map[string]bool{}
	for l := range set {
		if lineName(module, l).full() == full {
			m[l] = true
		}
	}
	return m
}

// isTypeLine says whether l declares a type (not one of its members).
func isTypeLine(l string) bool {
	_, decl, _ := strings.Cut(l, ", ")
	return strings.HasPrefix(decl, "type ") && !lineName("", l).memberLine
}

// skipBrackets returns s after the type parameters it starts with, if any.
func skipBrackets(s string) string {
	if !strings.HasPrefix(s, "[") {
		return s
	}
	depth := 0
	for i, c := range s {
		switch c {
		case '[':
			depth++
		case ']':
			if depth--; depth == 0 {
				return s[i+1:]
			}
		}
	}
	return ""
}

func isNameByte(c byte) bool {
	return c == '_' || c == '.' || c == '/' || '0' <= c && c <= '9' || 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z'
}

// modulePath is the shortest package path of the listings: the module's
// root package.
func modulePath(sets ...map[string]bool) string {
	module := ""
	for _, set := range sets {
		for l := range set {
			p, _, _ := strings.Cut(strings.TrimPrefix(l, "pkg "), ", ")
			if module == "" || len(p) < len(module) {
				module = p
			}
		}
	}
	return module
}

// name is a listing line's name: its package relative to the module
// ("nodekit" for the root), the declared name, and the member (a field,
// an embedded type, a method) if the line is about one.
type name struct {
	pkg, name, member string
	memberLine        bool // a line of a type's member, not of the type
}

func (n name) full() string {
	s := n.pkg + "." + n.name
	if n.member != "" {
		s += "." + n.member
	}
	return s
}

var ident = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*`)

// lineName parses a listing line:
//
//	pkg P, const N ... / var N ... / func N(...) ...
//	pkg P, type N ... [, Member ...] [, embedded [*]path.T] [, unexported methods]
//	pkg P, method ([*]N[...]) M(...)
func lineName(module, line string) name {
	p, decl, _ := strings.Cut(strings.TrimPrefix(line, "pkg "), ", ")
	rel := strings.TrimPrefix(strings.TrimPrefix(p, module), "/")
	if rel == "" {
		rel = module[strings.LastIndex(module, "/")+1:]
	}
	n := name{pkg: rel}
	kind, rest, _ := strings.Cut(decl, " ")
	switch kind {
	case "method":
		recv, m, _ := strings.Cut(strings.TrimPrefix(rest, "("), ") ")
		n.name = ident.FindString(strings.TrimPrefix(recv, "*"))
		n.member = ident.FindString(m)
	case "type":
		n.name = ident.FindString(rest)
		after := skipBrackets(rest[len(n.name):])
		for _, kw := range []string{" struct, ", " interface, "} {
			member, ok := strings.CutPrefix(after, kw)
			if !ok {
				continue
			}
			switch {
			case member == "unexported methods":
			case strings.HasPrefix(member, "embedded "):
				t := strings.TrimPrefix(strings.TrimPrefix(member, "embedded "), "*")
				if i := strings.IndexByte(t, '['); i >= 0 {
					t = t[:i]
				}
				n.member = t[strings.LastIndexAny(t, "./")+1:]
			default:
				n.member = ident.FindString(member)
			}
			n.memberLine = true
		}
	default:
		n.name = ident.FindString(rest)
	}
	return n
}
