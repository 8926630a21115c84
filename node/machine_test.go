package node

import (
	"os"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestParseMemTotal(t *testing.T) {
	tests := []struct {
		name    string
		in      string
		want    int64
		wantErr bool
	}{
		{"kB", "MemFree: 1 kB\nMemTotal:       24576000 kB\n", 24576000 * 1024, false},
		{"bare", "MemTotal: 1024\n", 1024, false},
		{"missing", "MemFree: 1 kB\n", 0, true},
		{"garbage", "MemTotal: lots kB\n", 0, true},
		{"unit", "MemTotal: 1 MB\n", 0, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := parseMemTotal([]byte(tt.in))
			if (err != nil) != tt.wantErr || got != tt.want {
				t.Errorf("parseMemTotal() = %d, %v; want %d, error %v", got, err, tt.want, tt.wantErr)
			}
		})
	}
}

func TestParseOSRelease(t *testing.T) {
	tests := []struct{ name, in, want string }{
		{"quoted", "NAME=\"Debian GNU/Linux\"\nPRETTY_NAME=\"Debian GNU/Linux 12 (bookworm)\"\n", "Debian GNU/Linux 12 (bookworm)"},
		{"bare", "PRETTY_NAME=Alpine\n", "Alpine"},
		{"single quotes", "PRETTY_NAME='Fedora Linux 41'\n", "Fedora Linux 41"},
		{"missing", "NAME=x\n", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if diff := cmp.Diff(tt.want, parseOSRelease([]byte(tt.in))); diff != "" {
				t.Errorf("parseOSRelease (-want +got):\n%s", diff)
			}
		})
	}
}

func TestReadMachine(t *testing.T) {
	m, err := ReadMachine(t.TempDir())
	if err != nil {
		t.Skipf("host without /proc/meminfo or statfs: %v", err)
	}
	if m.CPUs < 1 || m.MemoryBytes < 1<<20 || m.EphemeralStorageBytes < 1<<20 {
		t.Errorf("ReadMachine() = %+v: want CPUs, memory and ephemeral storage", m)
	}
	if m.OperatingSystem == "" || m.Architecture == "" || m.OSImage == "" {
		t.Errorf("ReadMachine() = %+v: want OS, architecture and OS image", m)
	}
}

func TestSystemUUID(t *testing.T) {
	dir := t.TempDir()
	dmi, tree := dir+"/product_uuid", dir+"/system-id"
	files := []string{dmi, tree}
	if got := systemUUID(files, "3d1219c7c4c5404aaa1f6d2a48adfda4"); got != "3D1219C7-C4C5-404A-AA1F-6D2A48ADFDA4" {
		t.Errorf("no hardware UUID: %q, want the machine ID as a UUID", got)
	}
	if got := systemUUID(files, ""); got != "" {
		t.Errorf("nothing known: %q", got)
	}
	if err := os.WriteFile(tree, []byte("IBM,0123456789\x00"), 0o644); err != nil {
		t.Fatal(err)
	}
	if got := systemUUID(files, "3d1219c7c4c5404aaa1f6d2a48adfda4"); got != "IBM,0123456789" {
		t.Errorf("device tree: %q", got)
	}
	if err := os.WriteFile(dmi, []byte("4C4C4544-0042-3510-8057-B7C04F563732\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if got := systemUUID(files, "3d1219c7c4c5404aaa1f6d2a48adfda4"); got != "4C4C4544-0042-3510-8057-B7C04F563732" {
		t.Errorf("DMI: %q", got)
	}
}

// TestReadMachineSystemUUID: the Node's systemUUID is never empty on a
// machine with a machine ID.
func TestReadMachineSystemUUID(t *testing.T) {
	m, err := ReadMachine("")
	if err != nil {
		t.Skip("not a Linux host:", err)
	}
	if m.MachineID != "" && m.SystemUUID == "" {
		t.Errorf("machine ID %q but no system UUID", m.MachineID)
	}
}
