package backend

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"strings"

	"github.com/go-logr/logr"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// record is what the store keeps: a sandbox or a container.
type record interface {
	kind() string
	id() string
}

// sandboxRecord is the adapter's record of a sandbox. Its fields change
// only under Runtime.mu.
type sandboxRecord struct {
	ID        string
	Config    *runtimeapi.PodSandboxConfig `json:"-"`
	Handler   string
	State     runtimeapi.PodSandboxState
	CreatedAt int64

	containers []*containerRecord // creation order
}

func (s *sandboxRecord) kind() string { return "sandboxes" }
func (s *sandboxRecord) id() string   { return s.ID }

func (s *sandboxRecord) metadata() *runtimeapi.PodSandboxMetadata {
	return proto.Clone(s.Config.GetMetadata()).(*runtimeapi.PodSandboxMetadata)
}

// containerRecord is the adapter's record of a container. Its fields
// change only under Runtime.mu.
type containerRecord struct {
	ID         string
	SandboxID  string
	Config     *runtimeapi.ContainerConfig `json:"-"`
	ImageRef   string
	LogPath    string
	State      runtimeapi.ContainerState
	CreatedAt  int64
	StartedAt  int64
	FinishedAt int64
	ExitCode   int32
	Reason     string
	Message    string
	PID        int
	Resources  *runtimeapi.ContainerResources `json:"-"`

	starting bool // StartContainer is running
}

func (c *containerRecord) kind() string { return "containers" }
func (c *containerRecord) id() string   { return c.ID }

func (c *containerRecord) metadata() *runtimeapi.ContainerMetadata {
	return proto.Clone(c.Config.GetMetadata()).(*runtimeapi.ContainerMetadata)
}

func (c *containerRecord) image() *runtimeapi.ImageSpec {
	return &runtimeapi.ImageSpec{Image: c.Config.GetImage().GetImage(), UserSpecifiedImage: c.Config.GetImage().GetUserSpecifiedImage()}
}

func (c *containerRecord) status() *runtimeapi.ContainerStatus {
	st := &runtimeapi.ContainerStatus{
		Id:          c.ID,
		Metadata:    c.metadata(),
		State:       c.State,
		CreatedAt:   c.CreatedAt,
		StartedAt:   c.StartedAt,
		FinishedAt:  c.FinishedAt,
		ExitCode:    c.ExitCode,
		Image:       c.image(),
		ImageRef:    c.ImageRef,
		ImageId:     c.ImageRef,
		Reason:      c.Reason,
		Message:     c.Message,
		Labels:      cloneMap(c.Config.GetLabels()),
		Annotations: cloneMap(c.Config.GetAnnotations()),
		LogPath:     c.LogPath,
		Resources:   cloneResources(c.Resources),
	}
	for _, m := range c.Config.GetMounts() {
		st.Mounts = append(st.Mounts, proto.Clone(m).(*runtimeapi.Mount))
	}
	if st.Resources == nil {
		if res := c.Config.GetLinux().GetResources(); res != nil {
			st.Resources = &runtimeapi.ContainerResources{Linux: proto.Clone(res).(*runtimeapi.LinuxContainerResources)}
		}
	}
	return st
}

func cloneMap(m map[string]string) map[string]string {
	if len(m) == 0 {
		return nil
	}
	return maps.Clone(m)
}

func cloneSandboxConfig(c *runtimeapi.PodSandboxConfig) *runtimeapi.PodSandboxConfig {
	return proto.Clone(c).(*runtimeapi.PodSandboxConfig)
}

func cloneContainerConfig(c *runtimeapi.ContainerConfig) *runtimeapi.ContainerConfig {
	return proto.Clone(c).(*runtimeapi.ContainerConfig)
}

func cloneResources(r *runtimeapi.ContainerResources) *runtimeapi.ContainerResources {
	if r == nil {
		return nil
	}
	return proto.Clone(r).(*runtimeapi.ContainerResources)
}

// file is a record as written: the record's fields, and its CRI config
// (and resources) in protobuf's JSON form.
type file struct {
	Sandbox   *sandboxRecord   `json:",omitempty"`
	Container *containerRecord `json:",omitempty"`
	Config    json.RawMessage
	Resources json.RawMessage `json:",omitempty"`
}

// store keeps records as JSON files: <dir>/sandboxes/<id>.json and
// <dir>/containers/<id>.json, each replaced atomically. With no dir it
// does nothing.
type store struct {
	dir string
}

func (s store) save(rec record) error {
	if s.dir == "" {
		return nil
	}
	var f file
	var err error
	switch r := rec.(type) {
	case *sandboxRecord:
		f.Sandbox = r
		f.Config, err = protojson.Marshal(r.Config)
	case *containerRecord:
		f.Container = r
		f.Config, err = protojson.Marshal(r.Config)
		if err == nil && r.Resources != nil {
			f.Resources, err = protojson.Marshal(r.Resources)
		}
	}
	if err != nil {
		return err
	}
	data, err := json.Marshal(f)
	if err != nil {
		return err
	}
	dir := filepath.Join(s.dir, rec.kind())
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	tmp := filepath.Join(dir, "."+rec.id()+".tmp")
	if err := os.WriteFile(tmp, data, 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, filepath.Join(dir, rec.id()+".json"))
}

func (s store) remove(kind, id string) error {
	if s.dir == "" {
		return nil
	}
	err := os.Remove(filepath.Join(s.dir, kind, id+".json"))
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	return err
}

// load reads every record. A record that cannot be read is logged and
// skipped (and left on disk for inspection): one bad file does not stop
// the runtime.
func (s store) load(log logr.Logger) ([]*sandboxRecord, []*containerRecord, error) {
	if s.dir == "" {
		return nil, nil, nil
	}
	var sandboxes []*sandboxRecord
	var containers []*containerRecord
	for _, kind := range []string{"sandboxes", "containers"} {
		entries, err := os.ReadDir(filepath.Join(s.dir, kind))
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err != nil {
			return nil, nil, err
		}
		for _, e := range entries {
			name := e.Name()
			if !strings.HasSuffix(name, ".json") || strings.HasPrefix(name, ".") {
				continue
			}
			path := filepath.Join(s.dir, kind, name)
			f, err := readFile(path)
			if err != nil {
				log.Error(err, "unreadable record skipped", "path", path)
				continue
			}
			switch {
			case kind == "sandboxes" && f.Sandbox != nil:
				sandboxes = append(sandboxes, f.Sandbox)
			case kind == "containers" && f.Container != nil:
				containers = append(containers, f.Container)
			default:
				log.Error(errors.New("record of the wrong kind"), "unreadable record skipped", "path", path)
			}
		}
	}
	return sandboxes, containers, nil
}

func readFile(path string) (*file, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var f file
	if err := json.Unmarshal(data, &f); err != nil {
		return nil, err
	}
	switch {
	case f.Sandbox != nil:
		f.Sandbox.Config = new(runtimeapi.PodSandboxConfig)
		if err := protojson.Unmarshal(f.Config, f.Sandbox.Config); err != nil {
			return nil, fmt.Errorf("sandbox config: %w", err)
		}
	case f.Container != nil:
		f.Container.Config = new(runtimeapi.ContainerConfig)
		if err := protojson.Unmarshal(f.Config, f.Container.Config); err != nil {
			return nil, fmt.Errorf("container config: %w", err)
		}
		if len(f.Resources) > 0 {
			f.Container.Resources = new(runtimeapi.ContainerResources)
			if err := protojson.Unmarshal(f.Resources, f.Container.Resources); err != nil {
				return nil, fmt.Errorf("container resources: %w", err)
			}
		}
	}
	return &f, nil
}
