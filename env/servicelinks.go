package env

import (
	"errors"
	"fmt"
	"net"
	"slices"
	"strconv"
	"strings"

	v1 "k8s.io/api/core/v1"

	"github.com/nodekit/nodekit/podmodel"
)

// Services lists the cluster's Services for the service links of the
// environment (the kubelet's service lister). The Agent joined to a
// cluster serves them from an informer on the API server's Services.
type Services interface {
	// List returns the Services of the namespace.
	List(namespace string) ([]*v1.Service, error)
	// HasSynced reports whether the Services were read at least once.
	HasSynced() bool
}

// ErrServicesNotSynced is the class of the error of a pod from the API
// server whose environment is resolved before the Services were read
// once: its start fails (CreateContainerConfigError) and is retried.
var ErrServicesNotSynced = errors.New("services have not yet been read at least once, cannot construct envvars")

// masterServiceNamespace and masterServiceName name the Service whose
// variables every pod gets, service links enabled or not: the API
// server's.
const (
	masterServiceNamespace = "default"
	masterServiceName      = "kubernetes"
)

// serviceEnv returns the service-link variables of pod, as the kubelet's
// getServiceEnvVarMap: from the master Service of namespace default always,
// and, with spec.enableServiceLinks (unset means true, the API's default),
// from every Service of the pod's namespace, which wins over the master
// Service of the same name. Services without a cluster IP (headless) or
// without ports give none. The variables come sorted by Service name, each
// Service's in the kubelet's order.
func (r *Resolver) serviceEnv(pod *v1.Pod) ([]Var, error) {
	s := r.opts.Services
	if s == nil {
		return nil, nil
	}
	// A pod from the API server waits for the Services, so that it never
	// misses KUBERNETES_SERVICE_HOST; a static pod may start before the
	// API server answers.
	if !podmodel.IsStatic(pod) && !s.HasSynced() {
		return nil, ErrServicesNotSynced
	}
	byName := map[string]*v1.Service{}
	master, err := s.List(masterServiceNamespace)
	if err != nil {
		return nil, fmt.Errorf("failed to list services when setting up env vars: %w", err)
	}
	for _, svc := range master {
		if svc.Name == masterServiceName && serviceIPSet(svc) {
			byName[svc.Name] = svc
		}
	}
	if pod.Spec.EnableServiceLinks == nil || *pod.Spec.EnableServiceLinks {
		local, err := s.List(pod.Namespace)
		if err != nil {
			return nil, fmt.Errorf("failed to list services when setting up env vars: %w", err)
		}
		for _, svc := range local {
			if serviceIPSet(svc) {
				byName[svc.Name] = svc
			}
		}
	}
	names := make([]string, 0, len(byName))
	for n := range byName {
		names = append(names, n)
	}
	slices.Sort(names)
	var out []Var
	for _, n := range names {
		out = append(out, ServiceVars(byName[n])...)
	}
	return out, nil
}

func serviceIPSet(svc *v1.Service) bool {
	return svc != nil && svc.Spec.ClusterIP != "" && svc.Spec.ClusterIP != v1.ClusterIPNone
}

// ServiceVars are the variables of one Service, as the kubelet's
// envvars.FromServices: {NAME}_SERVICE_HOST, {NAME}_SERVICE_PORT (the
// first port), {NAME}_SERVICE_PORT_{PORTNAME} for each named port, and
// the Docker link variables {NAME}_PORT and, for each port,
// {NAME}_PORT_{port}_{PROTO} with its _PROTO, _PORT and _ADDR. NAME is
// the Service's name upper-cased with '-' as '_'. None for a Service
// without a cluster IP or without ports.
func ServiceVars(svc *v1.Service) []Var {
	if !serviceIPSet(svc) || len(svc.Spec.Ports) == 0 {
		return nil
	}
	prefix := envName(svc.Name)
	ip := svc.Spec.ClusterIP
	out := []Var{
		{prefix + "_SERVICE_HOST", ip},
		{prefix + "_SERVICE_PORT", strconv.Itoa(int(svc.Spec.Ports[0].Port))},
	}
	for _, p := range svc.Spec.Ports {
		if p.Name != "" {
			out = append(out, Var{prefix + "_SERVICE_PORT_" + envName(p.Name), strconv.Itoa(int(p.Port))})
		}
	}
	for i, p := range svc.Spec.Ports {
		proto := string(v1.ProtocolTCP)
		if p.Protocol != "" {
			proto = string(p.Protocol)
		}
		lower := strings.ToLower(proto)
		url := lower + "://" + net.JoinHostPort(ip, strconv.Itoa(int(p.Port)))
		if i == 0 {
			out = append(out, Var{prefix + "_PORT", url})
		}
		pp := fmt.Sprintf("%s_PORT_%d_%s", prefix, p.Port, strings.ToUpper(proto))
		out = append(out,
			Var{pp, url},
			Var{pp + "_PROTO", lower},
			Var{pp + "_PORT", strconv.Itoa(int(p.Port))},
			Var{pp + "_ADDR", ip},
		)
	}
	return out
}

func envName(s string) string { return strings.ToUpper(strings.ReplaceAll(s, "-", "_")) }
