package objects

import (
	"slices"

	v1 "k8s.io/api/core/v1"
)

// References returns the names of the ConfigMaps and Secrets of its
// namespace that pod refers to, each once, sorted: in the environment of
// every container (init, app and ephemeral: configMapKeyRef,
// secretKeyRef, envFrom), in its configMap, secret and projected volumes,
// and in its imagePullSecrets.
func References(pod *v1.Pod) (configMaps, secrets []string) {
	envRefs := func(env []v1.EnvVar, from []v1.EnvFromSource) {
		for _, f := range from {
			if f.ConfigMapRef != nil {
				configMaps = append(configMaps, f.ConfigMapRef.Name)
			}
			if f.SecretRef != nil {
				secrets = append(secrets, f.SecretRef.Name)
			}
		}
		for _, e := range env {
			if e.ValueFrom == nil {
				continue
			}
			if r := e.ValueFrom.ConfigMapKeyRef; r != nil {
				configMaps = append(configMaps, r.Name)
			}
			if r := e.ValueFrom.SecretKeyRef; r != nil {
				secrets = append(secrets, r.Name)
			}
		}
	}
	for i := range pod.Spec.InitContainers {
		envRefs(pod.Spec.InitContainers[i].Env, pod.Spec.InitContainers[i].EnvFrom)
	}
	for i := range pod.Spec.Containers {
		envRefs(pod.Spec.Containers[i].Env, pod.Spec.Containers[i].EnvFrom)
	}
	for i := range pod.Spec.EphemeralContainers {
		envRefs(pod.Spec.EphemeralContainers[i].Env, pod.Spec.EphemeralContainers[i].EnvFrom)
	}
	for _, v := range pod.Spec.Volumes {
		switch {
		case v.ConfigMap != nil:
			configMaps = append(configMaps, v.ConfigMap.Name)
		case v.Secret != nil:
			secrets = append(secrets, v.Secret.SecretName)
		case v.Projected != nil:
			for _, s := range v.Projected.Sources {
				if s.ConfigMap != nil {
					configMaps = append(configMaps, s.ConfigMap.Name)
				}
				if s.Secret != nil {
					secrets = append(secrets, s.Secret.Name)
				}
			}
		}
	}
	for _, s := range pod.Spec.ImagePullSecrets {
		secrets = append(secrets, s.Name)
	}
	clean := func(names []string) []string {
		names = slices.DeleteFunc(names, func(n string) bool { return n == "" })
		slices.Sort(names)
		return slices.Compact(names)
	}
	return clean(configMaps), clean(secrets)
}
