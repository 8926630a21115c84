package node

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"net"
	"os"
	sysruntime "runtime"
	"strconv"
	"strings"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// Machine is what a Node reports about the host: its capacity and its
// nodeInfo. ReadMachine reads it from the host; hollow nodes make their own.
type Machine struct {
	// CPUs is the cpu capacity, in cores.
	CPUs int64
	// MemoryBytes is the memory capacity.
	MemoryBytes int64
	// EphemeralStorageBytes is the ephemeral-storage capacity; 0 reports
	// none.
	EphemeralStorageBytes int64
	// HugePages are the hugepages the kernel holds, in bytes, by page
	// size in bytes: every size it supports, 0 for a size with no page
	// reserved (the kubelet reports those too). Nil reports none.
	HugePages map[int64]int64
	// MachineID is /etc/machine-id.
	MachineID string
	// SystemUUID is the hardware's UUID (/sys/class/dmi/id/product_uuid).
	SystemUUID string
	// BootID is /proc/sys/kernel/random/boot_id.
	BootID string
	// KernelVersion is the kernel's release, as uname -r.
	KernelVersion string
	// OSImage is PRETTY_NAME of /etc/os-release.
	OSImage string
	// OperatingSystem and Architecture are GOOS and GOARCH.
	OperatingSystem, Architecture string
}

// The files ReadMachine reads.
const (
	fileMeminfo    = "/proc/meminfo"
	fileMachineID  = "/etc/machine-id"
	fileSystemUUID = "/sys/class/dmi/id/product_uuid"
	fileBootID     = "/proc/sys/kernel/random/boot_id"
	fileOSRelease  = "/etc/os-release"
	fileKernel     = "/proc/sys/kernel/osrelease"
	dirHugePages   = "/sys/kernel/mm/hugepages"
	filePidMax     = "/proc/sys/kernel/pid_max"
	fileThreadsMax = "/proc/sys/kernel/threads-max"
)

// FsSize is the size in bytes of the file system holding path, the
// kubelet's ephemeral-storage capacity when path is its root directory.
func FsSize(path string) (int64, error) { return fsSize(path) }

// ReadHugePages reads the hugepages the kernel holds from dir
// (/sys/kernel/mm/hugepages when ""): for each hugepages-<N>kB directory,
// nr_hugepages × the page size, in bytes by page size in bytes, as the
// kubelet's capacity counts them. A host without hugepage support gives
// an empty map.
func ReadHugePages(dir string) (map[int64]int64, error) {
	if dir == "" {
		dir = dirHugePages
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return map[int64]int64{}, nil
		}
		return nil, fmt.Errorf("node: reading hugepages: %w", err)
	}
	out := map[int64]int64{}
	for _, e := range entries {
		kb, ok := strings.CutPrefix(e.Name(), "hugepages-")
		if !ok {
			continue
		}
		kb, ok = strings.CutSuffix(kb, "kB")
		size, err := strconv.ParseInt(kb, 10, 64)
		if !ok || err != nil || size <= 0 || size > 1<<40 {
			continue
		}
		b, err := os.ReadFile(dir + "/" + e.Name() + "/nr_hugepages")
		if err != nil {
			return nil, fmt.Errorf("node: reading hugepages: %w", err)
		}
		n, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
		if err != nil || n < 0 {
			return nil, fmt.Errorf("node: bad nr_hugepages %q of %s", strings.TrimSpace(string(b)), e.Name())
		}
		out[size<<10] = n * (size << 10)
	}
	return out, nil
}

// HugePagesResource is the resource name of a hugepage size, as the
// kubelet names it: "hugepages-2Mi", "hugepages-1Gi".
func HugePagesResource(pageSize int64) v1.ResourceName {
	return v1.ResourceName(v1.ResourceHugePagesPrefix + resource.NewQuantity(pageSize, resource.BinarySI).String())
}

// HugePagesCapacity is the capacity of hugepages (ReadHugePages' map):
// hugepages-<size> for every size.
func HugePagesCapacity(pages map[int64]int64) v1.ResourceList {
	out := v1.ResourceList{}
	for size, bytes := range pages {
		out[HugePagesResource(size)] = *resource.NewQuantity(bytes, resource.BinarySI)
	}
	return out
}

// ReadMaxPIDs is the number of process IDs the host offers, the kubelet's
// "pid" capacity: the lower of /proc/sys/kernel/pid_max and threads-max.
func ReadMaxPIDs() (int64, error) {
	max, err := readInt(filePidMax)
	if err != nil {
		return 0, err
	}
	if tm, err := readInt(fileThreadsMax); err == nil && tm < max {
		max = tm
	}
	return max, nil
}

func readInt(path string) (int64, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, fmt.Errorf("node: %w", err)
	}
	n, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
	if err != nil || n <= 0 {
		return 0, fmt.Errorf("node: bad %s %q", path, strings.TrimSpace(string(b)))
	}
	return n, nil
}

// ReadMachine reads the host's Machine: the number of CPUs the process may
// use (runtime.NumCPU), MemTotal of /proc/meminfo, the size of the file
// system holding ephemeralStoragePath (none when empty), the hugepages
// (ReadHugePages), and the nodeInfo files. Only the memory and the file system size are required; an
// unreadable nodeInfo file leaves its field empty.
func ReadMachine(ephemeralStoragePath string) (Machine, error) {
	m := Machine{
		CPUs:            int64(sysruntime.NumCPU()),
		OperatingSystem: sysruntime.GOOS,
		Architecture:    sysruntime.GOARCH,
	}
	meminfo, err := os.ReadFile(fileMeminfo)
	if err != nil {
		return Machine{}, fmt.Errorf("node: reading the memory size: %w", err)
	}
	if m.MemoryBytes, err = parseMemTotal(meminfo); err != nil {
		return Machine{}, err
	}
	if ephemeralStoragePath != "" {
		if m.EphemeralStorageBytes, err = fsSize(ephemeralStoragePath); err != nil {
			return Machine{}, fmt.Errorf("node: reading the size of %s: %w", ephemeralStoragePath, err)
		}
	}
	m.HugePages, _ = ReadHugePages("")
	m.MachineID = readTrimmed(fileMachineID)
	m.SystemUUID = systemUUID(systemUUIDFiles, m.MachineID)
	m.BootID = readTrimmed(fileBootID)
	m.KernelVersion = readTrimmed(fileKernel)
	if b, err := os.ReadFile(fileOSRelease); err == nil {
		m.OSImage = parseOSRelease(b)
	}
	if m.OSImage == "" {
		m.OSImage = sysruntime.GOOS
	}
	return m, nil
}

// systemUUIDFiles hold the hardware's UUID, in the order cAdvisor (the
// kubelet's) reads them: DMI (x86, arm64 with UEFI), then the device
// tree of POWER and s390x machines.
var systemUUIDFiles = []string{fileSystemUUID, "/proc/device-tree/system-id", "/proc/device-tree/vm,uuid"}

// systemUUID is the hardware's UUID; on a machine that exposes none (a
// container, a VM without DMI) the machine ID written as a UUID, where
// the kubelet reports none: an ID that stays with the machine across
// restarts beats an empty systemUUID for the tools that read it.
func systemUUID(files []string, machineID string) string {
	for _, f := range files {
		if u := strings.TrimRight(readTrimmed(f), "\x00"); u != "" {
			return u
		}
	}
	if len(machineID) == 32 {
		id := strings.ToUpper(machineID)
		return id[:8] + "-" + id[8:12] + "-" + id[12:16] + "-" + id[16:20] + "-" + id[20:]
	}
	return ""
}

func readTrimmed(path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(b))
}

// parseMemTotal returns MemTotal of /proc/meminfo, in bytes.
func parseMemTotal(meminfo []byte) (int64, error) {
	sc := bufio.NewScanner(bytes.NewReader(meminfo))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) < 2 || f[0] != "MemTotal:" {
			continue
		}
		n, err := strconv.ParseInt(f[1], 10, 64)
		if err != nil || n <= 0 {
			return 0, fmt.Errorf("node: bad MemTotal %q", sc.Text())
		}
		switch {
		case len(f) == 2:
			return n, nil
		case len(f) == 3 && f[2] == "kB":
			return n * 1024, nil
		}
		return 0, fmt.Errorf("node: bad MemTotal %q", sc.Text())
	}
	return 0, errors.New("node: no MemTotal in /proc/meminfo")
}

// parseOSRelease returns PRETTY_NAME of an os-release file, unquoted.
func parseOSRelease(b []byte) string {
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		k, v, ok := strings.Cut(strings.TrimSpace(sc.Text()), "=")
		if !ok || k != "PRETTY_NAME" {
			continue
		}
		if u, err := strconv.Unquote(v); err == nil {
			return u
		}
		return strings.Trim(v, `"'`)
	}
	return ""
}

// hostIPv4 returns the first global unicast IPv4 address of the host's
// interfaces, or nil.
func hostIPv4() (net.IP, error) {
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		return nil, err
	}
	for _, a := range addrs {
		n, ok := a.(*net.IPNet)
		if !ok {
			continue
		}
		if ip4 := n.IP.To4(); ip4 != nil && ip4.IsGlobalUnicast() {
			return ip4, nil
		}
	}
	return nil, nil
}
