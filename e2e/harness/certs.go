package harness

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"os"
	"path/filepath"
	"sync"
)

// Certs is a serving-certificate directory laid out like a mounted Secret
// (see Volume): Activate swaps tls.crt, tls.key and ca.crt in one rename, the
// way the kubelet updates a Secret volume that cert-manager renewed.
type Certs struct {
	vol    *Volume
	binary string
	hosts  []string
	// scratch is where `certs generate` writes each generation.
	scratch string

	mu      sync.Mutex
	gens    int
	current *CertGeneration
}

// CertGeneration is one CA and the serving certificate it signed, written by
// `sandbox-webhook certs generate`.
type CertGeneration struct {
	// CA is the PEM CA certificate (the caBundle for this generation).
	CA []byte
	// Leaf is the serving certificate.
	Leaf  *x509.Certificate
	files map[string][]byte
}

// NewCerts generates a first generation for hosts (IP addresses or DNS
// names) with the sandbox-webhook binary and activates it in dir.
func NewCerts(ctx context.Context, binary, dir string, hosts ...string) (*Certs, error) {
	scratch, err := os.MkdirTemp(filepath.Dir(dir), filepath.Base(dir)+"-generated-")
	if err != nil {
		return nil, err
	}
	c := &Certs{binary: binary, hosts: hosts, scratch: scratch}
	g, err := c.Generate(ctx)
	if err != nil {
		return nil, err
	}
	if c.vol, err = NewVolume(dir, g.files); err != nil {
		return nil, err
	}
	c.current = g
	return c, nil
}

// Dir is the directory to pass as --cert-dir.
func (c *Certs) Dir() string { return c.vol.Dir }

// Generate runs `sandbox-webhook certs generate` for a new generation (a
// fresh CA and serving certificate) without activating it.
func (c *Certs) Generate(ctx context.Context) (*CertGeneration, error) {
	c.mu.Lock()
	c.gens++
	dir := filepath.Join(c.scratch, fmt.Sprintf("gen-%d", c.gens))
	c.mu.Unlock()

	args := []string{"certs", "generate", "--out-dir", dir}
	for _, h := range c.hosts {
		args = append(args, "--host", h)
	}
	if _, err := Run(ctx, c.binary, args...); err != nil {
		return nil, err
	}
	files := map[string][]byte{}
	for _, name := range []string{"ca.crt", "tls.crt", "tls.key"} {
		b, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			return nil, fmt.Errorf("certs generate: %w", err)
		}
		files[name] = b
	}
	pair, err := tls.X509KeyPair(files["tls.crt"], files["tls.key"])
	if err != nil {
		return nil, fmt.Errorf("certs generate wrote an unusable tls.crt/tls.key: %w", err)
	}
	leaf, err := x509.ParseCertificate(pair.Certificate[0])
	if err != nil {
		return nil, err
	}
	if block, _ := pem.Decode(files["ca.crt"]); block == nil || block.Type != "CERTIFICATE" {
		return nil, fmt.Errorf("certs generate wrote a ca.crt that is not a PEM certificate")
	}
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(files["ca.crt"])
	for _, h := range c.hosts {
		if _, err := leaf.Verify(x509.VerifyOptions{Roots: roots, DNSName: h}); err != nil {
			return nil, fmt.Errorf("certs generate: the serving certificate does not verify for %s against ca.crt: %w", h, err)
		}
	}
	return &CertGeneration{CA: files["ca.crt"], Leaf: leaf, files: files}, nil
}

// Activate swaps the directory's files to g in one rename.
func (c *Certs) Activate(g *CertGeneration) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := c.vol.Update(g.files); err != nil {
		return err
	}
	c.current = g
	return nil
}

// Current returns the active generation.
func (c *Certs) Current() *CertGeneration {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.current
}
