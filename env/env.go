package env

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apiruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/nodekit/nodekit/internal/expansion"
	"github.com/nodekit/nodekit/objects"
	"github.com/nodekit/nodekit/podmodel"
)

// EventRecorder records Kubernetes events: the one method of client-go's
// record.EventRecorder the Resolver calls. It must be safe for concurrent
// use and should not block.
type EventRecorder interface {
	Event(object apiruntime.Object, eventtype, reason, message string)
}

// ReasonInvalidEnvironmentVariableNames is the reason of the Warning event
// on the pod when envFrom skips keys that cannot be variable names.
const ReasonInvalidEnvironmentVariableNames = "InvalidEnvironmentVariableNames"

// Options configure a Resolver. The zero value is usable: it resolves
// values, $(VAR) references and downward-API fields, and fails every
// ConfigMap or Secret reference that is not optional.
type Options struct {
	// Objects gets the ConfigMaps and Secrets the environment refers to;
	// give the volume plugins the same one. Defaults to nil: none can be
	// read.
	Objects objects.Getter
	// NodeAllocatable is what a resourceFieldRef reports for a cpu, memory
	// or ephemeral-storage limit the container does not set. Defaults to
	// nothing (such a limit is 0).
	NodeAllocatable func() v1.ResourceList
	// HostIPs are the node's addresses, for status.hostIP and
	// status.hostIPs. Defaults to the pod status's host IPs.
	HostIPs func() []string
	// Recorder receives the InvalidEnvironmentVariableNames events.
	// Defaults to none.
	Recorder EventRecorder
	// Services, when set, gives the service-link variables
	// (KUBERNETES_SERVICE_HOST, {SVC}_SERVICE_PORT, {SVC}_PORT_80_TCP, ...)
	// of the Services of the pod's namespace and of the master Service.
	// Defaults to nil: no service links, as a kubelet without an API
	// server.
	Services Services
}

// Var is one environment variable.
type Var struct {
	Name, Value string
}

// Resolver resolves containers' environments. It is safe for concurrent
// use and holds no state of its own between calls.
type Resolver struct {
	opts Options
}

// New returns a Resolver. It does no I/O.
func New(opts Options) *Resolver { return &Resolver{opts: opts} }

// ErrNoObjects is the class of the errors of a ConfigMap or Secret
// reference when the Resolver has no Objects getter.
var ErrNoObjects = errors.New("no ConfigMap and Secret getter configured")

// ErrTooLong is the class of the errors of a value, or an environment, past
// its bound (see the package doc).
var ErrTooLong = expansion.ErrTooLong

// Container resolves the environment of container c of pod, whose
// sandbox has podIPs, as the kubelet's makeEnvironmentVariables: envFrom
// sources first, in order, each key with the source's prefix; then env,
// in order, each plain value with its $(VAR) references expanded against
// the variables defined before it, each valueFrom resolved (fieldRef,
// resourceFieldRef, configMapKeyRef, secretKeyRef). A later definition of
// a name replaces the value of an earlier one, which keeps its place.
// A missing object or key fails unless the reference is optional, with the
// kubelet's message ("couldn't find key k in ConfigMap ns/name", or the
// getter's "configmaps \"name\" not found"); the caller reports the
// container as CreateContainerConfigError.
func (r *Resolver) Container(ctx context.Context, pod *v1.Pod, c *v1.Container, podIPs []string) ([]Var, error) {
	var (
		configMaps = map[string]*v1.ConfigMap{}
		secrets    = map[string]*v1.Secret{}
		order      []string
		vars       = map[string]string{}
	)
	// The environment's size is bounded as it is built, each value
	// (expanded or not) and the whole, so that no input makes it large.
	budget := expansion.NewBudget("the environment", expansion.MaxTotalBytes)
	set := func(k, v string, counted bool) error {
		if !counted {
			if len(v) > expansion.MaxValueBytes {
				return fmt.Errorf("env %s: %w: more than %d bytes", k, expansion.ErrTooLong, expansion.MaxValueBytes)
			}
			if err := budget.Take(len(k) + 1 + len(v)); err != nil {
				return fmt.Errorf("env %s: %w", k, err)
			}
		}
		if old, ok := vars[k]; ok {
			budget.Give(len(k) + 1 + len(old))
		} else {
			order = append(order, k)
		}
		vars[k] = v
		return nil
	}
	getConfigMap := func(name string) (*v1.ConfigMap, error) {
		if cm, ok := configMaps[name]; ok {
			return cm, nil
		}
		if r.opts.Objects == nil {
			return nil, fmt.Errorf("couldn't get configMap %s/%s: %w", pod.Namespace, name, ErrNoObjects)
		}
		cm, err := r.opts.Objects.GetConfigMap(ctx, pod.Namespace, name)
		if err == nil && cm == nil {
			err = fmt.Errorf("couldn't get configMap %s/%s: no object and no error", pod.Namespace, name)
		}
		if err != nil {
			return nil, err
		}
		configMaps[name] = cm
		return cm, nil
	}
	getSecret := func(name string) (*v1.Secret, error) {
		if s, ok := secrets[name]; ok {
			return s, nil
		}
		if r.opts.Objects == nil {
			return nil, fmt.Errorf("couldn't get secret %s/%s: %w", pod.Namespace, name, ErrNoObjects)
		}
		s, err := r.opts.Objects.GetSecret(ctx, pod.Namespace, name)
		if err == nil && s == nil {
			err = fmt.Errorf("couldn't get secret %s/%s: no object and no error", pod.Namespace, name)
		}
		if err != nil {
			return nil, err
		}
		secrets[name] = s
		return s, nil
	}

	services, err := r.serviceEnv(pod)
	if err != nil {
		return nil, err
	}
	serviceVars := Map(services)

	for _, from := range c.EnvFrom {
		var (
			data     map[string]string
			what     string
			optional bool
			name     string
		)
		switch {
		case from.ConfigMapRef != nil:
			name, what, optional = from.ConfigMapRef.Name, "configMap", isTrue(from.ConfigMapRef.Optional)
			cm, err := getConfigMap(name)
			if err != nil {
				if optional && apierrors.IsNotFound(err) {
					continue
				}
				return nil, err
			}
			data = cm.Data
		case from.SecretRef != nil:
			name, what, optional = from.SecretRef.Name, "secret", isTrue(from.SecretRef.Optional)
			s, err := getSecret(name)
			if err != nil {
				if optional && apierrors.IsNotFound(err) {
					continue
				}
				return nil, err
			}
			data = make(map[string]string, len(s.Data)+len(s.StringData))
			for k, v := range s.Data {
				data[k] = string(v)
			}
		default:
			continue
		}
		var invalid []string
		for _, k := range slices.Sorted(maps.Keys(data)) {
			name := from.Prefix + k
			if len(validation.IsRelaxedEnvVarName(name)) > 0 {
				invalid = append(invalid, name)
				continue
			}
			if err := set(name, data[k], false); err != nil {
				return nil, err
			}
		}
		if len(invalid) > 0 && r.opts.Recorder != nil {
			r.opts.Recorder.Event(pod, v1.EventTypeWarning, ReasonInvalidEnvironmentVariableNames,
				fmt.Sprintf("Keys [%s] from the EnvFrom %s %s/%s were skipped since they are considered invalid environment variable names.",
					strings.Join(invalid, ", "), what, pod.Namespace, name))
		}
	}

	for _, e := range c.Env {
		val := e.Value
		counted := false
		switch {
		case val != "":
			v, err := budget.Expand(val, func(n string) (string, bool) {
				if v, ok := vars[n]; ok {
					return v, true
				}
				v, ok := serviceVars[n]
				return v, ok
			}, expansion.MaxValueBytes, len(e.Name)+1)
			if err != nil {
				return nil, fmt.Errorf("env %s: %w", e.Name, err)
			}
			val, counted = v, true
		case e.ValueFrom == nil:
		case e.ValueFrom.FieldRef != nil:
			var hostIPs []string
			if r.opts.HostIPs != nil {
				hostIPs = r.opts.HostIPs()
			}
			v, err := podmodel.RuntimeFieldValue(pod, e.ValueFrom.FieldRef.FieldPath, podIPs, hostIPs)
			if err != nil {
				return nil, err
			}
			val = v
		case e.ValueFrom.ResourceFieldRef != nil:
			sel := *e.ValueFrom.ResourceFieldRef
			if sel.ContainerName == "" {
				sel.ContainerName = c.Name
			}
			var alloc v1.ResourceList
			if r.opts.NodeAllocatable != nil {
				alloc = r.opts.NodeAllocatable()
			}
			v, err := podmodel.ResourceValue(&sel, podWith(pod, c), alloc)
			if err != nil {
				return nil, err
			}
			val = v
		case e.ValueFrom.ConfigMapKeyRef != nil:
			ref := e.ValueFrom.ConfigMapKeyRef
			optional := isTrue(ref.Optional)
			cm, err := getConfigMap(ref.Name)
			if err != nil {
				if optional && apierrors.IsNotFound(err) {
					continue
				}
				return nil, err
			}
			v, ok := cm.Data[ref.Key]
			if !ok {
				if optional {
					continue
				}
				return nil, fmt.Errorf("couldn't find key %s in ConfigMap %s/%s", ref.Key, pod.Namespace, ref.Name)
			}
			val = v
		case e.ValueFrom.SecretKeyRef != nil:
			ref := e.ValueFrom.SecretKeyRef
			optional := isTrue(ref.Optional)
			s, err := getSecret(ref.Name)
			if err != nil {
				if optional && apierrors.IsNotFound(err) {
					continue
				}
				return nil, err
			}
			v, ok := s.Data[ref.Key]
			if !ok {
				if optional {
					continue
				}
				return nil, fmt.Errorf("couldn't find key %s in Secret %s/%s", ref.Key, pod.Namespace, ref.Name)
			}
			val = string(v)
		case e.ValueFrom.FileKeyRef != nil:
			return nil, fmt.Errorf("env %s: fileKeyRef is not supported", e.Name)
		}
		if err := set(e.Name, val, counted); err != nil {
			return nil, err
		}
	}
	// Service links come last, where the container does not define the
	// name itself.
	for _, v := range services {
		if _, ok := vars[v.Name]; !ok {
			if err := set(v.Name, v.Value, false); err != nil {
				return nil, err
			}
		}
	}
	out := make([]Var, len(order))
	for i, k := range order {
		out[i] = Var{Name: k, Value: vars[k]}
	}
	return out, nil
}

// podWith returns pod, or a copy of it with c among its containers when c
// is an ephemeral container (which resourceFieldRef may name itself).
func podWith(pod *v1.Pod, c *v1.Container) *v1.Pod {
	if podmodel.FindContainer(pod, c.Name) != nil {
		return pod
	}
	cp := *pod
	cp.Spec.Containers = append(slices.Clip(pod.Spec.Containers), *c)
	return &cp
}

func isTrue(b *bool) bool { return b != nil && *b }

// Map returns vars as a map of name to value, for $(VAR) expansion.
func Map(vars []Var) map[string]string {
	m := make(map[string]string, len(vars))
	for _, v := range vars {
		m[v.Name] = v.Value
	}
	return m
}
