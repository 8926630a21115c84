package podmodel

import (
	"fmt"
	"strconv"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// ContainerPort is the number of a port that a probe or a lifecycle hook
// names: a number, the name of one of the container's ports, or a number
// written as a string. It must be in 1..65535.
func ContainerPort(port intstr.IntOrString, c *v1.Container) (int, error) {
	n := -1
	switch port.Type {
	case intstr.Int:
		n = int(port.IntVal)
	case intstr.String:
		found := false
		if c != nil {
			for _, p := range c.Ports {
				if p.Name == port.StrVal {
					n, found = int(p.ContainerPort), true
					break
				}
			}
		}
		if !found {
			v, err := strconv.Atoi(port.StrVal)
			if err != nil {
				return -1, fmt.Errorf("port %q is neither a port name of the container nor a number", port.StrVal)
			}
			n = v
		}
	default:
		return -1, fmt.Errorf("port of unknown kind %d", port.Type)
	}
	if n <= 0 || n >= 65536 {
		return n, fmt.Errorf("invalid port number %d", n)
	}
	return n, nil
}
