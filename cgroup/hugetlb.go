package cgroup

import (
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// HugePageSizeName is the kernel's name of a hugepage size in the hugetlb
// controller's files: "64KB", "2MB", "1GB" (hugetlb.2MB.limit_in_bytes).
func HugePageSizeName(bytes int64) string {
	switch {
	case bytes >= 1<<30 && bytes%(1<<30) == 0:
		return strconv.FormatInt(bytes>>30, 10) + "GB"
	case bytes >= 1<<20 && bytes%(1<<20) == 0:
		return strconv.FormatInt(bytes>>20, 10) + "MB"
	default:
		return strconv.FormatInt(bytes>>10, 10) + "KB"
	}
}

// parseHugePageSizeName is the inverse of HugePageSizeName.
func parseHugePageSizeName(s string) (int64, bool) {
	var shift uint
	switch {
	case strings.HasSuffix(s, "GB"):
		shift = 30
	case strings.HasSuffix(s, "MB"):
		shift = 20
	case strings.HasSuffix(s, "KB"):
		shift = 10
	default:
		return 0, false
	}
	n, err := strconv.ParseInt(s[:len(s)-2], 10, 64)
	if err != nil || n <= 0 || n > 1<<(62-shift) {
		return 0, false
	}
	return n << shift, true
}

// HugePageLimits are the hugetlb limits of a resource list, as the
// kubelet's HugePageLimits: for each hugepages-<size> resource, its
// quantity in bytes by page size in bytes (two names of one size add up).
// The map is empty, not nil, when the list names no hugepages.
func HugePageLimits(rl v1.ResourceList) map[int64]int64 {
	out := map[int64]int64{}
	for name, q := range rl {
		size, ok := hugePageSize(name)
		if !ok {
			continue
		}
		out[size] += q.Value()
	}
	return out
}

// hugePageSize is the page size of a hugepages-<size> resource name.
func hugePageSize(name v1.ResourceName) (int64, bool) {
	s, ok := strings.CutPrefix(string(name), v1.ResourceHugePagesPrefix)
	if !ok {
		return 0, false
	}
	q, err := resource.ParseQuantity(s)
	if err != nil || q.Sign() <= 0 {
		return 0, false
	}
	return q.Value(), true
}

// hugetlbFiles lists the page sizes whose limit files dir holds
// (hugetlb.<size>.<suffix>), by size, with their file names.
func (m *fsManager) hugetlbFiles(dir, suffix string) (map[int64]string, error) {
	entries, err := m.fs.readDir(dir)
	if err != nil {
		return nil, &FileError{Op: "read", Controller: "hugetlb", Path: dir, Err: unwrapPathError(err)}
	}
	out := map[int64]string{}
	for _, e := range entries {
		mid, ok := strings.CutPrefix(e.Name(), "hugetlb.")
		if !ok {
			continue
		}
		mid, ok = strings.CutSuffix(mid, "."+suffix)
		if !ok || strings.Contains(mid, ".") {
			continue
		}
		if size, ok := parseHugePageSizeName(mid); ok {
			out[size] = e.Name()
		}
	}
	return out, nil
}

// hugetlbDir is the directory and the limit file suffix of rel's hugetlb
// controller; ok is false when the host has no hugetlb controller for it.
func (m *fsManager) hugetlbDir(rel string) (dir, suffix string, ok bool) {
	if m.v2 {
		dir = filepath.Join(m.info.Unified, rel)
		ctl, err := m.read("cgroup", dir, "cgroup.controllers")
		if err != nil || !slices.Contains(strings.Fields(ctl), "hugetlb") {
			return "", "", false
		}
		return dir, "max", true
	}
	dir, err := m.controllerDir("hugetlb", rel)
	if err != nil {
		return "", "", false
	}
	return dir, "limit_in_bytes", true
}

// setHugetlb writes limits to every hugetlb limit file of rel: the value
// of its page size, 0 for a size limits omits, as the kubelet does. On a
// host without the hugetlb controller it does nothing, as the kubelet. A
// positive limit of a page size the host lacks is an error.
func (m *fsManager) setHugetlb(rel string, limits map[int64]int64) error {
	if limits == nil {
		return nil
	}
	dir, suffix, ok := m.hugetlbDir(rel)
	if !ok {
		return nil
	}
	files, err := m.hugetlbFiles(dir, suffix)
	if err != nil {
		return err
	}
	for size, limit := range limits {
		if _, ok := files[size]; !ok && limit > 0 {
			return &NotSupportedError{Controller: "hugetlb", Where: dir, Reason: "has no " + HugePageSizeName(size) + " pages"}
		}
	}
	sizes := make([]int64, 0, len(files))
	for size := range files {
		sizes = append(sizes, size)
	}
	slices.Sort(sizes)
	for _, size := range sizes {
		v := "0"
		if l, ok := limits[size]; ok {
			v = strconv.FormatInt(l, 10)
			if l < 0 {
				v = "-1"
				if m.v2 {
					v = "max"
				}
			}
		}
		if err := m.write("hugetlb", dir, files[size], v); err != nil {
			return err
		}
	}
	return nil
}

// configHugetlb reads the hugetlb limits of rel back; nil without the
// controller or without hugepages.
func (m *fsManager) configHugetlb(rel string) (map[int64]int64, error) {
	dir, suffix, ok := m.hugetlbDir(rel)
	if !ok {
		return nil, nil
	}
	files, err := m.hugetlbFiles(dir, suffix)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, nil
		}
		return nil, err
	}
	if len(files) == 0 {
		return nil, nil
	}
	out := make(map[int64]int64, len(files))
	for size, file := range files {
		s, err := m.read("hugetlb", dir, file)
		if err != nil {
			return nil, err
		}
		v, err := parseInt64OrMax(s)
		if err != nil {
			return nil, &FileError{Op: "read", Controller: "hugetlb", Path: filepath.Join(dir, file), Err: err}
		}
		if uint64(v) >= v1UnlimitedAbove {
			v = -1
		}
		out[size] = v
	}
	return out, nil
}

// checkHugePageLimits rejects negative limits other than -1.
func checkHugePageLimits(limits map[int64]int64) error {
	for size, l := range limits {
		if size <= 0 || l < -1 {
			return fmt.Errorf("cgroup: bad hugepage limit %d for page size %d", l, size)
		}
	}
	return nil
}
