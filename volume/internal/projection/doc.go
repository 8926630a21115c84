// Package projection holds what the configMap, secret, downwardAPI and
// projected volume plugins share: turning API objects and the pod into the
// files of a volume (keys and items, modes, optional objects, downward API
// fields and resources), the volume directory (on disk or on a tmpfs) that
// holds them, written by the atomic writer, and the kubeclient adapter the
// plugins use by default.
package projection
