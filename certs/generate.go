package certs

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// File names written by Generate and read by the server from --cert-dir.
const (
	CAFile   = "ca.crt"
	CertFile = "tls.crt"
	KeyFile  = "tls.key"
)

// DefaultValidity is how long a generated CA and serving certificate stay valid.
const DefaultValidity = 365 * 24 * time.Hour

// clockSkew backdates NotBefore so that a certificate generated on one machine is
// already valid on an apiserver whose clock is a little behind.
const clockSkew = 5 * time.Minute

// GenerateOptions says what Generate writes.
type GenerateOptions struct {
	// OutDir receives ca.crt, tls.crt and tls.key; it is created when missing.
	OutDir string
	// Hosts are the serving certificate's subject alternative names: IP addresses
	// become IP SANs, everything else DNS SANs. At least one is required.
	Hosts []string
	// Validity is how long the CA and the serving certificate are valid from now.
	Validity time.Duration
	// Now returns the current time; nil means time.Now.
	Now func() time.Time
	// Force replaces an existing ca.crt, tls.crt or tls.key in OutDir.
	// Without it Generate refuses: the CA's key is not kept, so a
	// replaced ca.crt cannot be had again, and every caBundle holding it
	// stops verifying the new serving certificate.
	Force bool
}

// ErrExists is returned by Generate when OutDir already holds a file it
// would write and Force is not set.
var ErrExists = errors.New("already exists")

// Generate writes a fresh CA certificate and a serving certificate signed by it
// into opts.OutDir (ca.crt, tls.crt, and tls.key with mode 0600). Keys are ECDSA
// P-256. The CA's private key is never written: nothing else can be signed by it,
// so trusting ca.crt trusts exactly this one serving certificate.
func Generate(opts GenerateOptions) error {
	if err := opts.Validate(); err != nil {
		return err
	}
	now := time.Now
	if opts.Now != nil {
		now = opts.Now
	}
	notBefore := now().Add(-clockSkew)
	notAfter := now().Add(opts.Validity)

	caKey, caDER, err := newCertificate("CA", &x509.Certificate{
		Subject:               pkix.Name{CommonName: "sandbox-webhook-ca", Organization: []string{"sandbox-webhook"}},
		NotBefore:             notBefore,
		NotAfter:              notAfter,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
		MaxPathLenZero:        true,
	}, nil, nil)
	if err != nil {
		return err
	}
	ca, err := x509.ParseCertificate(caDER)
	if err != nil {
		return fmt.Errorf("parsing CA certificate: %w", err)
	}

	template := &x509.Certificate{
		Subject:     pkix.Name{CommonName: opts.Hosts[0], Organization: []string{"sandbox-webhook"}},
		NotBefore:   notBefore,
		NotAfter:    notAfter,
		KeyUsage:    x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	for _, h := range opts.Hosts {
		if ip := net.ParseIP(h); ip != nil {
			template.IPAddresses = append(template.IPAddresses, ip)
		} else {
			template.DNSNames = append(template.DNSNames, h)
		}
	}
	key, der, err := newCertificate("serving", template, ca, caKey)
	if err != nil {
		return err
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return fmt.Errorf("encoding serving key: %w", err)
	}

	if !opts.Force {
		var existing []string
		for _, name := range []string{CAFile, CertFile, KeyFile} {
			if _, err := os.Lstat(filepath.Join(opts.OutDir, name)); err == nil {
				existing = append(existing, name)
			}
		}
		if len(existing) > 0 {
			return fmt.Errorf("%s in %s: %w; the CA key is not kept, so a replaced CA is gone for good and every caBundle holding it stops verifying (--force replaces them)",
				strings.Join(existing, ", "), opts.OutDir, ErrExists)
		}
	}
	if err := os.MkdirAll(opts.OutDir, 0o755); err != nil {
		return fmt.Errorf("creating output directory: %w", err)
	}
	// The key is written first and the certificate last, so that a certwatcher
	// reading the directory sees a matching pair once tls.crt changes.
	files := []struct {
		name  string
		block *pem.Block
		mode  os.FileMode
	}{
		{CAFile, &pem.Block{Type: "CERTIFICATE", Bytes: caDER}, 0o644},
		{KeyFile, &pem.Block{Type: "PRIVATE KEY", Bytes: keyDER}, 0o600},
		{CertFile, &pem.Block{Type: "CERTIFICATE", Bytes: der}, 0o644},
	}
	for _, f := range files {
		if err := writeFileAtomic(filepath.Join(opts.OutDir, f.name), pem.EncodeToMemory(f.block), f.mode); err != nil {
			return err
		}
	}
	return nil
}

// Validate reports every problem of the options at once, naming the flags
// of `certs generate`.
func (o GenerateOptions) Validate() error {
	var errs []error
	if o.OutDir == "" {
		errs = append(errs, errors.New("--out-dir is required"))
	}
	if len(o.Hosts) == 0 {
		errs = append(errs, errors.New("at least one --host is required"))
	}
	seen := map[string]bool{}
	for _, h := range o.Hosts {
		switch {
		case h == "":
			errs = append(errs, errors.New("--host must not be empty"))
		case strings.ContainsAny(h, " \t\n/:") && net.ParseIP(h) == nil:
			errs = append(errs, fmt.Errorf("--host %q is neither an IP address nor a DNS name", h))
		case seen[h]:
			errs = append(errs, fmt.Errorf("--host %q is given twice", h))
		}
		seen[h] = true
	}
	if o.Validity <= 0 {
		errs = append(errs, fmt.Errorf("--validity must be positive, got %s", o.Validity))
	}
	return errors.Join(errs...)
}

// newCertificate makes an ECDSA P-256 key and a certificate of it from
// template, with a random 128-bit serial number as RFC 5280 recommends,
// signed by parent's parentKey, or self-signed when parent is nil. what
// names the certificate in errors.
func newCertificate(what string, template, parent *x509.Certificate, parentKey *ecdsa.PrivateKey) (*ecdsa.PrivateKey, []byte, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, fmt.Errorf("generating %s key: %w", what, err)
	}
	if template.SerialNumber, err = rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 128)); err != nil {
		return nil, nil, fmt.Errorf("generating serial number: %w", err)
	}
	if parent == nil {
		parent, parentKey = template, key
	}
	der, err := x509.CreateCertificate(rand.Reader, template, parent, key.Public(), parentKey)
	if err != nil {
		return nil, nil, fmt.Errorf("creating %s certificate: %w", what, err)
	}
	return key, der, nil
}

// writeFileAtomic replaces path with data through a temporary file in the same
// directory and a rename, so that readers never see a partly written file.
func writeFileAtomic(path string, data []byte, mode os.FileMode) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*")
	if err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	defer os.Remove(tmp.Name()) // no-op after a successful rename
	err = tmp.Chmod(mode)
	if err == nil {
		_, err = tmp.Write(data)
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp.Name(), path)
	}
	if err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	return nil
}
