package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodekit/nodekit"
)

// pullSecretPod is a pod of the private image with the given
// imagePullSecrets (a YAML flow list).
const pullSecretPod = `apiVersion: v1
kind: Pod
metadata:
  name: $NAME
  namespace: $NS
spec:
  terminationGracePeriodSeconds: 2
  imagePullSecrets: $SECRETS
  containers:
  - name: main
    image: $IMAGE
    imagePullPolicy: IfNotPresent
    command: ["sh", "-c", "trap 'exit 0' TERM; while true; do sleep 1 & wait; done"]
`

// TestPullSecrets: on containerd 1.6 and 2.x, a pod of an image of a
// private registry on loopback (hack/registry.sh, htpasswd login) fails
// with ErrImagePull and the registry's refusal (its 401; without a login
// containerd 2.x says "no basic auth credentials" instead), and runs
// with a kubernetes.io/dockerconfigjson Secret.
// Once the image is on the node, a new pod without the Secret is not
// given it: it pulls with its own (no) credentials and fails again, as
// with the kubelet's default image pull credential verification.
func TestPullSecrets(t *testing.T) {
	reg := startRegistry(t)
	for _, tc := range []struct {
		version, endpointVar string
		// noLogin is what this containerd says of a registry that
		// wants a login it was not given: 1.6 passes on the registry's
		// 401, 2.x does not send the request again and says why.
		noLogin string
	}{
		{"1.6", envEndpoint, "401 Unauthorized"},
		{"2", envEndpoint2, "authorization failed: no basic auth credentials"},
	} {
		t.Run("containerd-"+tc.version, func(t *testing.T) {
			f := newFixture(t, tc.endpointVar)
			image := reg.pushPrivate(t, f, "nodekit-e2e/private")
			objs := &mapObjects{secrets: map[string]*v1.Secret{}}
			for name, password := range map[string]string{"regcred": reg.password, "wrongcred": "not-the-password"} {
				objs.secrets[f.ns+"/"+name] = &v1.Secret{
					ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: name, UID: types.UID("uid-" + name)},
					Type:       v1.SecretTypeDockerConfigJson,
					Data:       map[string][]byte{v1.DockerConfigJsonKey: reg.dockerConfigJSON(reg.user, password)},
				}
			}
			a := f.agentWith(nil, "pullsecrets", func(o *nodekit.Options) { o.Objects = objs.getter() })
			write := func(name, secrets string) {
				r := strings.NewReplacer("$NAME", name, "$NS", f.ns, "$SECRETS", secrets, "$IMAGE", image)
				writeManifest(t, f.dir, name+".yaml", r.Replace(pullSecretPod))
			}
			// refused waits for the pod's container to wait with
			// ErrImagePull and the registry's refusal in its message.
			refused := func(name, why string) {
				t.Helper()
				pod := f.pod(name)
				var last string
				eventually(t, 90*time.Second, pod+" waiting with ErrImagePull and "+why, func() bool {
					s, ok := a.status(pod)
					if !ok || len(s.ContainerStatuses) == 0 || s.ContainerStatuses[0].State.Waiting == nil {
						return false
					}
					w := s.ContainerStatuses[0].State.Waiting
					last = w.Reason + ": " + w.Message
					return w.Reason == "ErrImagePull" && strings.Contains(w.Message, why) &&
						strings.HasPrefix(w.Message, fmt.Sprintf("Failed to pull image %q: ", image))
				})
				t.Logf("%s: %s", name, last)
			}
			write("noauth", "[]")
			write("wrongauth", "[{name: wrongcred}, {name: missing}]")
			write("authed", "[{name: regcred}]")
			refused("noauth", tc.noLogin)
			refused("wrongauth", "401 Unauthorized")
			eventually(t, 90*time.Second, f.pod("authed")+" Running", func() bool { return a.running(f.pod("authed")) })

			// The image is on the node now; a pod without the Secret is
			// still refused.
			write("late", "[]")
			refused("late", tc.noLogin)
			if !a.running(f.pod("authed")) {
				t.Errorf("%s stopped running", f.pod("authed"))
			}
			ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
			defer cancel()
			st, err := f.cri.ImageStatus(ctx, &runtimeapi.ImageSpec{Image: image}, false)
			if err != nil || st.GetImage() == nil {
				t.Errorf("ImageStatus(%s) = %v, %v; want the image present", image, st, err)
			}
		})
	}
}
