package testkit

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/rsa"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"

	"github.com/open-policy-agent/cert-controller/pkg/rotator"
)

// CA is the certificate authority a certificate Secret holds.
type CA struct {
	Cert *x509.Certificate
	// Key is an *rsa.PrivateKey or an *ecdsa.PrivateKey.
	Key             crypto.Signer
	CertPEM, KeyPEM []byte
}

// ParseCA reads the CA and its key from a certificate Secret's data, the
// self-managed mode's keys ca.crt and ca.key: a PKCS #1 or PKCS #8 RSA or
// ECDSA key.
func ParseCA(data map[string][]byte) (*CA, error) {
	certPEM, keyPEM := data["ca.crt"], data["ca.key"]
	cb, _ := pem.Decode(certPEM)
	kb, _ := pem.Decode(keyPEM)
	if cb == nil || kb == nil {
		return nil, errors.New("no CA in the Secret")
	}
	cert, err := x509.ParseCertificate(cb.Bytes)
	if err != nil {
		return nil, err
	}
	var k any
	if k, err = x509.ParsePKCS1PrivateKey(kb.Bytes); err != nil {
		if k, err = x509.ParsePKCS8PrivateKey(kb.Bytes); err != nil {
			return nil, err
		}
	}
	switch k := k.(type) {
	case *rsa.PrivateKey:
		return &CA{Cert: cert, Key: k, CertPEM: certPEM, KeyPEM: keyPEM}, nil
	case *ecdsa.PrivateKey:
		return &CA{Cert: cert, Key: k, CertPEM: certPEM, KeyPEM: keyPEM}, nil
	default:
		return nil, fmt.Errorf("CA key of type %T", k)
	}
}

// Rotator returns the CA as cert-controller's rotator takes it, to sign
// certificates as the self-managed mode does (CreateCertPEM). Its key must
// be RSA, as the rotator's own CA keys are.
func (c *CA) Rotator() (*rotator.KeyPairArtifacts, error) {
	key, ok := c.Key.(*rsa.PrivateKey)
	if !ok {
		return nil, fmt.Errorf("CA key of type %T; the rotator signs with RSA only", c.Key)
	}
	return &rotator.KeyPairArtifacts{Cert: c.Cert, Key: key, CertPEM: c.CertPEM, KeyPEM: c.KeyPEM}, nil
}
