package main

import (
	"fmt"
	"go/types"
	"sort"
	"strings"
)

// packageLines returns the listing lines of pkg's exported declarations.
func packageLines(pkg *types.Package) []string {
	qual := func(p *types.Package) string {
		if p == pkg {
			return ""
		}
		return p.Path()
	}
	prefix := "pkg " + pkg.Path() + ", "
	var lines []string
	add := func(format string, args ...any) {
		lines = append(lines, prefix+fmt.Sprintf(format, args...))
	}
	scope := pkg.Scope()
	for _, name := range scope.Names() {
		obj := scope.Lookup(name)
		if !obj.Exported() {
			continue
		}
		switch obj := obj.(type) {
		case *types.Const:
			add("const %s %s = %s", name, types.TypeString(obj.Type(), qual), obj.Val().ExactString())
		case *types.Var:
			add("var %s %s", name, types.TypeString(obj.Type(), qual))
		case *types.Func:
			add("func %s%s", name, signature(obj.Type().(*types.Signature), qual))
		case *types.TypeName:
			lines = append(lines, typeLines(prefix, obj, qual)...)
		}
	}
	return lines
}

// typeLines returns the lines of the type obj: the type itself, its
// exported fields and embedded types, interface methods, methods.
func typeLines(prefix string, obj *types.TypeName, qual types.Qualifier) []string {
	name := obj.Name()
	if alias, ok := obj.Type().(*types.Alias); ok {
		lines := []string{prefix + "type " + name + typeParams(alias.TypeParams(), qual) + " = " + types.TypeString(alias.Rhs(), qual)}
		// An alias of an internal package's type is the only name users
		// have for it: its fields and methods are listed under the alias.
		if named, ok := types.Unalias(alias).(*types.Named); ok && alias.TypeParams().Len() == 0 && isInternal(named.Obj().Pkg()) {
			lines = append(lines, namedLines(prefix, name, named, qual)[1:]...)
		}
		return lines
	}
	return namedLines(prefix, name, obj.Type().(*types.Named), qual)
}

// isInternal says whether pkg is an internal package.
func isInternal(pkg *types.Package) bool {
	if pkg == nil {
		return false
	}
	p := "/" + pkg.Path() + "/"
	return strings.Contains(p, "/internal/")
}

// namedLines returns the lines of the named type under name: the type
// itself first, then its exported fields and embedded types, interface
// methods, methods.
func namedLines(prefix, name string, named *types.Named, qual types.Qualifier) []string {
	tparams := named.TypeParams()
	if named.TypeArgs().Len() > 0 { // an instance, under an alias: no parameters of its own
		tparams = nil
	}
	decl := "type " + name + typeParams(tparams, qual)
	var lines []string
	switch u := named.Underlying().(type) {
	case *types.Struct:
		decl += " struct"
		lines = append(lines, prefix+decl)
		for f := range u.Fields() {
			switch {
			case f.Embedded() && exportedEmbedded(f.Type()):
				lines = append(lines, prefix+decl+", embedded "+types.TypeString(f.Type(), qual))
			case !f.Embedded() && f.Exported():
				lines = append(lines, prefix+decl+", "+f.Name()+" "+types.TypeString(f.Type(), qual))
			}
		}
	case *types.Interface:
		if !u.IsMethodSet() { // a constraint: its type set is its API
			lines = append(lines, prefix+decl+" "+types.TypeString(u, qual))
			break
		}
		decl += " interface"
		lines = append(lines, prefix+decl)
		sealed := false
		for m := range u.Methods() {
			if !m.Exported() {
				sealed = true
				continue
			}
			lines = append(lines, prefix+decl+", "+m.Name()+signature(m.Type().(*types.Signature), qual))
		}
		if sealed {
			lines = append(lines, prefix+decl+", unexported methods")
		}
		return lines
	default:
		lines = append(lines, prefix+decl+" "+types.TypeString(u, qual))
	}
	// Methods, promoted ones included: (T) when in T's method set, else (*T).
	recv := name + typeParamNames(tparams)
	value := types.NewMethodSet(named)
	for sel := range types.NewMethodSet(types.NewPointer(named)).Methods() {
		m := sel.Obj().(*types.Func)
		if !m.Exported() {
			continue
		}
		r := "*" + recv
		if value.Lookup(m.Pkg(), m.Name()) != nil {
			r = recv
		}
		lines = append(lines, prefix+"method ("+r+") "+m.Name()+signature(m.Type().(*types.Signature), qual))
	}
	return lines
}

// exportedEmbedded says whether an embedded field of type t is reachable
// by name from other packages.
func exportedEmbedded(t types.Type) bool {
	if p, ok := t.(*types.Pointer); ok {
		t = p.Elem()
	}
	switch t := types.Unalias(t).(type) {
	case *types.Named:
		return t.Obj().Exported()
	case *types.Basic:
		return false
	}
	return false
}

// signature is sig without parameter names: (T1, ...T2) (R1, R2).
func signature(sig *types.Signature, qual types.Qualifier) string {
	var b strings.Builder
	b.WriteString(typeParams(sig.TypeParams(), qual))
	b.WriteByte('(')
	params := sig.Params()
	for i := range params.Len() {
		if i > 0 {
			b.WriteString(", ")
		}
		t := params.At(i).Type()
		if sig.Variadic() && i == params.Len()-1 {
			b.WriteString("...")
			t = t.(*types.Slice).Elem()
		}
		b.WriteString(types.TypeString(t, qual))
	}
	b.WriteByte(')')
	res := sig.Results()
	switch res.Len() {
	case 0:
	case 1:
		b.WriteString(" " + types.TypeString(res.At(0).Type(), qual))
	default:
		b.WriteString(" (")
		for i := range res.Len() {
			if i > 0 {
				b.WriteString(", ")
			}
			b.WriteString(types.TypeString(res.At(i).Type(), qual))
		}
		b.WriteByte(')')
	}
	return b.String()
}

// typeParams is [K comparable, V any], or "" for none.
func typeParams(tps *types.TypeParamList, qual types.Qualifier) string {
	if tps.Len() == 0 {
		return ""
	}
	var parts []string
	for tp := range tps.TypeParams() {
		parts = append(parts, tp.Obj().Name()+" "+types.TypeString(tp.Constraint(), qual))
	}
	return "[" + strings.Join(parts, ", ") + "]"
}

// typeParamNames is [K, V], or "" for none.
func typeParamNames(tps *types.TypeParamList) string {
	if tps.Len() == 0 {
		return ""
	}
	var parts []string
	for tp := range tps.TypeParams() {
		parts = append(parts, tp.Obj().Name())
	}
	return "[" + strings.Join(parts, ", ") + "]"
}

func sortedKeys(set map[string]bool) []string {
	keys := make([]string, 0, len(set))
	for k := range set {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
