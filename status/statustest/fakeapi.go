// Package statustest has a fake API server for the tests of code that
// writes pods to it, such as package status and package mirror.
package statustest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/strategicpatch"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/client-go/kubernetes/fake"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
	k8stesting "k8s.io/client-go/testing"
)

var (
	podsGVR  = v1.SchemeGroupVersion.WithResource("pods")
	nodesGVR = v1.SchemeGroupVersion.WithResource("nodes")
	podsGR   = podsGVR.GroupResource()
)

// FakeAPI is a client-go fake clientset that behaves, for pods and nodes,
// like the API server where the bare fake does not: objects get a UID, a
// creation time and a resource version that every write changes; a PATCH
// honours the metadata.uid (Invalid) and metadata.resourceVersion
// (Conflict) preconditions in its body, and a PATCH of the status
// subresource changes the status alone; a DELETE honours the UID
// precondition (Conflict) and, for a pod bound to a node and not
// terminal, only sets the deletion timestamp unless its grace period is 0;
// a list of pods honours the field selector spec.nodeName.
//
// Give it to nodekit's parts as clientset.From(f) (package
// kubeclient/clientset), which calls f's CoreV1.
//
// Reactors a test prepends run before these. The fake clientset runs its
// reactors under one lock, so a reactor must not block; BeforeWrite
// functions run outside it. FakeAPI is safe for concurrent use.
type FakeAPI struct {
	*fake.Clientset

	mu  sync.Mutex
	rv  int
	uid int
	// beforeWrite runs before a pod write is applied.
	beforeWrite func(k8stesting.Action)
}

// NewFakeAPI returns a FakeAPI holding objs (pods and nodes), each given a
// UID and resource version when it has none.
func NewFakeAPI(objs ...runtime.Object) *FakeAPI {
	f := &FakeAPI{Clientset: fake.NewClientset()}
	for _, o := range objs {
		switch o := o.(type) {
		case *v1.Pod:
			p := o.DeepCopy()
			f.stamp(&p.ObjectMeta)
			if err := f.Tracker().Add(p); err != nil {
				panic(fmt.Sprintf("statustest: adding pod: %v", err))
			}
		case *v1.Node:
			n := o.DeepCopy()
			f.stamp(&n.ObjectMeta)
			if err := f.Tracker().Add(n); err != nil {
				panic(fmt.Sprintf("statustest: adding node: %v", err))
			}
		default:
			if err := f.Tracker().Add(o); err != nil {
				panic(fmt.Sprintf("statustest: adding object: %v", err))
			}
		}
	}
	f.PrependReactor("create", "pods", f.createPod)
	f.PrependReactor("create", "nodes", f.createNode)
	f.PrependReactor("patch", "pods", f.patchPod)
	f.PrependReactor("delete", "pods", f.deletePod)
	f.PrependReactor("list", "pods", f.listPods)
	return f
}

// BeforeWrite sets a function called before each create, patch or delete
// of a pod through CoreV1 is applied (outside the fake's lock): a test
// blocks in it to hold a request in flight while others proceed.
func (f *FakeAPI) BeforeWrite(fn func(k8stesting.Action)) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.beforeWrite = fn
}

// Pod returns the stored pod, or nil.
func (f *FakeAPI) Pod(namespace, name string) *v1.Pod {
	o, err := f.Tracker().Get(podsGVR, namespace, name)
	if err != nil {
		return nil
	}
	return o.(*v1.Pod)
}

// PodActions returns the recorded actions on pods with the verb ("get",
// "patch", "delete", "create", "list"; "" for all).
func (f *FakeAPI) PodActions(verb string) []k8stesting.Action {
	var out []k8stesting.Action
	for _, a := range f.Actions() {
		if a.GetResource() == podsGVR && (verb == "" || a.GetVerb() == verb) {
			out = append(out, a)
		}
	}
	return out
}

// stamp gives meta a UID, creation time and resource version it lacks.
// Called with mu held or before the reactors are installed.
func (f *FakeAPI) stamp(meta *metav1.ObjectMeta) {
	if meta.UID == "" {
		f.uid++
		meta.UID = types.UID("uid-" + strconv.Itoa(f.uid))
	}
	if meta.CreationTimestamp.IsZero() {
		meta.CreationTimestamp = metav1.Now()
	}
	f.rv++
	meta.ResourceVersion = strconv.Itoa(f.rv)
}

func (f *FakeAPI) hook(a k8stesting.Action) {
	f.mu.Lock()
	fn := f.beforeWrite
	f.mu.Unlock()
	if fn != nil {
		fn(a)
	}
}

// CoreV1 returns the fake's client, whose pod writes call the BeforeWrite
// function first.
func (f *FakeAPI) CoreV1() corev1client.CoreV1Interface {
	return coreV1{CoreV1Interface: f.Clientset.CoreV1(), f: f}
}

type coreV1 struct {
	corev1client.CoreV1Interface
	f *FakeAPI
}

func (c coreV1) Pods(namespace string) corev1client.PodInterface {
	return pods{PodInterface: c.CoreV1Interface.Pods(namespace), f: c.f, ns: namespace}
}

type pods struct {
	corev1client.PodInterface
	f  *FakeAPI
	ns string
}

func (p pods) Create(ctx context.Context, pod *v1.Pod, opts metav1.CreateOptions) (*v1.Pod, error) {
	p.f.hook(k8stesting.NewCreateAction(podsGVR, p.ns, pod))
	return p.PodInterface.Create(ctx, pod, opts)
}

func (p pods) Patch(ctx context.Context, name string, pt types.PatchType, data []byte, opts metav1.PatchOptions, subresources ...string) (*v1.Pod, error) {
	p.f.hook(k8stesting.NewPatchSubresourceAction(podsGVR, p.ns, name, pt, data, subresources...))
	return p.PodInterface.Patch(ctx, name, pt, data, opts, subresources...)
}

func (p pods) Delete(ctx context.Context, name string, opts metav1.DeleteOptions) error {
	p.f.hook(k8stesting.NewDeleteActionWithOptions(podsGVR, p.ns, name, opts))
	return p.PodInterface.Delete(ctx, name, opts)
}

func (f *FakeAPI) createPod(a k8stesting.Action) (bool, runtime.Object, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	p := a.(k8stesting.CreateAction).GetObject().(*v1.Pod).DeepCopy()
	if p.Namespace == "" {
		p.Namespace = a.GetNamespace()
	}
	if _, err := f.Tracker().Get(podsGVR, p.Namespace, p.Name); err == nil {
		return true, nil, apierrors.NewAlreadyExists(podsGR, p.Name)
	}
	p.UID, p.ResourceVersion = "", ""
	f.stamp(&p.ObjectMeta)
	p.Status = v1.PodStatus{Phase: v1.PodPending}
	if err := f.Tracker().Create(podsGVR, p, p.Namespace); err != nil {
		return true, nil, err
	}
	return true, p.DeepCopy(), nil
}

func (f *FakeAPI) createNode(a k8stesting.Action) (bool, runtime.Object, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	n := a.(k8stesting.CreateAction).GetObject().(*v1.Node).DeepCopy()
	if _, err := f.Tracker().Get(nodesGVR, "", n.Name); err == nil {
		return true, nil, apierrors.NewAlreadyExists(nodesGVR.GroupResource(), n.Name)
	}
	n.UID, n.ResourceVersion = "", ""
	f.stamp(&n.ObjectMeta)
	if err := f.Tracker().Create(nodesGVR, n, ""); err != nil {
		return true, nil, err
	}
	return true, n.DeepCopy(), nil
}

func (f *FakeAPI) patchPod(a k8stesting.Action) (bool, runtime.Object, error) {
	pa := a.(k8stesting.PatchAction)
	f.mu.Lock()
	defer f.mu.Unlock()
	o, err := f.Tracker().Get(podsGVR, pa.GetNamespace(), pa.GetName())
	if err != nil {
		return true, nil, err
	}
	cur := o.(*v1.Pod)
	var pre struct {
		Metadata struct {
			UID             types.UID `json:"uid"`
			ResourceVersion string    `json:"resourceVersion"`
		} `json:"metadata"`
	}
	if err := json.Unmarshal(pa.GetPatch(), &pre); err != nil {
		return true, nil, apierrors.NewBadRequest(err.Error())
	}
	if pre.Metadata.UID != "" && pre.Metadata.UID != cur.UID {
		return true, nil, apierrors.NewInvalid(v1.SchemeGroupVersion.WithKind("Pod").GroupKind(), cur.Name,
			field.ErrorList{field.Invalid(field.NewPath("metadata", "uid"), pre.Metadata.UID, "field is immutable")})
	}
	if pre.Metadata.ResourceVersion != "" && pre.Metadata.ResourceVersion != cur.ResourceVersion {
		return true, nil, apierrors.NewConflict(podsGR, cur.Name, errors.New("the object has been modified; please apply your changes to the latest version and try again"))
	}
	if pa.GetPatchType() != types.StrategicMergePatchType {
		return true, nil, apierrors.NewBadRequest("statustest: only strategic merge patches are supported")
	}
	curJSON, err := json.Marshal(cur)
	if err != nil {
		return true, nil, err
	}
	merged, err := strategicpatch.StrategicMergePatch(curJSON, pa.GetPatch(), v1.Pod{})
	if err != nil {
		return true, nil, apierrors.NewBadRequest(err.Error())
	}
	var patched v1.Pod
	if err := json.Unmarshal(merged, &patched); err != nil {
		return true, nil, apierrors.NewBadRequest(err.Error())
	}
	out := cur.DeepCopy()
	if pa.GetSubresource() == "status" {
		out.Status = patched.Status
	} else {
		out.Labels, out.Annotations, out.Spec = patched.Labels, patched.Annotations, patched.Spec
	}
	f.rv++
	out.ResourceVersion = strconv.Itoa(f.rv)
	if err := f.Tracker().Update(podsGVR, out, out.Namespace); err != nil {
		return true, nil, err
	}
	return true, out.DeepCopy(), nil
}

func (f *FakeAPI) deletePod(a k8stesting.Action) (bool, runtime.Object, error) {
	da := a.(k8stesting.DeleteAction)
	f.mu.Lock()
	defer f.mu.Unlock()
	o, err := f.Tracker().Get(podsGVR, da.GetNamespace(), da.GetName())
	if err != nil {
		return true, nil, err
	}
	cur := o.(*v1.Pod)
	opts := da.GetDeleteOptions()
	if opts.Preconditions != nil && opts.Preconditions.UID != nil && *opts.Preconditions.UID != cur.UID {
		return true, nil, apierrors.NewConflict(podsGR, cur.Name, fmt.Errorf("the UID in the precondition (%s) does not match the UID in record (%s)", *opts.Preconditions.UID, cur.UID))
	}
	grace := int64(30)
	if cur.Spec.TerminationGracePeriodSeconds != nil {
		grace = *cur.Spec.TerminationGracePeriodSeconds
	}
	if opts.GracePeriodSeconds != nil {
		grace = *opts.GracePeriodSeconds
	}
	terminal := cur.Status.Phase == v1.PodSucceeded || cur.Status.Phase == v1.PodFailed
	if grace == 0 || cur.Spec.NodeName == "" || terminal {
		return true, nil, f.Tracker().Delete(podsGVR, cur.Namespace, cur.Name)
	}
	if cur.DeletionTimestamp != nil {
		return true, cur.DeepCopy(), nil
	}
	out := cur.DeepCopy()
	ts := metav1.NewTime(time.Now().Add(time.Duration(grace) * time.Second))
	out.DeletionTimestamp, out.DeletionGracePeriodSeconds = &ts, &grace
	f.rv++
	out.ResourceVersion = strconv.Itoa(f.rv)
	if err := f.Tracker().Update(podsGVR, out, out.Namespace); err != nil {
		return true, nil, err
	}
	return true, out.DeepCopy(), nil
}

func (f *FakeAPI) listPods(a k8stesting.Action) (bool, runtime.Object, error) {
	la := a.(k8stesting.ListAction)
	o, err := f.Tracker().List(podsGVR, v1.SchemeGroupVersion.WithKind("Pod"), a.GetNamespace())
	if err != nil {
		return true, nil, err
	}
	list := o.(*v1.PodList)
	r := la.GetListRestrictions()
	if r.Fields == nil || r.Fields.Empty() {
		return true, list, nil
	}
	out := &v1.PodList{ListMeta: list.ListMeta}
	for _, p := range list.Items {
		if r.Fields.Matches(fields.Set{"spec.nodeName": p.Spec.NodeName, "metadata.name": p.Name, "metadata.namespace": p.Namespace}) {
			out.Items = append(out.Items, p)
		}
	}
	return true, out, nil
}
