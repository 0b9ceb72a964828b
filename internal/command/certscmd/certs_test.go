package certscmd

import (
	"bytes"
	"crypto/x509"
	"encoding/pem"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sandbox-webhook/sandbox-webhook/certs"
)

func TestGenerateCommand(t *testing.T) {
	dir := t.TempDir()
	cmd := NewCommand()
	var out bytes.Buffer
	cmd.SetOut(&out)
	cmd.SetErr(&out)
	cmd.SetArgs([]string{"generate", "--out-dir", dir, "--host", "127.0.0.1", "--host", "webhook.example", "--validity", "48h"})
	before := time.Now().Truncate(time.Second)
	if err := cmd.Execute(); err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	after := time.Now()
	cert := readCert(t, filepath.Join(dir, certs.CertFile))
	if cert.NotAfter.Before(before.Add(48*time.Hour)) || cert.NotAfter.After(after.Add(48*time.Hour)) {
		t.Errorf("NotAfter = %s, want now+48h (between %s and %s)", cert.NotAfter, before.Add(48*time.Hour), after.Add(48*time.Hour))
	}
	if len(cert.IPAddresses) != 1 || !cert.IPAddresses[0].Equal(net.ParseIP("127.0.0.1")) || len(cert.DNSNames) != 1 || cert.DNSNames[0] != "webhook.example" {
		t.Errorf("SANs = %v %v", cert.IPAddresses, cert.DNSNames)
	}
	if !strings.Contains(out.String(), "wrote ca.crt, tls.crt and tls.key to "+dir) {
		t.Errorf("output = %q", out.String())
	}

	cmd = NewCommand()
	cmd.SetOut(io.Discard)
	cmd.SetErr(io.Discard)
	cmd.SetArgs([]string{"generate", "--out-dir", dir})
	if err := cmd.Execute(); err == nil || !strings.Contains(err.Error(), "at least one --host") {
		t.Errorf("without --host: error = %v", err)
	}
}

func readCert(t *testing.T, path string) *x509.Certificate {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	block, _ := pem.Decode(raw)
	if block == nil {
		t.Fatalf("%s: no PEM block", path)
	}
	cert, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	return cert
}
