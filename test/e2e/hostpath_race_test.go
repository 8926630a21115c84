package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodekit/nodekit/runtime"
	"github.com/nodekit/nodekit/volume"
	"github.com/nodekit/nodekit/volume/hostpath"
)

// TestHostPathSwapRace races the swap of an allowed host directory for a
// symlink to a directory outside the allowed paths against containerd's
// mount of the volume, 1000 times: the hostPath plugin sets up volumes
// (retrying those it refuses because their path changed while it checked
// it) while a goroutine keeps turning every allowed directory into a
// symlink to the outside and back, and containerd creates and starts a
// container that mounts them while the swaps go on. Every mount must show
// the allowed directory: the container reads each volume's marker file
// and tries to write into it, and the outside directory must stay as it
// was. (With the path handed to the runtime as a string, about half of the
// mounts land on the outside directory.)
func TestHostPathSwapRace(t *testing.T) {
	f := newFixture(t, envEndpoint)
	if os.Geteuid() != 0 {
		skipOrFail(t, "needs root to bind-mount")
	}
	const (
		rounds  = 100
		perPod  = 10 // volumes, so mounts, per container
		outside = "outside"
		inside  = "inside"
	)
	host := t.TempDir()
	allowed := filepath.Join(host, "allowed")
	secret := filepath.Join(host, "secret")
	if err := os.MkdirAll(secret, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(secret, "marker"), []byte(outside), 0o644); err != nil {
		t.Fatal(err)
	}
	dirs := make([]string, perPod)
	for i := range dirs {
		dirs[i] = filepath.Join(allowed, "d"+strconv.Itoa(i))
		if err := os.MkdirAll(dirs[i], 0o777); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dirs[i], "marker"), []byte(inside), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	hp, err := hostpath.New(hostpath.Options{AllowedHostPaths: []hostpath.AllowedHostPath{{PathPrefix: allowed}}})
	if err != nil {
		t.Fatal(err)
	}
	if st, err := f.cri.ImageStatus(t.Context(), &runtimeapi.ImageSpec{Image: busyboxImage}, false); err != nil || st.GetImage() == nil {
		t.Fatalf("image %s is not in containerd's store: %v", busyboxImage, err)
	}

	// One sandbox for all rounds: each round's container makes new mounts.
	uid := types.UID(unique("race"))
	podDirs := volume.PodDirs{Root: f.rootDir}
	logDir := t.TempDir()
	sbConfig := &runtimeapi.PodSandboxConfig{
		Metadata:     &runtimeapi.PodSandboxMetadata{Name: "race", Namespace: f.ns, Uid: string(uid)},
		LogDirectory: logDir,
		Labels: map[string]string{
			runtime.LabelPodName: "race", runtime.LabelPodNamespace: f.ns, runtime.LabelPodUID: string(uid),
		},
		Linux: &runtimeapi.LinuxPodSandboxConfig{
			CgroupParent: "/" + f.cgroupRoot + "/pod" + string(uid),
			SecurityContext: &runtimeapi.LinuxSandboxSecurityContext{
				NamespaceOptions: &runtimeapi.NamespaceOption{Network: runtimeapi.NamespaceMode_NODE},
			},
		},
	}
	sandbox, err := f.cri.RunPodSandbox(t.Context(), sbConfig, "")
	if err != nil {
		t.Fatalf("RunPodSandbox: %v", err)
	}

	// The swapper: each allowed directory in turn becomes a symlink to the
	// outside directory for a moment, then the directory again.
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var swaps int
	wg.Go(func() {
		for {
			for _, d := range dirs {
				select {
				case <-stop:
					return
				default:
				}
				if err := os.Rename(d, d+".real"); err != nil {
					t.Error(err)
					return
				}
				if err := os.Symlink(secret, d); err != nil {
					t.Error(err)
					return
				}
				time.Sleep(50 * time.Microsecond)
				if err := os.Remove(d); err != nil {
					t.Error(err)
					return
				}
				if err := os.Rename(d+".real", d); err != nil {
					t.Error(err)
					return
				}
				swaps++
			}
		}
	})
	stopSwaps := sync.OnceFunc(func() { close(stop); wg.Wait() })
	t.Cleanup(stopSwaps)

	// Whatever happens, unmount before the temporary directories are
	// removed: a removal through a bind would reach the bound directory.
	t.Cleanup(func() {
		for i := range dirs {
			name := "v" + strconv.Itoa(i)
			if err := hp.TearDown(t.Context(), volume.TearDownRequest{PodUID: uid, Name: name, Dir: podDirs.Volume(uid, hostpath.PluginName, name)}); err != nil {
				t.Errorf("TearDown: %v", err)
			}
		}
	})
	typ := v1.HostPathDirectory
	mounts, refused, escapes := 0, 0, 0
	for round := range rounds {
		if t.Failed() {
			break
		}
		var cms []*runtimeapi.Mount
		var vols []volume.TearDownRequest
		script := ""
		for i, d := range dirs {
			name := "v" + strconv.Itoa(i)
			vol := &v1.Volume{Name: name, VolumeSource: v1.VolumeSource{HostPath: &v1.HostPathVolumeSource{Path: d, Type: &typ}}}
			req := volume.SetUpRequest{Pod: &v1.Pod{}, Volume: vol, Dir: podDirs.Volume(uid, hostpath.PluginName, name)}
			var m volume.Mount
			for try := 0; ; try++ {
				if m, err = hp.SetUp(t.Context(), req); err == nil {
					break
				}
				// Refused: the path changed while it was checked, or
				// resolved outside the allowed paths at that moment.
				refused++
				if try == 10000 {
					t.Fatalf("round %d: SetUp of %s: %v", round, d, err)
				}
			}
			vols = append(vols, volume.TearDownRequest{PodUID: uid, Name: name, Dir: req.Dir})
			cms = append(cms, &runtimeapi.Mount{ContainerPath: "/" + name, HostPath: m.HostPath})
			script += fmt.Sprintf("echo %s $(cat /%s/marker); touch /%s/written-%d; ", name, name, name, round)
		}
		name := "c" + strconv.Itoa(round)
		cfg := &runtimeapi.ContainerConfig{
			Metadata: &runtimeapi.ContainerMetadata{Name: name},
			Image:    &runtimeapi.ImageSpec{Image: busyboxImage},
			Command:  []string{"sh", "-c", script},
			LogPath:  name + ".log",
			Mounts:   cms,
			Labels: map[string]string{
				runtime.LabelContainerName: name, runtime.LabelPodNamespace: f.ns, runtime.LabelPodUID: string(uid),
			},
		}
		id, err := f.cri.CreateContainer(t.Context(), sandbox, cfg, sbConfig)
		if err != nil {
			t.Fatalf("round %d: CreateContainer: %v", round, err)
		}
		if err := f.cri.StartContainer(t.Context(), id); err != nil {
			t.Fatalf("round %d: StartContainer: %v", round, err)
		}
		mounts += len(cms)
		eventually(t, 30*time.Second, name+" exited", func() bool {
			st, err := f.cri.ContainerStatus(t.Context(), id, false)
			return err == nil && st.GetStatus().GetState() == runtimeapi.ContainerState_CONTAINER_EXITED
		})
		// containerd may write the last lines after the container is seen
		// exited: wait for a line from each volume (or give up and report
		// what is there).
		var lines []string
		waitLines := time.Now().Add(30 * time.Second)
		for {
			lines = readCRILog(t, filepath.Join(logDir, name+".log"))
			if len(lines) >= len(dirs) || time.Now().After(waitLines) {
				break
			}
			time.Sleep(50 * time.Millisecond)
		}
		for i := range dirs {
			want := fmt.Sprintf("v%d %s", i, inside)
			found := false
			for _, l := range lines {
				if strings.HasPrefix(l, fmt.Sprintf("v%d ", i)) {
					found = true
					if l != want {
						escapes++
						t.Errorf("round %d: the container's volume v%d shows %q, want %q: it escaped the allowed paths", round, i, l, want)
					}
				}
			}
			if !found {
				t.Errorf("round %d: no line for v%d in the container's log %q", round, i, lines)
			}
		}
		if err := f.cri.RemoveContainer(t.Context(), id); err != nil {
			t.Fatalf("round %d: RemoveContainer: %v", round, err)
		}
		for _, r := range vols {
			if err := hp.TearDown(t.Context(), r); err != nil {
				t.Fatalf("round %d: TearDown: %v", round, err)
			}
		}
	}
	stopSwaps()
	t.Logf("%d mounts by containerd in %d containers, raced against %d swaps; %d set-ups refused as changed; %d escapes",
		mounts, rounds, swaps, refused, escapes)
	if mounts < rounds*perPod && !t.Failed() {
		t.Errorf("%d mounts, want %d", mounts, rounds*perPod)
	}
	if entries := dirEntries(secret); len(entries) != 1 {
		t.Errorf("the outside directory holds %v, want only its marker: a container wrote there", entries)
	}
	written := 0
	for _, d := range dirs {
		for _, e := range dirEntries(d) {
			if strings.HasPrefix(e, "written-") {
				written++
			}
		}
	}
	if written != mounts {
		t.Errorf("%d files written into the allowed directories, want one per mount (%d)", written, mounts)
	}
	if err := f.cri.StopPodSandbox(t.Context(), sandbox); err != nil {
		t.Error(err)
	}
	if err := f.cri.RemovePodSandbox(t.Context(), sandbox); err != nil {
		t.Error(err)
	}
	if left := dirEntries(podDirs.Volumes(uid) + "/kubernetes.io~host-path"); len(left) != 0 {
		t.Errorf("mount points left after TearDown: %v", left)
	}
}
