package certificate

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"time"

	certificatesv1 "k8s.io/api/certificates/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
)

// certificateWaitTimeout bounds the wait for a request to be approved and
// issued, as the certificate manager's: the request is then made again
// (with a new key) after the back-off.
const certificateWaitTimeout = 15 * time.Minute

// request makes a new key and a CertificateSigningRequest for it, waits
// until the request is issued (or denied, failed, gone, or
// certificateWaitTimeout passed), and keeps the pair in the store.
func (c *Manager) request(ctx context.Context) (*tls.Certificate, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("certificate: generating a key: %w", err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return nil, fmt.Errorf("certificate: encoding the key: %w", err)
	}
	keyPEM := pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER})
	reqDER, err := x509.CreateCertificateRequest(rand.Reader, c.tmpl, key)
	if err != nil {
		return nil, fmt.Errorf("certificate: making the certificate request: %w", err)
	}
	csr := &certificatesv1.CertificateSigningRequest{
		ObjectMeta: metav1.ObjectMeta{GenerateName: "csr-"},
		Spec: certificatesv1.CertificateSigningRequestSpec{
			Request:    pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE REQUEST", Bytes: reqDER}),
			SignerName: c.opts.SignerName,
			Usages:     c.opts.Usages,
		},
	}
	created, err := c.opts.Client.Create(ctx, csr, metav1.CreateOptions{})
	if err != nil {
		return nil, fmt.Errorf("certificate: creating the CertificateSigningRequest: %w", err)
	}
	c.log.V(2).Info("CertificateSigningRequest created, waiting for approval and issuance", "csr", created.Name)

	timeout := c.opts.Clock.NewTimer(certificateWaitTimeout)
	defer timeout.Stop()
	crtPEM, err := c.waitIssued(ctx, timeout.C(), created.Name, created.UID)
	if errors.Is(err, errWaitTimeout) {
		return nil, fmt.Errorf("certificate: CertificateSigningRequest %s was not issued within %s", created.Name, certificateWaitTimeout)
	}
	if err != nil {
		return nil, err
	}
	cert, err := c.store.update(crtPEM, keyPEM)
	if err != nil {
		return nil, fmt.Errorf("certificate: CertificateSigningRequest %s: %w", created.Name, err)
	}
	return cert, nil
}

// errWaitTimeout: certificateWaitTimeout passed.
var errWaitTimeout = errors.New("wait timed out")

// errWatchEnded: the watch closed or reported an error; the request is
// read again and watched anew.
var errWatchEnded = errors.New("watch ended")

// waitIssued reads the request, then watches it from the version read,
// until it is issued; it reads it again whenever the watch ends. It
// returns the issued certificate, or an error when the request is denied,
// failed, deleted, or replaced (another UID), ctx ends, or timeout fires
// (errWaitTimeout).
func (c *Manager) waitIssued(ctx context.Context, timeout <-chan time.Time, name string, uid types.UID) ([]byte, error) {
	selector := fields.OneTermEqualSelector("metadata.name", name).String()
	retry := func() error {
		t := c.opts.Clock.NewTimer(time.Second)
		defer t.Stop()
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-timeout:
			return errWaitTimeout
		case <-t.C():
			return nil
		}
	}
	for {
		csr, err := c.opts.Client.Get(ctx, name, metav1.GetOptions{})
		switch {
		case ctx.Err() != nil:
			return nil, ctx.Err()
		case apierrors.IsNotFound(err):
			return nil, fmt.Errorf("certificate: CertificateSigningRequest %s was deleted", name)
		case err != nil:
			c.log.V(2).Info("Cannot read the CertificateSigningRequest; trying again", "csr", name, "err", err.Error())
			if err := retry(); err != nil {
				return nil, err
			}
			continue
		}
		if crt, err := issued(csr, uid); crt != nil || err != nil {
			return crt, err
		}
		w, err := c.opts.Client.Watch(ctx, metav1.ListOptions{FieldSelector: selector, ResourceVersion: csr.ResourceVersion})
		if err != nil {
			if ctx.Err() != nil {
				return nil, ctx.Err()
			}
			c.log.V(2).Info("Cannot watch the CertificateSigningRequest; trying again", "csr", name, "err", err.Error())
			if err := retry(); err != nil {
				return nil, err
			}
			continue
		}
		crt, err := c.watchIssued(ctx, timeout, w, name, uid)
		w.Stop()
		if !errors.Is(err, errWatchEnded) {
			return crt, err
		}
	}
}

// watchIssued follows the watch of request name until it is issued, fails,
// the watch ends (errWatchEnded), ctx ends, or timeout fires.
func (c *Manager) watchIssued(ctx context.Context, timeout <-chan time.Time, w watch.Interface, name string, uid types.UID) ([]byte, error) {
	for {
		var ev watch.Event
		var ok bool
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-timeout:
			return nil, errWaitTimeout
		case ev, ok = <-w.ResultChan():
		}
		if !ok {
			return nil, errWatchEnded
		}
		if ev.Type == watch.Error {
			c.log.V(2).Info("The watch of the CertificateSigningRequest failed; reading it again", "csr", name, "err", apierrors.FromObject(ev.Object).Error())
			return nil, errWatchEnded
		}
		csr, isCSR := ev.Object.(*certificatesv1.CertificateSigningRequest)
		if !isCSR || csr.Name != name {
			continue
		}
		switch ev.Type {
		case watch.Deleted:
			return nil, fmt.Errorf("certificate: CertificateSigningRequest %s was deleted", name)
		case watch.Added, watch.Modified:
			if crt, err := issued(csr, uid); crt != nil || err != nil {
				return crt, err
			}
			if approved(csr) {
				c.log.V(2).Info("CertificateSigningRequest approved, waiting for issuance", "csr", name)
			}
		}
	}
}

// issued returns the certificate of csr once it is approved and issued,
// nil while it waits, or an error when it is denied or failed or is
// another request of the same name, as client-go's WaitForCertificate.
func issued(csr *certificatesv1.CertificateSigningRequest, uid types.UID) ([]byte, error) {
	if csr.UID != uid {
		return nil, fmt.Errorf("certificate: CertificateSigningRequest %s changed UIDs", csr.Name)
	}
	for _, cond := range csr.Status.Conditions {
		switch cond.Type {
		case certificatesv1.CertificateDenied:
			return nil, fmt.Errorf("certificate: CertificateSigningRequest %s is denied, reason: %s, message: %s", csr.Name, cond.Reason, cond.Message)
		case certificatesv1.CertificateFailed:
			return nil, fmt.Errorf("certificate: CertificateSigningRequest %s failed, reason: %s, message: %s", csr.Name, cond.Reason, cond.Message)
		}
	}
	if approved(csr) && len(csr.Status.Certificate) > 0 {
		return csr.Status.Certificate, nil
	}
	return nil, nil
}

func approved(csr *certificatesv1.CertificateSigningRequest) bool {
	for _, cond := range csr.Status.Conditions {
		if cond.Type == certificatesv1.CertificateApproved {
			return true
		}
	}
	return false
}
