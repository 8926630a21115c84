package pleg

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"testing/synctest"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodekit/nodekit/runtime"
	"github.com/nodekit/nodekit/runtime/runtimetest"
)

// wireItemOf is what a relist reads of a listed item, decoded or in wire
// form.
type wireItemOf struct {
	ID       string
	State    int32
	Identity podIdentity
}

// decodedItems is what a relist reads of decoded listings.
func decodedItems(sandboxes []*runtimeapi.PodSandbox, containers []*runtimeapi.Container) (sb, cs []wireItemOf) {
	for _, s := range sandboxes {
		uid := s.GetLabels()[runtime.LabelPodUID]
		if uid == "" {
			uid = s.GetMetadata().GetUid()
		}
		sb = append(sb, wireItemOf{s.GetId(), int32(s.GetState()), podIdentity{uid, s.GetMetadata().GetName(), s.GetMetadata().GetNamespace()}})
	}
	for _, c := range containers {
		l := c.GetLabels()
		cs = append(cs, wireItemOf{c.GetId(), int32(c.GetState()), podIdentity{l[runtime.LabelPodUID], l[runtime.LabelPodName], l[runtime.LabelPodNamespace]}})
	}
	return sb, cs
}

// wireItems is what a relist reads of listings in wire form.
func wireItems(sb, cs []byte) (sbOut, csOut []wireItemOf, err error) {
	sbItems, err := splitList(sb, fieldSandboxState, nil)
	if err != nil {
		return nil, nil, err
	}
	csItems, err := splitList(cs, fieldContainerState, nil)
	if err != nil {
		return nil, nil, err
	}
	for _, it := range sbItems {
		id, err := sandboxIdentity(it.msg.of(sb))
		if err != nil {
			return nil, nil, err
		}
		sbOut = append(sbOut, wireItemOf{string(it.id.of(sb)), it.state, id})
	}
	for _, it := range csItems {
		id, err := containerIdentity(it.msg.of(cs))
		if err != nil {
			return nil, nil, err
		}
		if id.uid == "" {
			id = podIdentity{}
		}
		csOut = append(csOut, wireItemOf{string(it.id.of(cs)), it.state, id})
	}
	return sbOut, csOut, nil
}

// appendField appends field num of wire type typ with contents v (a
// varint for VarintType) to b.
func appendField(b []byte, num protowire.Number, v any) []byte {
	switch v := v.(type) {
	case uint64:
		b = protowire.AppendTag(b, num, protowire.VarintType)
		return protowire.AppendVarint(b, v)
	case string:
		b = protowire.AppendTag(b, num, protowire.BytesType)
		return protowire.AppendString(b, v)
	case []byte:
		b = protowire.AppendTag(b, num, protowire.BytesType)
		return protowire.AppendBytes(b, v)
	case uint32: // a fixed32
		b = protowire.AppendTag(b, num, protowire.Fixed32Type)
		return protowire.AppendFixed32(b, v)
	}
	panic(fmt.Sprintf("appendField: %T", v))
}

func entry(k, v string) []byte { return appendField(appendField(nil, 1, k), 2, v) }

// wireCases are list answers in wire form, with what the protobuf
// decoder makes of them; each exercises a rule of the encoding.
func wireCases() map[string][2][]byte {
	full := func(id string, state uint64) []byte {
		var m []byte
		m = appendField(m, fieldID, id)
		m = appendField(m, fieldSandboxMetadata, appendField(appendField(appendField(appendField(nil, 1, "name-"+id), 2, "md-uid-"+id), 3, "ns"), 4, uint64(3)))
		m = appendField(m, fieldSandboxState, state)
		m = appendField(m, 4, uint64(1234567890))
		m = appendField(m, fieldSandboxLabels, entry("a", "b"))
		m = appendField(m, fieldSandboxLabels, entry(runtime.LabelPodUID, "uid-"+id))
		m = appendField(m, 6, entry("annotation", "x"))
		m = appendField(m, 7, "runc")
		return m
	}
	cases := map[string][2][]byte{}
	add := func(name string, sandboxes [][]byte, containers [][]byte) {
		var sb, cs []byte
		for _, m := range sandboxes {
			sb = appendField(sb, fieldItems, m)
		}
		for _, m := range containers {
			cs = appendField(cs, fieldItems, m)
		}
		cases[name] = [2][]byte{sb, cs}
	}
	add("empty", nil, nil)
	add("full", [][]byte{full("s1", 0), full("s2", 1)}, nil)
	// A field that occurs twice: the last value wins.
	add("repeated scalars", [][]byte{append(full("s1", 0), appendField(appendField(nil, fieldID, "s1-last"), fieldSandboxState, uint64(1))...)}, nil)
	// Two occurrences of the metadata merge field by field.
	add("metadata merged", [][]byte{append(full("s1", 0), appendField(nil, fieldSandboxMetadata, appendField(nil, 3, "ns-last"))...)}, nil)
	// Two entries of one key: the last wins.
	add("label twice", [][]byte{append(full("s1", 0), appendField(nil, fieldSandboxLabels, entry(runtime.LabelPodUID, "uid-last"))...)}, nil)
	// No uid label: the metadata's uid.
	add("metadata uid", [][]byte{appendField(appendField(nil, fieldID, "s1"), fieldSandboxMetadata, appendField(nil, 2, "md-uid"))}, nil)
	// A field of the wrong wire type is an unknown field.
	add("wrong wire types", [][]byte{append(full("s1", 1), appendField(appendField(nil, fieldID, uint64(7)), fieldSandboxState, "x")...)}, nil)
	// Unknown fields, at each level.
	add("unknown fields", [][]byte{append(full("s1", 1), appendField(appendField(nil, 99, "x"), 100, uint32(5))...)}, nil)
	// Containers: labels, enum values this version does not know, a
	// map entry without key or value, fields in any order.
	ctr := func(id string, state uint64, labels ...[]byte) []byte {
		var m []byte
		for _, l := range labels {
			m = appendField(m, fieldContainerLabels, l)
		}
		m = appendField(m, fieldContainerState, state)
		m = appendField(m, 3, appendField(nil, 1, "app"))
		m = appendField(m, 9, entry(runtime.LabelPodUID, "not-a-label"))
		return appendField(m, fieldID, id)
	}
	add("containers", nil, [][]byte{
		ctr("c1", 1, entry(runtime.LabelPodUID, "u1"), entry(runtime.LabelPodName, "n1"), entry(runtime.LabelPodNamespace, "ns1")),
		ctr("c2", 42, entry(runtime.LabelPodUID, "u2"), appendField(nil, 2, "no key"), appendField(nil, 1, runtime.LabelPodName)),
		ctr("c3", 2),
	})
	// Wire data after the items.
	c := cases["full"]
	cases["trailing unknown"] = [2][]byte{appendField(c[0], 2, uint64(1)), nil}
	return cases
}

// TestWireMatchesDecoded: a relist reads the same IDs, states and pods
// from list answers in wire form as from the decoded messages.
func TestWireMatchesDecoded(t *testing.T) {
	for name, c := range wireCases() {
		t.Run(name, func(t *testing.T) {
			checkWireMatchesDecoded(t, c[0], c[1])
		})
	}
	t.Run("marshaled", func(t *testing.T) {
		sb := &runtimeapi.ListPodSandboxResponse{Items: []*runtimeapi.PodSandbox{
			listedSandbox("s1", "u1", true), listedSandbox("s2", "u2", false),
			{Id: "foreign", State: runtimeapi.PodSandboxState_SANDBOX_READY, Annotations: map[string]string{"x": "y"}},
		}}
		cs := &runtimeapi.ListContainersResponse{Containers: []*runtimeapi.Container{
			listedContainer("c1", "u1", ctrRunning), listedContainer("c2", "u2", ctrExited),
			{Id: "foreign", PodSandboxId: "s1", Labels: map[string]string{"x": "y"}, Image: &runtimeapi.ImageSpec{Image: "i"}},
		}}
		sbb, _ := proto.Marshal(sb)
		csb, _ := proto.Marshal(cs)
		checkWireMatchesDecoded(t, sbb, csb)
	})
}

func checkWireMatchesDecoded(t *testing.T, sb, cs []byte) {
	t.Helper()
	var sbResp runtimeapi.ListPodSandboxResponse
	var csResp runtimeapi.ListContainersResponse
	if err := proto.Unmarshal(sb, &sbResp); err != nil {
		t.Fatalf("the sandboxes' answer does not decode: %v", err)
	}
	if err := proto.Unmarshal(cs, &csResp); err != nil {
		t.Fatalf("the containers' answer does not decode: %v", err)
	}
	wantSb, wantCs := decodedItems(sbResp.Items, csResp.Containers)
	gotSb, gotCs, err := wireItems(sb, cs)
	if err != nil {
		t.Fatalf("wire form: %v", err)
	}
	for i := range wantCs {
		if wantCs[i].Identity.uid == "" {
			wantCs[i].Identity = podIdentity{}
		}
	}
	opt := cmp.AllowUnexported(podIdentity{})
	if d := cmp.Diff(wantSb, gotSb, opt, cmpopts.EquateEmpty()); d != "" {
		t.Errorf("sandboxes (-decoded +wire):\n%s", d)
	}
	if d := cmp.Diff(wantCs, gotCs, opt, cmpopts.EquateEmpty()); d != "" {
		t.Errorf("containers (-decoded +wire):\n%s", d)
	}
}

// TestWireMalformed: answers that are not valid protobuf, or whose IDs or
// pod labels are not UTF-8, give an error of the errMalformed class, as
// they fail to decode.
func TestWireMalformed(t *testing.T) {
	good := wireCases()["full"][0]
	cases := map[string][]byte{
		"truncated":        good[:len(good)-3],
		"bad tag":          append([]byte{0x80}, good...),
		"item too long":    appendField(nil, fieldItems, good)[:10],
		"id not UTF-8":     appendField(nil, fieldItems, appendField(nil, fieldID, "\xff")),
		"uid not UTF-8":    appendField(nil, fieldItems, appendField(appendField(nil, fieldID, "s"), fieldSandboxLabels, entry(runtime.LabelPodUID, "\xff"))),
		"bad label entry":  appendField(nil, fieldItems, appendField(appendField(nil, fieldID, "s"), fieldSandboxLabels, []byte{0x0a, 0x05, 'a'})),
		"bad metadata":     appendField(nil, fieldItems, appendField(appendField(nil, fieldID, "s"), fieldSandboxMetadata, []byte{0x12})),
		"group (obsolete)": appendField(nil, fieldItems, append(appendField(nil, fieldID, "s"), 0x1b)),
	}
	for name, b := range cases {
		t.Run(name, func(t *testing.T) {
			if err := proto.Unmarshal(b, &runtimeapi.ListPodSandboxResponse{}); err == nil {
				t.Fatal("the case decodes: it is not malformed")
			}
			_, _, err := wireItems(b, nil)
			if !errors.Is(err, errMalformed) {
				t.Errorf("wire form of a malformed answer: %v, want errMalformed", err)
			}
		})
	}
}

// FuzzWire: whatever the bytes, reading them in wire form does not panic;
// when the protobuf decoder takes them as both answers, the wire form
// reads the same; when the wire form refuses them, so does the decoder.
func FuzzWire(f *testing.F) {
	for _, c := range wireCases() {
		f.Add(c[0])
		f.Add(c[1])
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		_, _, err := wireItems(b, b)
		sbErr := proto.Unmarshal(b, &runtimeapi.ListPodSandboxResponse{})
		csErr := proto.Unmarshal(b, &runtimeapi.ListContainersResponse{})
		if err != nil {
			if sbErr == nil && csErr == nil {
				t.Fatalf("the wire form refuses what the decoder takes: %v", err)
			}
			return
		}
		if sbErr == nil && csErr == nil {
			checkWireMatchesDecoded(t, b, b)
		}
	})
}

// wireRuntime is a runtimetest.Runtime that is a runtime.WireLister: its
// lists marshaled, as a CRI runtime sends them. fail, when set, answers
// instead.
type wireRuntime struct {
	runtimetest.Wire
	calls atomic.Int64
	fail  func() ([]byte, error)
}

func (r *wireRuntime) ListPodSandboxWire(ctx context.Context, filter *runtimeapi.PodSandboxFilter, buf []byte) ([]byte, error) {
	r.calls.Add(1)
	if r.fail != nil {
		return r.fail()
	}
	return r.Wire.ListPodSandboxWire(ctx, filter, buf)
}

func (r *wireRuntime) ListContainersWire(ctx context.Context, filter *runtimeapi.ContainerFilter, buf []byte) ([]byte, error) {
	r.calls.Add(1)
	if r.fail != nil {
		return r.fail()
	}
	return r.Wire.ListContainersWire(ctx, filter, buf)
}

// TestRelistWire: a Generic on a runtime.WireLister lists through it and
// sends the events, and keeps the cache, that a Generic decoding the lists
// does, step by step on the same runtime; it falls back to decoded lists
// for good when the lister answers Unimplemented, and a malformed answer
// fails the relist without losing what it would have found.
func TestRelistWire(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFixture(t, nil, GenericOptions{})
		wr := &wireRuntime{Wire: runtimetest.Wire{Runtime: f.rt}}
		wcache := NewCache()
		w, err := NewGeneric(wr, runtimeStatus(f.rt), wcache, GenericOptions{})
		if err != nil {
			t.Fatal(err)
		}
		ctx := t.Context()
		relistBoth := func(step string) {
			t.Helper()
			want := f.relist()
			calls := wr.calls.Load()
			if err := w.Relist(ctx); err != nil {
				t.Fatalf("%s: wire relist: %v", step, err)
			}
			if wr.calls.Load() != calls+2 {
				t.Fatalf("%s: the wire relist made %d wire calls, want 2", step, wr.calls.Load()-calls)
			}
			got := drain(w.Events())
			if d := cmp.Diff(want, got, sortEvents, cmpopts.EquateEmpty()); d != "" {
				t.Errorf("%s: events (-decoded +wire):\n%s", step, d)
			}
			for _, uid := range []types.UID{"a", "b"} {
				ws, werr := f.cache.Get(uid)
				gs, gerr := wcache.Get(uid)
				if (werr == nil) != (gerr == nil) || (ws == nil) != (gs == nil) ||
					ws != nil && (len(ws.ContainerStatuses) != len(gs.ContainerStatuses) || len(ws.SandboxStatuses) != len(gs.SandboxStatuses)) {
					t.Errorf("%s: pod %s cached %+v, %v by the decoded relist and %+v, %v by the wire one", step, uid, ws, werr, gs, gerr)
				}
			}
		}
		relistBoth("empty")
		sa := f.runSandbox("a")
		ca := f.createContainer("a", sa, "app", true)
		sb := f.runSandbox("b")
		f.createContainer("b", sb, "app", false)
		relistBoth("started")
		relistBoth("unchanged")
		if err := f.rt.ExitContainer(ca, 1, ""); err != nil {
			t.Fatal(err)
		}
		relistBoth("died")

		// A malformed answer: the relist fails; the next one finds what
		// changed meanwhile, as the decoded relist does.
		if err := f.rt.RemoveContainer(ctx, ca); err != nil {
			t.Fatal(err)
		}
		f.createContainer("a", sa, "app2", true)
		wr.fail = func() ([]byte, error) { return []byte{0x0a, 0x05, 0x0a}, nil }
		if err := w.Relist(ctx); !errors.Is(err, errMalformed) {
			t.Errorf("relist of a malformed answer = %v, want errMalformed", err)
		}
		if n := len(w.Events()); n != 0 {
			t.Errorf("the failed relist sent %d events", n)
		}
		// A malformed label on a container it does not know yet: it
		// fails after folding part of the listing in.
		wr.fail = func() ([]byte, error) {
			var m []byte
			m = appendField(m, fieldID, "new")
			m = appendField(m, fieldContainerLabels, []byte{0x0a, 0x09})
			b, _ := proto.Marshal(&runtimeapi.ListContainersResponse{Containers: []*runtimeapi.Container{listedContainer(ca, "a", ctrExited)}})
			return appendField(b, fieldItems, m), nil
		}
		if err := w.Relist(ctx); !errors.Is(err, errMalformed) {
			t.Errorf("relist of a malformed label = %v, want errMalformed", err)
		}
		wr.fail = nil
		relistBoth("after malformed answers")
		if len(w.tracker.dirty) != 0 {
			t.Errorf("%d pods left queued", len(w.tracker.dirty))
		}

		// Unimplemented: decoded lists from then on.
		wr.fail = func() ([]byte, error) { return nil, fmt.Errorf("no: %w", runtime.ErrUnimplemented) }
		f.createContainer("b", sb, "side", true)
		want := f.relist()
		if err := w.Relist(ctx); err != nil {
			t.Fatalf("relist on a lister without wire form: %v", err)
		}
		if d := cmp.Diff(want, drain(w.Events()), sortEvents, cmpopts.EquateEmpty()); d != "" {
			t.Errorf("events after the fallback (-decoded +wire):\n%s", d)
		}
		calls := wr.calls.Load()
		if err := w.Relist(ctx); err != nil {
			t.Fatal(err)
		}
		if wr.calls.Load() != calls {
			t.Errorf("the relist tried the wire form again after Unimplemented")
		}
	})
}
