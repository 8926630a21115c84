package sources

import (
	"fmt"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// Validate checks what the agent relies on in a pod, a small subset of the
// API server's validation: the name is a DNS subdomain, the namespace (when
// set) a DNS label, the UID is set, there is at least one container, every
// container and init container has a name that is a DNS label and unique
// across both lists and an image, and the restart policy is Always,
// OnFailure or Never. Call SetDefaults first for pods that did not come
// through the API server.
//
// The error names every offending field ("spec.containers[1].image:
// Required value").
func Validate(pod *v1.Pod) error {
	var errs field.ErrorList
	meta := field.NewPath("metadata")
	if pod.Name == "" {
		errs = append(errs, field.Required(meta.Child("name"), ""))
	} else {
		for _, msg := range validation.IsDNS1123Subdomain(pod.Name) {
			errs = append(errs, field.Invalid(meta.Child("name"), pod.Name, msg))
		}
	}
	if pod.Namespace != "" {
		for _, msg := range validation.IsDNS1123Label(pod.Namespace) {
			errs = append(errs, field.Invalid(meta.Child("namespace"), pod.Namespace, msg))
		}
	}
	if pod.UID == "" {
		errs = append(errs, field.Required(meta.Child("uid"), ""))
	}

	spec := field.NewPath("spec")
	if len(pod.Spec.Containers) == 0 {
		errs = append(errs, field.Required(spec.Child("containers"), "a pod needs at least one container"))
	}
	names := sets.New[string]()
	errs = append(errs, validateContainers(pod.Spec.InitContainers, spec.Child("initContainers"), names)...)
	errs = append(errs, validateContainers(pod.Spec.Containers, spec.Child("containers"), names)...)

	switch pod.Spec.RestartPolicy {
	case v1.RestartPolicyAlways, v1.RestartPolicyOnFailure, v1.RestartPolicyNever:
	case "":
		errs = append(errs, field.Required(spec.Child("restartPolicy"), ""))
	default:
		errs = append(errs, field.NotSupported(spec.Child("restartPolicy"), pod.Spec.RestartPolicy,
			[]v1.RestartPolicy{v1.RestartPolicyAlways, v1.RestartPolicyOnFailure, v1.RestartPolicyNever}))
	}

	if len(errs) > 0 {
		return fmt.Errorf("sources: invalid pod %q: %w", pod.Namespace+"/"+pod.Name, errs.ToAggregate())
	}
	return nil
}

func validateContainers(cs []v1.Container, path *field.Path, names sets.Set[string]) field.ErrorList {
	var errs field.ErrorList
	for i := range cs {
		c := &cs[i]
		p := path.Index(i)
		switch {
		case c.Name == "":
			errs = append(errs, field.Required(p.Child("name"), ""))
		case names.Has(c.Name):
			errs = append(errs, field.Duplicate(p.Child("name"), c.Name))
		default:
			for _, msg := range validation.IsDNS1123Label(c.Name) {
				errs = append(errs, field.Invalid(p.Child("name"), c.Name, msg))
			}
		}
		names.Insert(c.Name)
		if c.Image == "" {
			errs = append(errs, field.Required(p.Child("image"), ""))
		}
	}
	return errs
}
