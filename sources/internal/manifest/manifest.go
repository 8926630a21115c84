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
	return decodeDoc(doc)
}

// DecodeFirst is Decode of the first YAML document that is not empty, as
// the kubelet's file source reads a manifest (its YAML-to-JSON conversion
// keeps the first document): the later documents are not decoded, and
// ignored counts those that are not empty, for the caller to report.
func DecodeFirst(data []byte) (pods []*v1.Pod, kind string, ignored int, err error) {
	docs, err := documents(data, 0)
	if err != nil {
		return nil, "", 0, err
	}
	if len(docs) == 0 {
		return nil, "", 0, ErrEmpty
	}
	pods, kind, err = decodeDoc(docs[0])
	return pods, kind, len(docs) - 1, err
}

// decodeDoc decodes one document, a Pod or a PodList.
func decodeDoc(doc []byte) (pods []*v1.Pod, kind string, err error) {
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
	docs, err := documents(data, 2)
	switch {
	case err != nil:
		return nil, err
	case len(docs) == 0:
		return nil, ErrEmpty
	case len(docs) > 1:
		return nil, ErrMultipleDocuments
	}
	return docs[0], nil
}

// documents returns the YAML documents of data that are not empty (only
// blanks, comments or null), the first max of them when max > 0.
func documents(data []byte, max int) ([][]byte, error) {
	r := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(data)))
	var docs [][]byte
	for max <= 0 || len(docs) < max {
		doc, err := r.Read()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, err
		}
		j, err := yaml.YAMLToJSON(doc)
		if err != nil {
			if len(docs) > 0 {
				// A later document that is not YAML is still one the
				// caller ignores.
				docs = append(docs, doc)
				continue
			}
			return nil, fmt.Errorf("not YAML or JSON: %w", err)
		}
		if string(bytes.TrimSpace(j)) == "null" {
			continue
		}
		docs = append(docs, doc)
	}
	return docs, nil
}
