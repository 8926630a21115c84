package nodekit_test

import (
	"bufio"
	"context"
	"encoding/gob"
	"fmt"
	"io"
	"net"
	"os"
	"reflect"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/connectivity"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/mem"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"

	"github.com/nodekit/nodekit/runtime/cri"
)

// The floor of a pod start's CRI calls (BenchmarkCRI: call-floor-us/pod,
// pod-cpu/call-floor) is the CPU this process spends making the same CRI
// round trips as the agent made during the start, with the same
// messages, and nothing else.
//
// The CRI server process records, between the benchmark's "record" and
// "dump" commands, every call it serves: the method, the request and the
// answer (or error) of each unary call, and the messages each stream sent
// (the evented PLEG's container events). Recording on the server side
// costs the agent nothing. The agent's client notes, for each unary call,
// the Go type it decoded the answer into and its call options (the
// relisting PLEG keeps its lists in their protobuf encoding, which costs
// less than decoding them), and the calls' mean concurrency.
//
// After the agent stopped, a replay process answers each method with the
// recorded answers, as they are, and this process sends the recorded
// requests with plain gRPC calls, at the agent's mean concurrency,
// decoding each answer as the agent did, and receives the recorded stream
// messages: the CPU of that, and of nothing else, is the floor.

// replayEnv, when set, makes this test binary serve the recorded calls in
// the file named by replayFileEnv on the socket replayEnv names (see
// TestMain).
const (
	replayEnv     = "NODEKIT_BENCH_CRI_REPLAY"
	replayFileEnv = "NODEKIT_BENCH_CRI_REPLAY_FILE"
)

// recordedCall is a call the CRI server served while recording: a unary
// call's request and answer (or error), or a stream's request and the
// messages it sent.
type recordedCall struct {
	Method  string
	Stream  bool
	Req     []byte
	Resp    [][]byte
	Code    codes.Code
	Message string
}

// callRecorder is the CRI server's interceptors: while on, it keeps every
// call served, undecoded until dump.
type callRecorder struct {
	on      atomic.Bool
	mu      sync.Mutex
	unary   []unaryRecord
	streams map[*recordingStream]bool
}

type unaryRecord struct {
	method    string
	req, resp any
	err       error
}

func newCallRecorder() *callRecorder {
	return &callRecorder{streams: map[*recordingStream]bool{}}
}

func (r *callRecorder) serverOptions() []grpc.ServerOption {
	return []grpc.ServerOption{
		grpc.ChainUnaryInterceptor(r.interceptUnary),
		grpc.ChainStreamInterceptor(r.interceptStream),
	}
}

func (r *callRecorder) interceptUnary(ctx context.Context, req any, info *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
	resp, err := h(ctx, req)
	if r.on.Load() {
		r.mu.Lock()
		r.unary = append(r.unary, unaryRecord{method: info.FullMethod, req: req, resp: resp, err: err})
		r.mu.Unlock()
	}
	return resp, err
}

func (r *callRecorder) interceptStream(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, h grpc.StreamHandler) error {
	s := &recordingStream{ServerStream: ss, rec: r, method: info.FullMethod}
	r.mu.Lock()
	r.streams[s] = true
	r.mu.Unlock()
	defer func() {
		r.mu.Lock()
		delete(r.streams, s)
		r.mu.Unlock()
	}()
	return h(srv, s)
}

// recordingStream keeps a stream's request and, while its recorder is on,
// the messages it sends.
type recordingStream struct {
	grpc.ServerStream
	rec    *callRecorder
	method string
	mu     sync.Mutex
	req    any
	sent   []any
}

func (s *recordingStream) RecvMsg(m any) error {
	err := s.ServerStream.RecvMsg(m)
	if err == nil {
		s.mu.Lock()
		s.req = m
		s.mu.Unlock()
	}
	return err
}

func (s *recordingStream) SendMsg(m any) error {
	if s.rec.on.Load() {
		s.mu.Lock()
		s.sent = append(s.sent, m)
		s.mu.Unlock()
	}
	return s.ServerStream.SendMsg(m)
}

// dump stops recording and writes what was recorded to path, encoded.
func (r *callRecorder) dump(path string) error {
	r.on.Store(false)
	r.mu.Lock()
	unary := r.unary
	r.unary = nil
	streams := make([]*recordingStream, 0, len(r.streams))
	for s := range r.streams {
		streams = append(streams, s)
	}
	r.mu.Unlock()
	var calls []recordedCall
	for _, u := range unary {
		c := recordedCall{Method: u.method, Req: marshal(u.req)}
		if u.err != nil {
			st := status.Convert(u.err)
			c.Code, c.Message = st.Code(), st.Message()
		} else {
			c.Resp = [][]byte{marshal(u.resp)}
		}
		calls = append(calls, c)
	}
	for _, s := range streams {
		s.mu.Lock()
		c := recordedCall{Method: s.method, Stream: true, Req: marshal(s.req)}
		for _, m := range s.sent {
			c.Resp = append(c.Resp, marshal(m))
		}
		s.sent = nil
		s.mu.Unlock()
		if len(c.Resp) > 0 {
			calls = append(calls, c)
		}
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := gob.NewEncoder(f).Encode(calls); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

func marshal(m any) []byte {
	pm, ok := m.(proto.Message)
	if !ok {
		return nil
	}
	b, _ := proto.Marshal(pm)
	return b
}

// serveCommands reads the benchmark's commands on in ("record", "dump
// PATH") and acknowledges each on out, until in ends.
func serveCommands(rec *callRecorder, in io.Reader, out io.Writer) {
	sc := bufio.NewScanner(in)
	for sc.Scan() {
		cmd, arg, _ := strings.Cut(sc.Text(), " ")
		switch cmd {
		case "record":
			rec.on.Store(true)
			fmt.Fprintln(out, "ok")
		case "dump":
			if err := rec.dump(arg); err != nil {
				fmt.Fprintln(out, "error:", err)
				continue
			}
			fmt.Fprintln(out, "ok")
		default:
			fmt.Fprintln(out, "error: unknown command", cmd)
		}
	}
}

// clientCalls notes, while on, the reply type, call options and duration
// of each unary CRI call the agent makes: a few words a call.
type clientCalls struct {
	on    atomic.Bool
	mu    sync.Mutex
	calls []clientCall
	start time.Time
	busy  time.Duration // the calls' durations, summed
	span  time.Duration // from start to the last call's end
}

type clientCall struct {
	method string
	reply  reflect.Type
	opts   []grpc.CallOption
}

func (c *clientCalls) dialOption() cri.Opt {
	return cri.WithExtraDialOptions(grpc.WithChainUnaryInterceptor(c.intercept))
}

func (c *clientCalls) record() {
	c.mu.Lock()
	c.calls, c.busy, c.span, c.start = nil, 0, 0, time.Now()
	c.mu.Unlock()
	c.on.Store(true)
}

func (c *clientCalls) intercept(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoke grpc.UnaryInvoker, opts ...grpc.CallOption) error {
	if !c.on.Load() {
		return invoke(ctx, method, req, reply, cc, opts...)
	}
	t0 := time.Now()
	err := invoke(ctx, method, req, reply, cc, opts...)
	t1 := time.Now()
	c.mu.Lock()
	c.calls = append(c.calls, clientCall{method: method, reply: reflect.TypeOf(reply), opts: opts})
	c.busy += t1.Sub(t0)
	c.span = t1.Sub(c.start)
	c.mu.Unlock()
	return err
}

// concurrency is the calls' mean number in flight while recording.
func (c *clientCalls) concurrency() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.span <= 0 {
		return 1
	}
	return max(1, int(float64(c.busy)/float64(c.span)+0.5))
}

// serveReplay answers, on the unix socket sock, every method with the
// answers recorded for it in the file path, in turn, as they are, until
// its standard input closes.
func serveReplay(sock, path string) int {
	calls, err := readRecorded(path)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	var mu sync.Mutex
	queues := map[string][]recordedCall{}
	for _, c := range calls {
		queues[c.Method] = append(queues[c.Method], c)
	}
	handler := func(_ any, stream grpc.ServerStream) error {
		method, _ := grpc.MethodFromServerStream(stream)
		var req rawMessage
		if err := stream.RecvMsg(&req); err != nil {
			return err
		}
		mu.Lock()
		q := queues[method]
		if len(q) == 0 {
			mu.Unlock()
			return status.Errorf(codes.Unavailable, "no recorded answer left for %s", method)
		}
		c := q[0]
		queues[method] = q[1:]
		mu.Unlock()
		if c.Code != codes.OK {
			return status.Error(c.Code, c.Message)
		}
		for _, r := range c.Resp {
			m := rawMessage(r)
			if err := stream.SendMsg(&m); err != nil {
				return err
			}
		}
		if c.Stream {
			<-stream.Context().Done() // as a runtime's event stream, open until the client goes
		}
		return nil
	}
	lis, err := net.Listen("unix", sock)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	srv := grpc.NewServer(grpc.UnknownServiceHandler(handler), grpc.ForceServerCodecV2(rawCodec{}),
		grpc.MaxRecvMsgSize(cri.MaxMsgSize), grpc.MaxSendMsgSize(cri.MaxMsgSize))
	go srv.Serve(lis)
	io.Copy(io.Discard, os.Stdin)
	srv.Stop()
	return 0
}

func readRecorded(path string) ([]recordedCall, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var calls []recordedCall
	if err := gob.NewDecoder(f).Decode(&calls); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return calls, nil
}

// rawMessage is a message in its protobuf encoding; rawCodec sends and
// receives it as it is.
type rawMessage []byte

type rawCodec struct{}

func (rawCodec) Marshal(v any) (mem.BufferSlice, error) {
	return mem.BufferSlice{mem.SliceBuffer(*v.(*rawMessage))}, nil
}

func (rawCodec) Unmarshal(data mem.BufferSlice, v any) error {
	*v.(*rawMessage) = data.Materialize()
	return nil
}

func (rawCodec) Name() string { return "proto" }

// callFloor is the recorded calls of a start, ready to replay.
type callFloor struct {
	unary   []replayCall
	streams []replayCall
	workers int
}

type replayCall struct {
	method string
	req    proto.Message
	reply  func() any
	opts   []grpc.CallOption
	msgs   int // a stream's messages
	err    bool
}

// loadCallFloor reads the calls the CRI server recorded in path and pairs
// each unary call with the reply type and call options the agent's client
// used for it (the k-th call of a method with the client's k-th).
func loadCallFloor(b *testing.B, path string, client *clientCalls) callFloor {
	b.Helper()
	calls, err := readRecorded(path)
	if err != nil {
		b.Fatal(err)
	}
	client.on.Store(false)
	client.mu.Lock()
	byMethod := map[string][]clientCall{}
	for _, c := range client.calls {
		byMethod[c.method] = append(byMethod[c.method], c)
	}
	client.mu.Unlock()
	f := callFloor{workers: client.concurrency()}
	for _, c := range calls {
		md := methodDesc(b, c.Method)
		req := dynamicMessage(b, md.Input())
		if err := proto.Unmarshal(c.Req, req); err != nil {
			b.Fatalf("%s: %v", c.Method, err)
		}
		out := dynamicMessage(b, md.Output())
		rc := replayCall{method: c.Method, req: req, err: c.Code != codes.OK, msgs: len(c.Resp),
			reply: func() any { return out.ProtoReflect().New().Interface() }}
		if c.Stream {
			f.streams = append(f.streams, rc)
			continue
		}
		if q := byMethod[c.Method]; len(q) > 0 {
			cc := q[0]
			byMethod[c.Method] = q[1:]
			rc.opts = cc.opts
			if cc.reply != nil && cc.reply.Kind() == reflect.Pointer {
				t := cc.reply.Elem()
				rc.reply = func() any { return reflect.New(t).Interface() }
			}
		}
		f.unary = append(f.unary, rc)
	}
	counts := map[string]int{}
	for _, c := range calls {
		counts[c.Method[strings.LastIndexByte(c.Method, '/')+1:]] += max(1, len(c.Resp)*btoi(c.Stream))
	}
	b.Logf("CRI calls of the start (stream messages for a stream): %v; replayed %d at a time", counts, f.workers)
	return f
}

func methodDesc(b *testing.B, fullMethod string) protoreflect.MethodDescriptor {
	b.Helper()
	svc, method, ok := strings.Cut(strings.TrimPrefix(fullMethod, "/"), "/")
	if !ok {
		b.Fatalf("bad method %q", fullMethod)
	}
	d, err := protoregistry.GlobalFiles.FindDescriptorByName(protoreflect.FullName(svc))
	if err != nil {
		b.Fatalf("%s: %v", fullMethod, err)
	}
	md := d.(protoreflect.ServiceDescriptor).Methods().ByName(protoreflect.Name(method))
	if md == nil {
		b.Fatalf("no method %q", fullMethod)
	}
	return md
}

func dynamicMessage(b *testing.B, d protoreflect.MessageDescriptor) proto.Message {
	b.Helper()
	t, err := protoregistry.GlobalTypes.FindMessageByName(d.FullName())
	if err != nil {
		b.Fatalf("%s: %v", d.FullName(), err)
	}
	return t.New().Interface()
}

// count is the number of calls, unary ones and stream messages.
func (f callFloor) count() (unary, msgs int) {
	for _, s := range f.streams {
		msgs += s.msgs
	}
	return len(f.unary), msgs
}

// replay makes the recorded calls against a replay process serving the
// recorded answers, and returns the CPU this process spent on them.
func (f callFloor) replay(b *testing.B, recorded string) time.Duration {
	b.Helper()
	proc := startHelper(b, replayEnv+"="+sockPath(b), replayFileEnv+"="+recorded)
	conn, err := grpc.NewClient("unix://"+proc.sock,
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(cri.MaxMsgSize), grpc.MaxCallSendMsgSize(cri.MaxMsgSize)))
	if err != nil {
		b.Fatal(err)
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(b.Context(), 30*time.Second)
	defer cancel()
	conn.Connect()
	for s := conn.GetState(); s != connectivity.Ready; s = conn.GetState() {
		if !conn.WaitForStateChange(ctx, s) {
			b.Fatal("the replay process did not accept the connection")
		}
	}
	var next atomic.Int64
	var failed atomic.Value
	var wg sync.WaitGroup
	r0 := rusage()
	for _, s := range f.streams {
		wg.Go(func() {
			sctx, scancel := context.WithCancel(b.Context())
			defer scancel()
			st, err := conn.NewStream(sctx, &grpc.StreamDesc{ServerStreams: true}, s.method)
			if err == nil {
				err = st.SendMsg(s.req)
			}
			if err == nil {
				err = st.CloseSend()
			}
			for range s.msgs {
				if err != nil {
					break
				}
				err = st.RecvMsg(s.reply())
			}
			if err != nil {
				failed.Store(fmt.Errorf("%s: %w", s.method, err))
			}
		})
	}
	for range f.workers {
		wg.Go(func() {
			for {
				i := int(next.Add(1)) - 1
				if i >= len(f.unary) {
					return
				}
				c := f.unary[i]
				err := conn.Invoke(b.Context(), c.method, c.req, c.reply(), c.opts...)
				if (err != nil) != c.err {
					failed.Store(fmt.Errorf("%s: %v", c.method, err))
				}
			}
		})
	}
	wg.Wait()
	d := rusage() - r0
	if err, _ := failed.Load().(error); err != nil {
		b.Fatal(err)
	}
	return d
}

// sockPath is a fresh unix socket path, removed at the end of the
// benchmark.
func sockPath(b *testing.B) string {
	dir, err := os.MkdirTemp("", "nodekit-cri-")
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { os.RemoveAll(dir) })
	return dir + "/cri.sock"
}

func btoi(v bool) int {
	if v {
		return 1
	}
	return 0
}
