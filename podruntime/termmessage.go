package podruntime

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// The kubelet's termination message limits.
const (
	// MaxContainerTerminationMessageLength is the most of a termination
	// message file read: its last 4 KiB.
	maxContainerTerminationMessageLength = 4 << 10
	// MaxContainerTerminationMessageLogLength is the most of the log a
	// FallbackToLogsOnError message holds: its last 2 KiB...
	maxContainerTerminationMessageLogLength = 2 << 10
	// MaxContainerTerminationMessageLogLines ... of its last 80 lines.
	maxContainerTerminationMessageLogLines = 80
)

// terminationMessageMount creates the host file of the container's
// terminationMessagePath, <RootDir>/pods/<uid>/containers/<name>/<random
// id>, mode 0666, and returns its mount; nil when the container has no
// path or the Manager no RootDir. As the kubelet, a file that cannot be
// made is logged and the container starts without it.
func (m *Manager) terminationMessageMount(pod *v1.Pod, c *v1.Container) *runtimeapi.Mount {
	if c.TerminationMessagePath == "" || m.opts.RootDir == "" {
		return nil
	}
	dir := filepath.Join(m.opts.RootDir, "pods", string(pod.UID), "containers", c.Name)
	if strings.ContainsAny(string(pod.UID), `/\`) || strings.Contains(c.Name, "/") {
		return nil
	}
	var id [4]byte
	_, _ = rand.Read(id[:])
	path := filepath.Join(dir, hex.EncodeToString(id[:]))
	// The container's directory is new at its first start: one mkdir,
	// where MkdirAll would look at it and its parents first. Whatever the
	// umask, any user of the container may write the file.
	err := m.onDisk(func() error {
		err := mkdirs(dir, 0o750)
		if err == nil {
			err = writeFile(path, nil, 0o666)
		}
		return err
	})
	if err != nil {
		m.log.Error(err, "Cannot create the termination-log file", "path", path)
		return nil
	}
	return &runtimeapi.Mount{HostPath: path, ContainerPath: c.TerminationMessagePath}
}

// terminationMessage returns the message of an exited container, as the
// kubelet's convertToKubeContainerStatus: the last 4 KiB of its
// terminationMessagePath file; under FallbackToLogsOnError, when the file
// is empty or absent and the container failed (and did run), the tail of
// its log. An exited container's file does not change, so its message is
// read once and kept until the pod is forgotten (the pod's directory may
// be gone by the next status); the log's tail is read at every status.
func (m *Manager) terminationMessage(uid types.UID, st *runtimeapi.ContainerStatus) string {
	m.mu.Lock()
	msg, ok := m.termMessages[uid][st.GetId()]
	m.mu.Unlock()
	if ok {
		return msg
	}
	a := st.GetAnnotations()
	path := a[annotationTerminationMessagePath]
	fallback := v1.TerminationMessagePolicy(a[annotationTerminationMessagePolicy]) == v1.TerminationMessageFallbackToLogsOnError &&
		st.GetExitCode() != 0 && st.GetReason() != "ContainerCannotRun"
	msg, checkLogs := readTerminationMessageFile(st, path, fallback)
	if checkLogs {
		// The runtime may still be writing the log's last lines: read it
		// at every status, as the kubelet does.
		return readLogTail(st.GetLogPath())
	}
	m.mu.Lock()
	if m.termMessages[uid] == nil {
		m.termMessages[uid] = map[string]string{}
	}
	m.termMessages[uid][st.GetId()] = msg
	m.mu.Unlock()
	return msg
}

// readTerminationMessageFile reads the file mounted at path; it also
// reports whether the log should be read instead.
func readTerminationMessageFile(st *runtimeapi.ContainerStatus, path string, fallback bool) (string, bool) {
	if path == "" {
		return "", fallback
	}
	for _, mt := range st.GetMounts() {
		if mt.GetContainerPath() != path {
			continue
		}
		data, err := readTail(mt.GetHostPath(), maxContainerTerminationMessageLength)
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return "", fallback
			}
			return fmt.Sprintf("Error on reading termination log %s: %v", mt.GetHostPath(), err), false
		}
		return string(data), fallback && len(data) == 0
	}
	return "", fallback
}

// readTail reads at most the last n bytes of the file.
func readTail(path string, n int64) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if off := fi.Size() - n; off > 0 {
		if _, err := f.Seek(off, io.SeekStart); err != nil {
			return nil, err
		}
	}
	return io.ReadAll(io.LimitReader(f, n))
}

// readLogTail returns what the container last wrote to its CRI log: the
// content of its last 80 lines, at most the last 2 KiB of it. It reads
// the last 64 KiB of the file at most, so a huge log costs no more.
func readLogTail(path string) string {
	if path == "" {
		return ""
	}
	const window = 64 << 10
	data, err := readTail(path, window)
	if err != nil {
		return fmt.Sprintf("Error on reading termination message from logs: %v", err)
	}
	if fi, err := os.Stat(path); err == nil && fi.Size() > window {
		// The first line may be cut: drop it.
		if i := bytes.IndexByte(data, '\n'); i >= 0 {
			data = data[i+1:]
		}
	}
	lines := bytes.Split(bytes.TrimSuffix(data, []byte("\n")), []byte("\n"))
	var out []byte
	count := 0
	// Walk back over the CRI lines ("<time> <stream> <P|F> <content>"),
	// counting full lines, and rebuild the content in order.
	var parts [][]byte
	for i := len(lines) - 1; i >= 0 && count < maxContainerTerminationMessageLogLines; i-- {
		f := bytes.SplitN(lines[i], []byte(" "), 4)
		if len(f) < 3 {
			continue
		}
		content := []byte{}
		if len(f) == 4 {
			content = f[3]
		}
		if string(f[2]) == "F" {
			content = append(append([]byte(nil), content...), '\n')
			count++
		}
		parts = append(parts, content)
	}
	for i := len(parts) - 1; i >= 0; i-- {
		out = append(out, parts[i]...)
	}
	if len(out) > maxContainerTerminationMessageLogLength {
		out = out[len(out)-maxContainerTerminationMessageLogLength:]
	}
	return string(out)
}
