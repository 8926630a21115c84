package userns

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
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
	if err := os.MkdirAll(dir, 0o750); err != nil {
		return fmt.Errorf("create user namespace store: %w", err)
	}
	tmp, err := os.CreateTemp(dir, "."+mappingsFile+".tmp-")
	if err != nil {
		return err
	}
	_, err = tmp.Write(data)
	if err == nil {
		err = tmp.Sync()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp.Name(), filepath.Join(dir, mappingsFile))
	}
	if err != nil {
		_ = os.Remove(tmp.Name())
		return err
	}
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	return err
}
