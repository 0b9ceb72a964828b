package certs

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func readCert(t *testing.T, path string) *x509.Certificate {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	block, rest := pem.Decode(raw)
	if block == nil || block.Type != "CERTIFICATE" || len(bytes.TrimSpace(rest)) != 0 {
		t.Fatalf("%s: want exactly one CERTIFICATE PEM block", path)
	}
	cert, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return cert
}

func TestGenerateVerifiesForEachHost(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "nested", "out") // created by Generate
	hosts := []string{"127.0.0.1", "::1", "localhost", "sandbox-webhook.sandbox-webhook.svc"}
	if err := Generate(GenerateOptions{OutDir: dir, Hosts: hosts, Validity: time.Hour}); err != nil {
		t.Fatal(err)
	}
	ca := readCert(t, filepath.Join(dir, CAFile))
	cert := readCert(t, filepath.Join(dir, CertFile))

	if !ca.IsCA || ca.KeyUsage&x509.KeyUsageCertSign == 0 {
		t.Errorf("ca.crt is not a CA certificate: IsCA=%v KeyUsage=%v", ca.IsCA, ca.KeyUsage)
	}
	if cert.IsCA {
		t.Error("tls.crt must not be a CA")
	}
	if _, ok := cert.PublicKey.(*ecdsa.PublicKey); !ok || cert.PublicKey.(*ecdsa.PublicKey).Curve != elliptic.P256() {
		t.Errorf("serving key is %T, want ECDSA P-256", cert.PublicKey)
	}
	if ca.SerialNumber.Cmp(cert.SerialNumber) == 0 {
		t.Error("CA and serving certificate share a serial number")
	}
	if got, want := len(cert.IPAddresses), 2; got != want {
		t.Errorf("IP SANs = %v, want 127.0.0.1 and ::1", cert.IPAddresses)
	}
	if got := strings.Join(cert.DNSNames, ","); got != "localhost,sandbox-webhook.sandbox-webhook.svc" {
		t.Errorf("DNS SANs = %q", got)
	}

	roots := x509.NewCertPool()
	roots.AddCert(ca)
	for _, h := range hosts {
		if _, err := cert.Verify(x509.VerifyOptions{DNSName: h, Roots: roots, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}); err != nil {
			t.Errorf("verify for host %q: %v", h, err)
		}
	}
	if _, err := cert.Verify(x509.VerifyOptions{DNSName: "other.example", Roots: roots}); err == nil {
		t.Error("serving certificate verified for a host it was not issued for")
	}
	// A different run's CA must not vouch for this certificate.
	other := t.TempDir()
	if err := Generate(GenerateOptions{OutDir: other, Hosts: hosts, Validity: time.Hour}); err != nil {
		t.Fatal(err)
	}
	otherRoots := x509.NewCertPool()
	otherRoots.AddCert(readCert(t, filepath.Join(other, CAFile)))
	if _, err := cert.Verify(x509.VerifyOptions{DNSName: "localhost", Roots: otherRoots}); err == nil {
		t.Error("serving certificate verified against another run's CA")
	}
}

func TestGenerateValidityAndFileModes(t *testing.T) {
	dir := t.TempDir()
	now := time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC)
	validity := 720 * time.Hour
	err := Generate(GenerateOptions{OutDir: dir, Hosts: []string{"localhost"}, Validity: validity, Now: func() time.Time { return now }})
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{CAFile, CertFile} {
		c := readCert(t, filepath.Join(dir, name))
		if !c.NotAfter.Equal(now.Add(validity)) {
			t.Errorf("%s NotAfter = %s, want %s", name, c.NotAfter, now.Add(validity))
		}
		if !c.NotBefore.Equal(now.Add(-clockSkew)) {
			t.Errorf("%s NotBefore = %s, want %s", name, c.NotBefore, now.Add(-clockSkew))
		}
	}
	wantModes := map[string]os.FileMode{CAFile: 0o644, CertFile: 0o644, KeyFile: 0o600}
	for name, want := range wantModes {
		fi, err := os.Stat(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		if got := fi.Mode().Perm(); got != want {
			t.Errorf("%s mode = %o, want %o", name, got, want)
		}
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != 3 {
		var names []string
		for _, e := range entries {
			names = append(names, e.Name())
		}
		t.Errorf("output directory holds %v, want only ca.crt, tls.crt, tls.key (no CA key, no temp files)", names)
	}
}

// TestGenerateServesTLS runs a real TLS server on loopback with the generated pair
// and connects with a client that trusts only ca.crt, by IP and by name.
func TestGenerateServesTLS(t *testing.T) {
	dir := t.TempDir()
	if err := Generate(GenerateOptions{OutDir: dir, Hosts: []string{"127.0.0.1", "localhost"}, Validity: time.Hour}); err != nil {
		t.Fatal(err)
	}
	pair, err := tls.LoadX509KeyPair(filepath.Join(dir, CertFile), filepath.Join(dir, KeyFile))
	if err != nil {
		t.Fatal(err)
	}
	ln, err := tls.Listen("tcp", "127.0.0.1:0", &tls.Config{Certificates: []tls.Certificate{pair}, MinVersion: tls.VersionTLS13})
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer conn.Close()
				_, _ = io.WriteString(conn, "ok")
			}()
		}
	}()

	caPEM, err := os.ReadFile(filepath.Join(dir, CAFile))
	if err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(caPEM) {
		t.Fatal("ca.crt holds no certificate")
	}
	for _, serverName := range []string{"127.0.0.1", "localhost"} {
		conn, err := tls.Dial("tcp", ln.Addr().String(), &tls.Config{RootCAs: roots, ServerName: serverName, MinVersion: tls.VersionTLS13})
		if err != nil {
			t.Errorf("handshake as %q: %v", serverName, err)
			continue
		}
		got, err := io.ReadAll(conn)
		conn.Close()
		if err != nil || string(got) != "ok" {
			t.Errorf("read as %q: %q, %v", serverName, got, err)
		}
	}
	// The system roots do not know this CA.
	conn, err := tls.Dial("tcp", ln.Addr().String(), &tls.Config{ServerName: "localhost"})
	if err == nil {
		conn.Close()
		t.Error("handshake succeeded without trusting ca.crt")
	}
}

func TestGenerateRejectsBadOptions(t *testing.T) {
	dir := t.TempDir()
	cases := map[string]struct {
		opts GenerateOptions
		want string
	}{
		"no out dir":   {GenerateOptions{Hosts: []string{"localhost"}, Validity: time.Hour}, "--out-dir is required"},
		"no host":      {GenerateOptions{OutDir: dir, Validity: time.Hour}, "at least one --host"},
		"empty host":   {GenerateOptions{OutDir: dir, Hosts: []string{""}, Validity: time.Hour}, "must not be empty"},
		"url as host":  {GenerateOptions{OutDir: dir, Hosts: []string{"https://x"}, Validity: time.Hour}, "neither an IP address nor a DNS name"},
		"twice":        {GenerateOptions{OutDir: dir, Hosts: []string{"a", "a"}, Validity: time.Hour}, `"a" is given twice`},
		"zero":         {GenerateOptions{OutDir: dir, Hosts: []string{"a"}}, "--validity must be positive"},
		"negative":     {GenerateOptions{OutDir: dir, Hosts: []string{"a"}, Validity: -time.Hour}, "--validity must be positive"},
		"out dir file": {GenerateOptions{OutDir: filepath.Join(dir, "f", "x"), Hosts: []string{"a"}, Validity: time.Hour}, "creating output directory"},
	}
	if err := os.WriteFile(filepath.Join(dir, "f"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			err := Generate(tc.opts)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Generate() error = %v, want it to contain %q", err, tc.want)
			}
		})
	}
}
