package churn_test

import (
	"fmt"
	"reflect"
	"sort"
	"strings"
	"unsafe"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
)

// podHolders walks every value reachable from root through struct
// fields, pointers, interfaces, slices, arrays and maps (not through
// closures or channels), exported or not, and counts the churn's pods
// (UID prefix "churn-") and their UIDs (per-pod state kept by UID) it
// reaches outside those pods, by the path of field names that led
// to them, with the type of each part (a pointer in a slice or a Run
// group) named. Call it only once nothing else touches root (the agent
// stopped): it reads maps without their locks.
func podHolders(root any) map[string]int {
	podType := reflect.TypeFor[v1.Pod]()
	uidType := reflect.TypeFor[types.UID]()
	seen := map[uintptr]bool{}
	out := map[string]int{}
	churnPod := func(p *v1.Pod) bool { return strings.HasPrefix(string(p.UID), "churn-") }
	var walk func(v reflect.Value, path string)
	walk = func(v reflect.Value, path string) {
		switch v.Kind() {
		case reflect.Pointer:
			if v.IsNil() || seen[v.Pointer()] {
				return
			}
			seen[v.Pointer()] = true
			if v.Elem().Type() == podType {
				if churnPod((*v1.Pod)(v.UnsafePointer())) {
					out[path]++
				}
				return
			}
			if strings.HasSuffix(path, "[]") || strings.HasSuffix(path, ".r") {
				path += "(" + v.Type().String() + ")"
			}
			walk(v.Elem(), path)
		case reflect.Interface:
			if !v.IsNil() {
				walk(v.Elem(), path)
			}
		case reflect.Struct:
			if v.Type() == podType {
				if p := v.Interface().(v1.Pod); churnPod(&p) {
					out[path]++
				}
				return
			}
			if !v.CanAddr() {
				c := reflect.New(v.Type()).Elem()
				c.Set(v)
				v = c
			}
			for i := range v.NumField() {
				f := v.Field(i)
				walk(reflect.NewAt(f.Type(), unsafe.Pointer(f.UnsafeAddr())).Elem(), path+"."+v.Type().Field(i).Name)
			}
		case reflect.Slice, reflect.Array:
			if v.Kind() == reflect.Slice && v.IsNil() {
				return
			}
			for i := range v.Len() {
				walk(v.Index(i), path+"[]")
			}
		case reflect.String:
			if v.Type() == uidType && strings.HasPrefix(v.String(), "churn-") {
				out[path+" (UID)"]++
			}
		case reflect.Map:
			for it := v.MapRange(); it.Next(); {
				walk(it.Key(), path+"{key}")
				walk(it.Value(), path+"{}")
			}
		}
	}
	walk(reflect.ValueOf(root), "agent")
	return out
}

// formatHolders lists podHolders' answer, one path a line.
func formatHolders(h map[string]int) string {
	var lines []string
	for path, n := range h {
		lines = append(lines, fmt.Sprintf("%6d %s", n, path))
	}
	sort.Strings(lines)
	return strings.Join(lines, "\n")
}
