// Package manifest decodes pod manifests, YAML or JSON, for the static pod
// sources. Its errors carry no package prefix: the sources wrap them with
// their own and the manifest's origin.
package manifest

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"
)

// Errors Decode returns for the shape of the input, to be told apart with
// errors.Is.
var (
	// ErrEmpty: the input holds no object (only blanks, comments or null).
	ErrEmpty = errors.New("no object")
	// ErrMultipleDocuments: the input holds more than one YAML document
	// that is not empty.
	ErrMultipleDocuments = errors.New("more than one document")
)

// Kinds Decode accepts.
const (
	KindPod     = "Pod"
	KindPodList = "PodList"
)

// Decode decodes one object, a Pod or a PodList, from YAML or JSON. The kind
// field decides (a missing kind means Pod); apiVersion, when present, must
// be v1. Empty YAML documents (a leading or trailing "---") are ignored; a
// second document that is not empty is ErrMultipleDocuments. Unknown fields
// are ignored, as the API server's decoder does.
//
// It returns the pods (with their TypeMeta cleared, so that they hash the
// same whether the manifest spelled out the kind or not) and the kind.
func Decode(data []byte) (pods []*v1.Pod, kind string, err error) {
	doc, err := single(data)
	if err != nil {
		return nil, "", err
	}
	var tm struct {
		APIVersion string `json:"apiVersion"`
		Kind       string `json:"kind"`
	}
	if err := yaml.Unmarshal(doc, &tm); err != nil {
		return nil, "", fmt.Errorf("not an object: %w", err)
	}
	if tm.APIVersion != "" && tm.APIVersion != "v1" {
		return nil, "", fmt.Errorf("apiVersion %q is not v1", tm.APIVersion)
	}
	switch tm.Kind {
	case "", KindPod:
		pod := new(v1.Pod)
		if err := yaml.Unmarshal(doc, pod); err != nil {
			return nil, "", fmt.Errorf("cannot decode pod: %w", err)
		}
		pod.TypeMeta = metav1.TypeMeta{}
		return []*v1.Pod{pod}, KindPod, nil
	case KindPodList:
		var list v1.PodList
		if err := yaml.Unmarshal(doc, &list); err != nil {
			return nil, "", fmt.Errorf("cannot decode pod list: %w", err)
		}
		pods := make([]*v1.Pod, len(list.Items))
		for i := range list.Items {
			pods[i] = &list.Items[i]
			pods[i].TypeMeta = metav1.TypeMeta{}
		}
		return pods, KindPodList, nil
	default:
		return nil, "", fmt.Errorf("kind %q is not Pod or PodList", tm.Kind)
	}
}

// single returns the one non-empty YAML document data holds.
func single(data []byte) ([]byte, error) {
	r := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(data)))
	var found []byte
	for {
		doc, err := r.Read()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, err
		}
		j, err := yaml.YAMLToJSON(doc)
		if err != nil {
			return nil, fmt.Errorf("not YAML or JSON: %w", err)
		}
		if string(bytes.TrimSpace(j)) == "null" {
			continue
		}
		if found != nil {
			return nil, ErrMultipleDocuments
		}
		found = doc
	}
	if found == nil {
		return nil, ErrEmpty
	}
	return found, nil
}
