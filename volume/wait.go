package volume

import (
	"errors"
	"fmt"
	"strings"
)

// WaitError is the error of WaitForPodVolumes: the volumes of a pod that
// are not set up, and why.
type WaitError struct {
	// Pod is the pod, as namespace/name.
	Pod string
	// Unmounted are the names of the volumes not set up, sorted.
	Unmounted []string
	// Errs holds the last error of each volume in Unmounted that failed
	// (a volume whose set-up is still to come has none).
	Errs map[string]error
	// PodErr is set when the pod's directories could not be created.
	PodErr error
	// Err is why waiting ended before every volume was set up: the
	// timeout (wrapping context.DeadlineExceeded) or the context's error;
	// nil when an error that retrying does not cure, or a pod directory
	// that cannot be created (ErrPodDirectory), ended it at once.
	Err error
}

// Error reads, for example:
//
//	volume: pod default/web: unmounted volumes=[data], error: data: hostpath: volume data: /etc/shadow is outside the allowed host paths [/srv]
func (e *WaitError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "volume: pod %s: unmounted volumes=[%s]", e.Pod, strings.Join(e.Unmounted, " "))
	var msgs []string
	if e.PodErr != nil {
		msgs = append(msgs, e.PodErr.Error())
	}
	for _, name := range e.Unmounted {
		if err := e.Errs[name]; err != nil {
			msgs = append(msgs, name+": "+err.Error())
		}
	}
	switch len(msgs) {
	case 0:
	case 1:
		b.WriteString(", error: " + msgs[0])
	default:
		b.WriteString(", errors: " + strings.Join(msgs, "; "))
	}
	if e.Err != nil {
		b.WriteString(" (" + e.Err.Error() + ")")
	}
	return b.String()
}

// Unwrap returns the errors of the volumes, PodErr and Err, so that
// errors.Is(err, ErrNotAllowed) or errors.Is(err, context.DeadlineExceeded)
// work on a WaitError.
func (e *WaitError) Unwrap() []error {
	var errs []error
	if e.PodErr != nil {
		errs = append(errs, e.PodErr)
	}
	for _, name := range e.Unmounted {
		if err := e.Errs[name]; err != nil {
			errs = append(errs, err)
		}
	}
	if e.Err != nil {
		errs = append(errs, e.Err)
	}
	return errs
}

// permanent reports whether an error that retrying does not cure keeps a
// volume (or the pod directory) from being set up.
func (e *WaitError) permanent() bool {
	if e.PodErr != nil && IsPermanent(e.PodErr) {
		return true
	}
	for _, err := range e.Errs {
		if IsPermanent(err) {
			return true
		}
	}
	return false
}

// final reports whether waiting ends at once: an error that retrying does
// not cure, or a pod directory that cannot be created (a full disk), which
// is reported at once so that the pod's status and events say why it does
// not start; the caller retries.
func (e *WaitError) final() bool {
	return e.permanent() || errors.Is(e.PodErr, ErrPodDirectory)
}

var _ interface{ Unwrap() []error } = (*WaitError)(nil)
