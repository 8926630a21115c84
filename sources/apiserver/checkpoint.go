package apiserver

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"slices"
	"strings"

	v1 "k8s.io/api/core/v1"

	"github.com/nodekit/nodekit/internal/atomicfile"
)

// checkpointVersion is the format of the checkpoint file.
const checkpointVersion = 1

// checkpointFile is what the checkpoint holds: the node's pods as the API
// server last listed or watched them.
type checkpointFile struct {
	Version  int      `json:"version"`
	NodeName string   `json:"nodeName"`
	Pods     []v1.Pod `json:"pods"`
}

// checkpoint keeps the pods of the last snapshot on disk. It is used by
// Run's goroutine alone.
type checkpoint struct {
	path, nodeName string
	// key identifies what was written last (checkpointKey): status-only
	// changes are not written again.
	key string
	// failed is the last write error, logged once.
	failed string
}

// load reads the checkpoint; ok is false when there is none, or none for
// this node.
func (c *checkpoint) load() (pods []*v1.Pod, ok bool, err error) {
	data, err := os.ReadFile(c.path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, fmt.Errorf("apiserver: reading the checkpoint: %w", err)
	}
	var f checkpointFile
	if err := json.Unmarshal(data, &f); err != nil {
		return nil, false, fmt.Errorf("apiserver: checkpoint %s: %w", c.path, err)
	}
	if f.Version != checkpointVersion {
		return nil, false, fmt.Errorf("apiserver: checkpoint %s: unknown version %d", c.path, f.Version)
	}
	if f.NodeName != c.nodeName {
		return nil, false, fmt.Errorf("apiserver: checkpoint %s is for node %q, not %q", c.path, f.NodeName, c.nodeName)
	}
	pods = make([]*v1.Pod, len(f.Pods))
	for i := range f.Pods {
		pods[i] = &f.Pods[i]
	}
	c.key = checkpointKey(pods)
	return pods, true, nil
}

// save writes the pods unless what matters for running them is unchanged
// since the last write. The write is atomic (a temporary file renamed over
// the checkpoint, both synced). When it fails, the old checkpoint is
// removed, so that a stale one is never used: an agent that restarts
// without a checkpoint waits for the API server.
func (c *checkpoint) save(pods []*v1.Pod) error {
	key := checkpointKey(pods)
	if key == c.key {
		return nil
	}
	err := c.write(pods)
	if err != nil {
		c.key = ""
		if rerr := os.Remove(c.path); rerr != nil && !errors.Is(rerr, fs.ErrNotExist) {
			err = errors.Join(err, fmt.Errorf("removing the stale checkpoint: %w", rerr))
		}
		return err
	}
	c.key = key
	return nil
}

func (c *checkpoint) write(pods []*v1.Pod) error {
	f := checkpointFile{Version: checkpointVersion, NodeName: c.nodeName, Pods: make([]v1.Pod, len(pods))}
	for i, p := range pods {
		q := p.DeepCopy()
		q.ManagedFields = nil
		f.Pods[i] = *q
	}
	data, err := json.Marshal(&f)
	if err != nil {
		return fmt.Errorf("apiserver: encoding the checkpoint: %w", err)
	}
	if err := atomicfile.WriteFile(c.path, data, 0o750); err != nil {
		return fmt.Errorf("apiserver: writing the checkpoint: %w", err)
	}
	return nil
}

// checkpointKey identifies a set of pods by what running them depends on:
// UID, deletion, spec, labels and annotations; not the status, which the
// agent itself keeps changing.
func checkpointKey(pods []*v1.Pod) string {
	keys := make([]string, len(pods))
	for i, p := range pods {
		h := sha256.New()
		_ = json.NewEncoder(h).Encode([]any{p.Spec, p.Labels, p.Annotations, p.DeletionTimestamp, p.DeletionGracePeriodSeconds})
		keys[i] = string(p.UID) + ":" + hex.EncodeToString(h.Sum(nil))
	}
	slices.Sort(keys)
	return strings.Join(keys, ",")
}
