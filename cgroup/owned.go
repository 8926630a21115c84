package cgroup

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"k8s.io/apimachinery/pkg/types"
)

// The pod cgroups a PodManager created are recorded in its StateDir, one
// file per pod named by the pod's UID and holding the cgroup's name, so
// that two agents whose pod cgroups share a Root (two agents on one host
// with the default "kubepods") each remove only their own, and an agent
// that restarts still knows which are its own. A cgroup file system keeps
// no file of the agent's in a cgroup, and extended attributes on cgroup
// directories depend on the kernel and the mount (cgroup v1 needs the
// "xattr" option): the record lives with the agent's state instead.
//
// The record is written before the cgroup is made and removed after it is
// gone: a crash between the two leaves a record without a cgroup, which
// Pods drops, never a cgroup of this agent without a record.

// record records that the manager makes the pod cgroup name of uid.
func (p *PodManager) record(uid types.UID, name string) error {
	if p.opts.StateDir == "" {
		return nil
	}
	if err := os.MkdirAll(p.opts.StateDir, 0o700); err != nil {
		return fmt.Errorf("cgroup: recording the pod cgroup %s: %w", name, err)
	}
	if err := os.WriteFile(filepath.Join(p.opts.StateDir, string(uid)), []byte(name+"\n"), 0o600); err != nil {
		return fmt.Errorf("cgroup: recording the pod cgroup %s: %w", name, err)
	}
	return nil
}

// forget removes the record of uid's pod cgroup.
func (p *PodManager) forget(uid types.UID) error {
	if p.opts.StateDir == "" {
		return nil
	}
	if err := os.Remove(filepath.Join(p.opts.StateDir, string(uid))); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("cgroup: forgetting the pod cgroup of %s: %w", uid, err)
	}
	return nil
}

// recorded lists the UIDs whose pod cgroup the manager recorded; ok is
// false when the manager keeps no records (every pod cgroup under Root is
// its own).
func (p *PodManager) recorded() (uids map[types.UID]bool, ok bool, err error) {
	if p.opts.StateDir == "" {
		return nil, false, nil
	}
	es, err := os.ReadDir(p.opts.StateDir)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, true, fmt.Errorf("cgroup: reading the records of pod cgroups: %w", err)
	}
	uids = make(map[types.UID]bool, len(es))
	for _, e := range es {
		if e.Type().IsRegular() && checkUID(types.UID(e.Name())) == nil {
			uids[types.UID(e.Name())] = true
		}
	}
	return uids, true, nil
}
