// Package cgroup will hold the cgroupfs manager for cgroup v1 and v2: the
// node's root cgroup, the QoS cgroups and the pod cgroups, with resource
// limits computed from pod specs. For now it declares the interfaces the
// agent programs against.
package cgroup
