package podmodel

import "strings"

// RuntimeContainerID returns the runtime's ID of a container from the ID
// the API status shows, "<runtime>://<id>" ("containerd://abc" gives
// "abc"), and whether id has that prefix; an ID without it is returned
// whole.
func RuntimeContainerID(id string) (string, bool) {
	if _, rid, ok := strings.Cut(id, "://"); ok {
		return rid, true
	}
	return id, false
}
