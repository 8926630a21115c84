package userns

import (
	"encoding/json"
	"fmt"
	"path/filepath"

	"github.com/nodekit/nodekit/internal/atomicfile"
)

// mappingsFile is the name of a pod's mapping file in its directory.
const mappingsFile = "userns"

// The kubelet's format of the file.
type idMapping struct {
	HostID      uint32 `json:"hostId"`
	ContainerID uint32 `json:"containerId"`
	Length      uint32 `json:"length"`
}

type mappingsJSON struct {
	UIDMappings []idMapping `json:"uidMappings"`
	GIDMappings []idMapping `json:"gidMappings"`
}

// parseMappings reads a mapping file with the kubelet's checks: one UID
// and one identical GID mapping, of container ID 0.
func parseMappings(data []byte) (Mapping, error) {
	var f mappingsJSON
	if err := json.Unmarshal(data, &f); err != nil {
		return Mapping{}, classErrorf(ErrBadMappings, "invalid user namespace mappings file: %v", err)
	}
	switch {
	case len(f.UIDMappings) != 1:
		return Mapping{}, classErrorf(ErrBadMappings, "invalid user namespace configuration: no more than one mapping allowed.")
	case len(f.UIDMappings) != len(f.GIDMappings):
		return Mapping{}, classErrorf(ErrBadMappings, "invalid user namespace configuration: GID and UID mappings should be identical.")
	case f.UIDMappings[0] != f.GIDMappings[0]:
		return Mapping{}, classErrorf(ErrBadMappings, "invalid user namespace configuration: GID and UID mapping should be identical")
	case f.UIDMappings[0].ContainerID != 0:
		return Mapping{}, classErrorf(ErrBadMappings, "invalid user namespace configuration: UID 0 must be mapped")
	}
	u := f.UIDMappings[0]
	if u.Length > 0 && uint64(u.HostID)+uint64(u.Length)-1 > maxID {
		return Mapping{}, classErrorf(ErrBadMappings, "invalid user namespace configuration: host IDs %d+%d reach past %d", u.HostID, u.Length, uint64(maxID))
	}
	return Mapping{HostID: u.HostID, Length: u.Length}, nil
}

func marshalMappings(mp Mapping) ([]byte, error) {
	m := []idMapping{{HostID: mp.HostID, ContainerID: 0, Length: mp.Length}}
	return json.Marshal(mappingsJSON{UIDMappings: m, GIDMappings: m})
}

// writeMappings writes the mapping file into dir atomically and durably:
// a temporary file renamed over it, then dir synced.
func writeMappings(dir string, mp Mapping) error {
	data, err := marshalMappings(mp)
	if err != nil {
		return err
	}
	if err := atomicfile.WriteFile(filepath.Join(dir, mappingsFile), data, 0o750); err != nil {
		return fmt.Errorf("write user namespace mappings: %w", err)
	}
	return nil
}
