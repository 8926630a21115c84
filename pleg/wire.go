package pleg

import (
	"errors"
	"fmt"
	"math"
	"unicode/utf8"

	"google.golang.org/protobuf/encoding/protowire"
	"k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodekit/nodekit/runtime"
)

// The field numbers a relist reads in runtime.v1.ListPodSandboxResponse
// and runtime.v1.ListContainersResponse (k8s.io/cri-api api.proto).
const (
	fieldItems = 1 // ListPodSandboxResponse.items, ListContainersResponse.containers
	fieldID    = 1 // PodSandbox.id, Container.id

	fieldSandboxMetadata = 2 // PodSandbox.metadata
	fieldSandboxState    = 3 // PodSandbox.state
	fieldSandboxLabels   = 5 // PodSandbox.labels

	fieldContainerState  = 6 // Container.state
	fieldContainerLabels = 8 // Container.labels

	fieldMetadataName      = 1 // PodSandboxMetadata.name
	fieldMetadataUID       = 2 // PodSandboxMetadata.uid
	fieldMetadataNamespace = 3 // PodSandboxMetadata.namespace

	fieldMapKey   = 1 // a map entry's key
	fieldMapValue = 2 // a map entry's value
)

// wireItem is a sandbox or container of a list answer in wire form: where
// its message and its ID are in the answer, and its state (the CRI enum's
// number).
type wireItem struct {
	msg, id span
	state   int32
}

// span is a range of an answer's bytes.
type span struct{ off, end int32 }

func (s span) of(b []byte) []byte { return b[s.off:s.end] }

// errMalformed is the class of list answers that are not valid protobuf.
var errMalformed = errors.New("malformed answer")

// splitList parses a list answer (a message whose field 1 repeats the
// sandboxes or containers) down to each item's ID and state, stateField
// being the state's field number, and appends the items to items. It
// decodes no label, annotation or other field: a relist reads those of
// the items it does not know yet (wireIdentity). As the protobuf decoder
// does, it takes the last value of a field that occurs more than once,
// and leaves fields of unexpected wire types aside as unknown ones. The
// IDs must be valid UTF-8, as for decoded strings.
func splitList(b []byte, stateField protowire.Number, items []wireItem) ([]wireItem, error) {
	if len(b) > math.MaxInt32 {
		return items, fmt.Errorf("%w: %d bytes", errMalformed, len(b))
	}
	for off := 0; off < len(b); {
		num, typ, n := protowire.ConsumeTag(b[off:])
		if n < 0 {
			return items, fmt.Errorf("%w: %v", errMalformed, protowire.ParseError(n))
		}
		off += n
		if num != fieldItems || typ != protowire.BytesType {
			n = protowire.ConsumeFieldValue(num, typ, b[off:])
			if n < 0 {
				return items, fmt.Errorf("%w: %v", errMalformed, protowire.ParseError(n))
			}
			off += n
			continue
		}
		v, n := protowire.ConsumeBytes(b[off:])
		if n < 0 {
			return items, fmt.Errorf("%w: %v", errMalformed, protowire.ParseError(n))
		}
		start := off + n - len(v)
		item, err := splitItem(v, start, stateField)
		if err != nil {
			return items, err
		}
		items = append(items, item)
		off += n
	}
	return items, nil
}

// splitItem finds the ID and state of the item message m, which starts at
// offset base of the answer.
func splitItem(m []byte, base int, stateField protowire.Number) (wireItem, error) {
	item := wireItem{msg: span{int32(base), int32(base + len(m))}}
	for off := 0; off < len(m); {
		num, typ, n := protowire.ConsumeTag(m[off:])
		if n < 0 {
			return item, fmt.Errorf("%w: %v", errMalformed, protowire.ParseError(n))
		}
		off += n
		switch {
		case num == fieldID && typ == protowire.BytesType:
			v, n := protowire.ConsumeBytes(m[off:])
			if n < 0 {
				return item, fmt.Errorf("%w: %v", errMalformed, protowire.ParseError(n))
			}
			if !utf8.Valid(v) {
				return item, fmt.Errorf("%w: an ID is not valid UTF-8", errMalformed)
			}
			start := base + off + n - len(v)
			item.id = span{int32(start), int32(start + len(v))}
			off += n
		case num == stateField && typ == protowire.VarintType:
			v, n := protowire.ConsumeVarint(m[off:])
			if n < 0 {
				return item, fmt.Errorf("%w: %v", errMalformed, protowire.ParseError(n))
			}
			item.state = int32(v)
			off += n
		default:
			n = protowire.ConsumeFieldValue(num, typ, m[off:])
			if n < 0 {
				return item, fmt.Errorf("%w: %v", errMalformed, protowire.ParseError(n))
			}
			off += n
		}
	}
	return item, nil
}

// podIdentity is what a relist records of the pod of a sandbox or
// container it has not seen before.
type podIdentity struct {
	uid, name, namespace string
}

// sandboxIdentity reads the pod of sandbox message m as a relist of
// decoded messages does: the runtime.LabelPodUID label, or the metadata's
// UID without it; the name and namespace from the metadata.
func sandboxIdentity(m []byte) (podIdentity, error) {
	uid, err := wireLabel(m, fieldSandboxLabels, runtime.LabelPodUID)
	if err != nil {
		return podIdentity{}, err
	}
	var name, ns, mdUID []byte
	err = forEachField(m, func(num protowire.Number, typ protowire.Type, v []byte) error {
		if num != fieldSandboxMetadata || typ != protowire.BytesType {
			return nil
		}
		// Occurrences of a message field merge: the last value of each
		// of its fields wins.
		return forEachField(v, func(num protowire.Number, typ protowire.Type, v []byte) error {
			if typ != protowire.BytesType {
				return nil
			}
			switch num {
			case fieldMetadataName:
				name = v
			case fieldMetadataUID:
				mdUID = v
			case fieldMetadataNamespace:
				ns = v
			}
			return nil
		})
	})
	if err != nil {
		return podIdentity{}, err
	}
	if len(uid) == 0 {
		uid = mdUID
	}
	return identityOf(uid, name, ns)
}

// containerIdentity reads the pod of container message m from its
// runtime.LabelPodUID, LabelPodName and LabelPodNamespace labels.
func containerIdentity(m []byte) (podIdentity, error) {
	uid, err := wireLabel(m, fieldContainerLabels, runtime.LabelPodUID)
	if err != nil || len(uid) == 0 {
		return podIdentity{}, err
	}
	name, err := wireLabel(m, fieldContainerLabels, runtime.LabelPodName)
	if err != nil {
		return podIdentity{}, err
	}
	ns, err := wireLabel(m, fieldContainerLabels, runtime.LabelPodNamespace)
	if err != nil {
		return podIdentity{}, err
	}
	return identityOf(uid, name, ns)
}

func identityOf(uid, name, ns []byte) (podIdentity, error) {
	for _, s := range [][]byte{uid, name, ns} {
		if !utf8.Valid(s) {
			return podIdentity{}, fmt.Errorf("%w: a pod label or metadata is not valid UTF-8", errMalformed)
		}
	}
	return podIdentity{uid: string(uid), name: string(name), namespace: string(ns)}, nil
}

// wireLabel returns the value of label key in the map field of message m:
// the last entry of that key wins, as in a decoded map; nil when there is
// none.
func wireLabel(m []byte, field protowire.Number, key string) ([]byte, error) {
	var value []byte
	err := forEachField(m, func(num protowire.Number, typ protowire.Type, entry []byte) error {
		if num != field || typ != protowire.BytesType {
			return nil
		}
		var k, v []byte
		err := forEachField(entry, func(num protowire.Number, typ protowire.Type, b []byte) error {
			if typ != protowire.BytesType {
				return nil
			}
			switch num {
			case fieldMapKey:
				k = b
			case fieldMapValue:
				v = b
			}
			return nil
		})
		if err != nil {
			return err
		}
		if string(k) == key {
			value = v
			if value == nil {
				value = []byte{}
			}
		}
		return nil
	})
	return value, err
}

// forEachField calls f with every field of message m, and the contents of
// the length-delimited ones (nil for the others).
func forEachField(m []byte, f func(num protowire.Number, typ protowire.Type, v []byte) error) error {
	for off := 0; off < len(m); {
		num, typ, n := protowire.ConsumeTag(m[off:])
		if n < 0 {
			return fmt.Errorf("%w: %v", errMalformed, protowire.ParseError(n))
		}
		off += n
		var v []byte
		if typ == protowire.BytesType {
			v, n = protowire.ConsumeBytes(m[off:])
		} else {
			n = protowire.ConsumeFieldValue(num, typ, m[off:])
		}
		if n < 0 {
			return fmt.Errorf("%w: %v", errMalformed, protowire.ParseError(n))
		}
		off += n
		if err := f(num, typ, v); err != nil {
			return err
		}
	}
	return nil
}

// foldWire folds the sandboxes and containers of two list answers in wire
// form, split into items, into the tracker, between begin and end, as diff
// does with decoded ones; only the items it does not know yet have their
// labels and metadata read. On error (a malformed label or metadata) the
// caller aborts the listing.
func (t *tracker) foldWire(sb []byte, sandboxes []wireItem, cs []byte, containers []wireItem) error {
	for _, it := range sandboxes {
		state := sandboxState(runtimeapi.PodSandboxState(it.state))
		id := it.id.of(sb)
		if rec := t.ctrs[string(id)]; rec != nil {
			t.observe(rec, state)
			continue
		}
		pod, err := sandboxIdentity(it.msg.of(sb))
		if err != nil {
			return err
		}
		if pod.uid == "" {
			continue
		}
		t.observe(t.newRecord(string(id), types.UID(pod.uid), pod.name, pod.namespace), state)
	}
	for _, it := range containers {
		state := containerState(runtimeapi.ContainerState(it.state))
		id := it.id.of(cs)
		if rec := t.ctrs[string(id)]; rec != nil {
			t.observe(rec, state)
			continue
		}
		pod, err := containerIdentity(it.msg.of(cs))
		if err != nil {
			return err
		}
		if pod.uid == "" {
			continue
		}
		t.observe(t.newRecord(string(id), types.UID(pod.uid), pod.name, pod.namespace), state)
	}
	return nil
}
