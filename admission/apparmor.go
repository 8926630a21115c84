package admission

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"strings"

	v1 "k8s.io/api/core/v1"
)

// AppArmorOptions configure AppArmor. The zero value reads the host.
type AppArmorOptions struct {
	// Enabled reports whether the host enforces AppArmor. Defaults to
	// /sys/module/apparmor/parameters/enabled reading "Y".
	Enabled func() bool
	// Loaded reports whether the kernel holds the named profile. Defaults
	// to a look-up in /sys/kernel/security/apparmor/profiles at each
	// admission that needs it.
	Loaded func(name string) (bool, error)
}

// AppArmor is the kubelet's AppArmor check, for pending pods that ask for
// a profile other than unconfined (in the pod's or a container's security
// context, or the deprecated container.apparmor.security.beta.kubernetes.io
// annotations): the host must enforce AppArmor, and every Localhost
// profile must be named, else the pod is rejected with reason AppArmor and
// "Cannot enforce AppArmor: AppArmor is not enabled on the host" (or
// "invalid empty AppArmor profile name: ..."). nodekit also requires each
// Localhost profile to be loaded ("Cannot enforce AppArmor: profile
// \"k8s-deny-write\" is not loaded"), as kubelets before v1.30 did: the
// current kubelet leaves that to the runtime, whose sandbox then fails at
// each retry.
func AppArmor(opts AppArmorOptions) Handler {
	if opts.Enabled == nil {
		opts.Enabled = func() bool {
			b, err := os.ReadFile("/sys/module/apparmor/parameters/enabled")
			return err == nil && strings.HasPrefix(string(b), "Y")
		}
	}
	if opts.Loaded == nil {
		opts.Loaded = loadedProfile
	}
	return Func(func(pod *v1.Pod, _ []*v1.Pod) Result {
		if pod.Status.Phase != v1.PodPending && pod.Status.Phase != "" {
			// Running or terminated: checked when it was admitted.
			return Admitted()
		}
		if !appArmorRequired(pod) {
			return Admitted()
		}
		if err := validateAppArmor(pod, opts); err != nil {
			return Result{Reason: ReasonAppArmor, Message: "Cannot enforce AppArmor: " + err.Error()}
		}
		return Admitted()
	})
}

func validateAppArmor(pod *v1.Pod, opts AppArmorOptions) error {
	if !opts.Enabled() {
		return errors.New("AppArmor is not enabled on the host")
	}
	for _, c := range allContainers(pod) {
		profile := appArmorProfile(pod, c)
		if profile == nil || profile.Type != v1.AppArmorProfileTypeLocalhost {
			continue
		}
		if profile.LocalhostProfile == nil || strings.TrimSpace(*profile.LocalhostProfile) == "" {
			return fmt.Errorf("invalid empty AppArmor profile name: %q", profile)
		}
		ok, err := opts.Loaded(*profile.LocalhostProfile)
		if err != nil {
			return fmt.Errorf("could not read the loaded profiles: %w", err)
		}
		if !ok {
			return fmt.Errorf("profile %q is not loaded", *profile.LocalhostProfile)
		}
	}
	return nil
}

func allContainers(pod *v1.Pod) []*v1.Container {
	cs := make([]*v1.Container, 0, len(pod.Spec.InitContainers)+len(pod.Spec.Containers)+len(pod.Spec.EphemeralContainers))
	for i := range pod.Spec.InitContainers {
		cs = append(cs, &pod.Spec.InitContainers[i])
	}
	for i := range pod.Spec.Containers {
		cs = append(cs, &pod.Spec.Containers[i])
	}
	for i := range pod.Spec.EphemeralContainers {
		cs = append(cs, (*v1.Container)(&pod.Spec.EphemeralContainers[i].EphemeralContainerCommon))
	}
	return cs
}

// appArmorRequired: a profile other than unconfined is asked for.
func appArmorRequired(pod *v1.Pod) bool {
	confined := func(p *v1.AppArmorProfile) bool { return p != nil && p.Type != v1.AppArmorProfileTypeUnconfined }
	if sc := pod.Spec.SecurityContext; sc != nil && confined(sc.AppArmorProfile) {
		return true
	}
	for _, c := range allContainers(pod) {
		if c.SecurityContext != nil && confined(c.SecurityContext.AppArmorProfile) {
			return true
		}
	}
	for k, v := range pod.Annotations {
		if strings.HasPrefix(k, v1.DeprecatedAppArmorBetaContainerAnnotationKeyPrefix) && v != v1.DeprecatedAppArmorBetaProfileNameUnconfined {
			return true
		}
	}
	return false
}

// appArmorProfile is the container's profile: its own, the deprecated
// annotation's (static pods may not have had it synced to the field), or
// the pod's.
func appArmorProfile(pod *v1.Pod, c *v1.Container) *v1.AppArmorProfile {
	if c.SecurityContext != nil && c.SecurityContext.AppArmorProfile != nil {
		return c.SecurityContext.AppArmorProfile
	}
	if val, ok := pod.Annotations[v1.DeprecatedAppArmorBetaContainerAnnotationKeyPrefix+c.Name]; ok {
		switch {
		case val == v1.DeprecatedAppArmorBetaProfileRuntimeDefault:
			return &v1.AppArmorProfile{Type: v1.AppArmorProfileTypeRuntimeDefault}
		case val == v1.DeprecatedAppArmorBetaProfileNameUnconfined:
			return &v1.AppArmorProfile{Type: v1.AppArmorProfileTypeUnconfined}
		case strings.HasPrefix(val, v1.DeprecatedAppArmorBetaProfileNamePrefix):
			name := strings.TrimPrefix(val, v1.DeprecatedAppArmorBetaProfileNamePrefix)
			return &v1.AppArmorProfile{Type: v1.AppArmorProfileTypeLocalhost, LocalhostProfile: &name}
		}
	}
	if pod.Spec.SecurityContext != nil && pod.Spec.SecurityContext.AppArmorProfile != nil {
		return pod.Spec.SecurityContext.AppArmorProfile
	}
	return nil
}

// loadedProfile looks the profile up in the kernel's list, whose lines
// read "name (enforce)".
func loadedProfile(name string) (bool, error) {
	f, err := os.Open("/sys/kernel/security/apparmor/profiles")
	if err != nil {
		return false, err
	}
	defer f.Close()
	return profileListed(bufio.NewScanner(f), name)
}

func profileListed(s *bufio.Scanner, name string) (bool, error) {
	for s.Scan() {
		line := s.Text()
		if i := strings.LastIndex(line, " ("); i >= 0 {
			line = line[:i]
		}
		if line == name {
			return true, nil
		}
	}
	return false, s.Err()
}
