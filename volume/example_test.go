package volume_test

import (
	"context"
	"fmt"
	"os"

	v1 "k8s.io/api/core/v1"

	"github.com/nodekit/nodekit/volume"
	"github.com/nodekit/nodekit/volume/emptydir"
	"github.com/nodekit/nodekit/volume/hostpath"
)

func ExampleNewManager() {
	root, _ := os.MkdirTemp("", "nodekit")
	defer os.RemoveAll(root)
	hp, err := hostpath.New(hostpath.Options{
		AllowedHostPaths: []hostpath.AllowedHostPath{{PathPrefix: "/srv"}},
	})
	if err != nil {
		panic(err)
	}
	m, err := volume.NewManager(root, volume.Options{
		Plugins: []volume.Plugin{hp, emptydir.New(emptydir.Options{})},
	})
	if err != nil {
		panic(err)
	}
	ctx := context.Background()

	pod := &v1.Pod{Spec: v1.PodSpec{
		Volumes: []v1.Volume{
			{Name: "scratch", VolumeSource: v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{}}},
			{Name: "secrets", VolumeSource: v1.VolumeSource{HostPath: &v1.HostPathVolumeSource{Path: "/etc/shadow"}}},
		},
		Containers: []v1.Container{{Name: "app", VolumeMounts: []v1.VolumeMount{
			{Name: "scratch", MountPath: "/scratch"},
		}}},
	}}
	pod.Namespace, pod.Name, pod.UID = "default", "web", "0d4c7e"

	// Only the volumes a container mounts are set up.
	mounts, err := m.WaitForPodVolumes(ctx, pod)
	if err != nil {
		panic(err)
	}
	cms, err := m.ContainerMounts(pod, &pod.Spec.Containers[0], mounts, nil)
	if err != nil {
		panic(err)
	}
	fmt.Println(cms[0].ContainerPath, "<-", cms[0].HostPath == m.PodDirs().Volume(pod.UID, emptydir.PluginName, "scratch"))

	// A container that mounts a host path outside the allowed ones.
	pod.Spec.Containers[0].VolumeMounts = append(pod.Spec.Containers[0].VolumeMounts, v1.VolumeMount{Name: "secrets", MountPath: "/s"})
	_, err = m.WaitForPodVolumes(ctx, pod)
	fmt.Println(err)

	// Once the pod's containers stopped:
	if err := m.ReleasePod(ctx, pod.UID); err != nil {
		panic(err)
	}
	_, err = os.Stat(m.PodDirs().Pod(pod.UID))
	fmt.Println(os.IsNotExist(err))
	// Output:
	// /scratch <- true
	// volume: pod default/web: unmounted volumes=[secrets], error: secrets: hostpath: volume secrets: /etc/shadow is outside the allowed host paths [/srv]
	// true
}
