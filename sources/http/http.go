package http

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	nethttp "net/http"
	"net/url"
	"time"

	"github.com/go-logr/logr"
	v1 "k8s.io/api/core/v1"

	"github.com/nodekit/nodekit/sources"
	"github.com/nodekit/nodekit/sources/internal/manifest"
)

const (
	// DefaultPeriod is how often the URL is polled, the kubelet's
	// HTTPCheckFrequency.
	DefaultPeriod = 20 * time.Second
	// DefaultTimeout bounds one request, the kubelet's.
	DefaultTimeout = 10 * time.Second
	// DefaultMaxBodyBytes is the largest body read (10 MiB).
	DefaultMaxBodyBytes int64 = 10 << 20

	// quietAfter is the number of consecutive failures logged as errors;
	// later ones are logged at V(4) until a poll succeeds, as the kubelet
	// does.
	quietAfter = 3

	// maxIgnoredLogged is the number of ignored documents of one body
	// logged one by one; the others of that body are logged as one count.
	maxIgnoredLogged = 10
)

// Options configures a Source.
type Options struct {
	// URL is polled for the pods: http or https. Required.
	URL string
	// Header is sent with every request. Defaults to none.
	Header nethttp.Header
	// NodeName is the node's name: it suffixes the pods' names and is part
	// of their UIDs. Defaults to the name of the agent the Source is given
	// to (SetNodeName); set it only to run the Source without an agent.
	NodeName string
	// Period is how often the URL is polled; the first poll is immediate.
	// Defaults to 20s (the kubelet's HTTPCheckFrequency).
	Period time.Duration
	// Timeout bounds each request, whatever the Client. Defaults to 10s.
	Timeout time.Duration
	// MaxBodyBytes is the largest body accepted; a larger one is an error.
	// Defaults to 10 MiB.
	MaxBodyBytes int64
	// Client sends the requests. Defaults to a client of the Source's own,
	// with its own connection pool, closed when Run returns.
	Client *nethttp.Client
	// Logger receives the source's logs: every failed poll, and every
	// document of a body, or pod of a list, that gives no pod, with the
	// reason. Defaults to the agent's logger when the Source is given to an
	// agent (sources.LoggerSetter), else to discarding them (a
	// logr.Discard() Logger counts as none).
	Logger logr.Logger
}

func (o *Options) setDefaults() error {
	if o.URL == "" {
		return errors.New("http: URL is required")
	}
	u, err := url.Parse(o.URL)
	if err != nil {
		return fmt.Errorf("http: bad URL: %w", err)
	}
	if (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Errorf("http: URL %q is not an http or https URL", o.URL)
	}
	if o.Period < 0 || o.Timeout < 0 || o.MaxBodyBytes < 0 {
		return fmt.Errorf("http: negative Period %v, Timeout %v or MaxBodyBytes %d", o.Period, o.Timeout, o.MaxBodyBytes)
	}
	if o.Period == 0 {
		o.Period = DefaultPeriod
	}
	if o.Timeout == 0 {
		o.Timeout = DefaultTimeout
	}
	if o.MaxBodyBytes == 0 {
		o.MaxBodyBytes = DefaultMaxBodyBytes
	}
	o.Header = o.Header.Clone()
	o.Logger = o.Logger.WithName("http")
	return nil
}

// Source is the static pod source that polls a URL for a Pod or a PodList,
// the kubelet's HTTP source (--manifest-url). It is a sources.Source; build
// it with New. Run may be called once at a time.
type Source struct {
	opts Options
	log  logr.Logger
	// ownLogger: Options.Logger was given, and SetLogger keeps it.
	ownLogger bool
	// ownClient is the client New made, nil when Options.Client was given.
	ownClient *nethttp.Client
}

var (
	_ sources.Source       = (*Source)(nil)
	_ sources.NodeNamer    = (*Source)(nil)
	_ sources.LoggerSetter = (*Source)(nil)
)

// New returns a Source for opts. It does no I/O.
func New(opts Options) (*Source, error) {
	own := opts.Logger.GetSink() != nil
	if err := opts.setDefaults(); err != nil {
		return nil, err
	}
	s := &Source{opts: opts, log: opts.Logger.WithValues("url", opts.URL), ownLogger: own}
	if s.opts.Client == nil {
		var rt nethttp.RoundTripper = nethttp.DefaultTransport
		if t, ok := nethttp.DefaultTransport.(*nethttp.Transport); ok {
			rt = t.Clone()
		}
		s.ownClient = &nethttp.Client{Timeout: opts.Timeout, Transport: rt}
		s.opts.Client = s.ownClient
	}
	return s, nil
}

// SetLogger implements sources.LoggerSetter: the agent's logger, unless
// Options.Logger was given. It must be called before Run.
func (s *Source) SetLogger(log logr.Logger) {
	if s.ownLogger {
		return
	}
	s.opts.Logger = log.WithName("http")
	s.log = s.opts.Logger.WithValues("url", s.opts.URL)
}

// SetNodeName implements sources.NodeNamer: the agent's name, unless
// Options.NodeName names another node.
func (s *Source) SetNodeName(name string) error {
	if s.opts.NodeName != "" && s.opts.NodeName != name {
		return fmt.Errorf("http: Options.NodeName %q is not the agent's node name %q (leave it empty)", s.opts.NodeName, name)
	}
	s.opts.NodeName = name
	return nil
}

// Run polls the URL now and every Period, and sends the pods of each new
// body as a snapshot. It blocks until ctx ends, returns nil then, and
// returns after its requests have ended.
//
// A body byte-identical to the last one is neither decoded nor sent again.
// A body of several YAML documents gives the pods of its first (empty
// documents aside), as the kubelet reads it; each later one is logged as
// ignored, once per new body.
// An empty body sends an empty snapshot (the source becomes ready, with no
// pods) and is logged as an error, as the kubelet does. Every other failure
// (request, status, size, decoding, an invalid single Pod) is logged with
// the URL and the reason, and the previous snapshot stands. Pods of a
// PodList that fail validation are dropped and logged one by one; the rest
// are sent.
func (s *Source) Run(ctx context.Context, snapshots chan<- []*v1.Pod) error {
	if s.opts.NodeName == "" {
		return errors.New("http: no node name: give the Source to an agent, or set Options.NodeName")
	}
	if s.ownClient != nil {
		defer s.ownClient.CloseIdleConnections()
	}
	var p poller
	ticker := time.NewTicker(s.opts.Period)
	defer ticker.Stop()
	for {
		pods, send, err := s.poll(ctx, &p)
		if ctx.Err() != nil {
			return nil
		}
		s.report(&p, err)
		if send {
			s.log.V(4).Info("sending snapshot", "pods", len(pods))
			select {
			case snapshots <- pods:
			case <-ctx.Done():
				return nil
			}
		}
		select {
		case <-ctx.Done():
			return nil
		case <-ticker.C:
		}
	}
}

// poller is the state of Run's polls.
type poller struct {
	// good is the last body whose pods were sent; nil after an empty body.
	good []byte
	// bad is the last body that could not be used, and why.
	bad    []byte
	badErr error
	// failures counts consecutive failed polls; sameReason those of them,
	// the last ones, that failed for reason.
	failures   int
	reason     string
	sameReason int
}

// poll fetches and decodes the body. send says whether pods is a snapshot
// to send; err is what to log.
func (s *Source) poll(ctx context.Context, p *poller) (pods []*v1.Pod, send bool, err error) {
	body, err := s.fetch(ctx)
	if err != nil {
		return nil, false, err
	}
	if len(body) == 0 {
		p.good = nil
		return []*v1.Pod{}, true, fmt.Errorf("http: GET %s: empty body, no pods", s.opts.URL)
	}
	if p.good != nil && bytes.Equal(body, p.good) {
		return nil, false, nil
	}
	if p.bad != nil && bytes.Equal(body, p.bad) {
		return nil, false, p.badErr
	}
	pods, err = s.decode(body)
	if err != nil {
		p.bad, p.badErr = body, err
		return nil, false, err
	}
	p.good, p.bad, p.badErr = body, nil, nil
	return pods, true, nil
}

// fetch GETs the URL and returns the body of a 200 response.
func (s *Source) fetch(ctx context.Context) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, s.opts.Timeout)
	defer cancel()
	req, err := nethttp.NewRequestWithContext(ctx, nethttp.MethodGet, s.opts.URL, nil)
	if err != nil {
		return nil, fmt.Errorf("http: GET %s: %w", s.opts.URL, err)
	}
	if s.opts.Header != nil {
		req.Header = s.opts.Header.Clone()
	}
	resp, err := s.opts.Client.Do(req)
	if err != nil {
		// The client's errors already name the method and URL.
		return nil, fmt.Errorf("http: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != nethttp.StatusOK {
		// Drain a little so that the connection can be reused.
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 4<<10))
		return nil, fmt.Errorf("http: GET %s: unexpected status %s", s.opts.URL, resp.Status)
	}
	tooLarge := fmt.Errorf("http: GET %s: body larger than %d bytes", s.opts.URL, s.opts.MaxBodyBytes)
	if resp.ContentLength > s.opts.MaxBodyBytes {
		return nil, tooLarge
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, s.opts.MaxBodyBytes+1))
	if err != nil {
		return nil, fmt.Errorf("http: GET %s: reading body: %w", s.opts.URL, err)
	}
	if int64(len(body)) > s.opts.MaxBodyBytes {
		return nil, tooLarge
	}
	return body, nil
}

// decode turns a body into the pods to send: those of its first YAML
// document (empty documents aside), as the kubelet reads a body; each
// later document is logged as ignored.
func (s *Source) decode(body []byte) ([]*v1.Pod, error) {
	s.log.V(4).Info("decoding body", "bytes", len(body))
	pods, kind, ignored, err := manifest.DecodeFirst(body)
	s.reportIgnored(ignored)
	if err != nil {
		return nil, fmt.Errorf("http: %s: cannot decode body: %w", s.opts.URL, err)
	}
	if kind == manifest.KindPod {
		pod := pods[0]
		sources.StaticPodDefaults(pod, s.opts.URL, s.opts.NodeName)
		if err := sources.ValidateStatic(pod); err != nil {
			return nil, fmt.Errorf("http: %s: %w", s.opts.URL, err)
		}
		return pods, nil
	}
	valid := make([]*v1.Pod, 0, len(pods))
	for i, pod := range pods {
		name := pod.Name
		sources.StaticPodDefaults(pod, s.opts.URL, s.opts.NodeName)
		if err := sources.ValidateStatic(pod); err != nil {
			s.log.Error(err, "dropping invalid pod from the list", "pod", name, "index", i)
			continue
		}
		valid = append(valid, pod)
	}
	return valid, nil
}

// reportIgnored logs the ignored documents after the first of a body of
// ignored+1 documents: the first maxIgnoredLogged one by one, the others
// as one count, so that a body of many small documents costs a few lines.
func (s *Source) reportIgnored(ignored int) {
	for i := range min(ignored, maxIgnoredLogged) {
		s.log.Error(fmt.Errorf("http: %s: document %d of %d ignored: a body gives the pods of its first document, a Pod or a PodList, as the kubelet reads it (list several pods in a PodList)",
			s.opts.URL, i+2, ignored+1), "manifest document ignored")
	}
	if rest := ignored - maxIgnoredLogged; rest > 0 {
		s.log.Error(fmt.Errorf("http: %s: documents %d to %d of %d ignored", s.opts.URL, maxIgnoredLogged+2, ignored+1, ignored+1),
			"manifest documents ignored", "count", rest)
	}
}

// report logs the outcome of a poll: consecutive failures as errors, the
// first few of each reason, then at V(4); a failure whose reason differs
// from the last one's as an error again; a recovery once.
func (s *Source) report(p *poller, err error) {
	if err == nil {
		if p.failures > 0 {
			s.log.Info("reading pods from URL succeeded again", "failures", p.failures)
			p.failures, p.reason, p.sameReason = 0, "", 0
		}
		return
	}
	p.failures++
	if reason := err.Error(); reason != p.reason {
		p.reason, p.sameReason = reason, 0
	}
	p.sameReason++
	switch {
	case p.sameReason < quietAfter:
		s.log.Error(err, "cannot read pods from URL", "failures", p.failures)
	case p.sameReason == quietAfter:
		s.log.Error(err, "cannot read pods from URL; further failures for this reason are logged at V(4)", "failures", p.failures)
	default:
		s.log.V(4).Info("cannot read pods from URL", "reason", err.Error(), "failures", p.failures)
	}
}
