package check

import (
	"cmp"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"maps"
	"net"
	"strings"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"

	"github.com/sandbox-webhook/sandbox-webhook/policy"
)

// Unreachable names a policy's pod selection that no webhook of the
// configurations sends to the webhook.
type Unreachable struct {
	Policy string `json:"policy"`
	// Block is "match" or "match.any[i]".
	Block  string `json:"block"`
	Reason string `json:"reason"`
	Fix    string `json:"fix"`
}

// Reachable checks every policy's pod selection (match, or each match.any
// block) against the webhooks: the smallest pod the selection picks (the
// labels its podSelector requires, in a namespace with the labels its
// namespaceSelector requires) must be sent by some webhook. A selection
// that fails names the webhook selector that stops it.
func Reachable(set *policy.Set, configs []admissionregistrationv1.MutatingWebhookConfiguration) []Unreachable {
	var out []Unreachable
	type block struct {
		name    string
		ns, pod labels.Selector
		names   []string
	}
	for _, p := range set.Policies {
		var blocks []block
		if len(p.Any) == 0 {
			blocks = append(blocks, block{"match", p.NamespaceSelector, p.PodSelector, p.Spec.Match.Namespaces})
		}
		for i, b := range p.Any {
			ns, pod := cmp.Or(b.NamespaceSelector, p.NamespaceSelector), cmp.Or(b.PodSelector, p.PodSelector)
			names := p.Spec.Match.Any[i].Namespaces
			if len(names) == 0 {
				names = p.Spec.Match.Namespaces
			}
			blocks = append(blocks, block{fmt.Sprintf("match.any[%d]", i), ns, pod, names})
		}
		for _, b := range blocks {
			// The pods are those the policy is written for: only the
			// labels it requires. Their namespace may carry any further
			// labels, such as those the webhook's namespaceSelector asks
			// for: namespaces are labelled to opt in.
			policyNS := witness(b.ns)
			if len(b.names) > 0 && !strings.ContainsAny(b.names[0], "*?[") {
				policyNS["kubernetes.io/metadata.name"] = b.names[0]
			}
			var reasons []string
			sent := false
			for _, c := range configs {
				for _, w := range c.Webhooks {
					if SubresourcesOnly(&w) {
						continue
					}
					nsLabels := selectorWitness(w.NamespaceSelector)
					maps.Copy(nsLabels, policyNS)
					// A selection without podSelector takes every pod,
					// those the objectSelector asks for included.
					podLabels := witness(b.pod)
					if b.pod == nil {
						podLabels = selectorWitness(w.ObjectSelector)
					}
					r := reach(&w, nsLabels, podLabels)
					if r == "" {
						sent = true
						break
					}
					reasons = append(reasons, fmt.Sprintf("%s/%s: %s", c.Name, w.Name, r))
				}
			}
			if sent || len(configs) == 0 {
				continue
			}
			out = append(out, Unreachable{
				Policy: p.Name(),
				Block:  b.name,
				Reason: fmt.Sprintf("the pods it selects (labels %s) are never sent to the webhook: %s", cmp.Or(witness(b.pod).String(), "any"), strings.Join(reasons, "; ")),
				Fix:    "set webhook.objectSelector and webhook.namespaceSelector so that they select these pods too (docs/install.md#which-pods-are-mutated-opting-in), or change the policy's match",
			})
		}
	}
	return out
}

// reach says why the webhook does not receive a pod with podLabels in a
// namespace with nsLabels, or "".
func reach(w *admissionregistrationv1.MutatingWebhook, nsLabels, podLabels labels.Set) string {
	for _, s := range []struct {
		what string
		sel  *metav1.LabelSelector
		set  labels.Set
	}{{"namespaceSelector", w.NamespaceSelector, nsLabels}, {"objectSelector", w.ObjectSelector, podLabels}} {
		if s.sel == nil {
			continue
		}
		sel, err := metav1.LabelSelectorAsSelector(s.sel)
		if err != nil {
			return fmt.Sprintf("invalid %s: %v", s.what, err)
		}
		if !sel.Matches(s.set) {
			return fmt.Sprintf("its %s (%s) does not select them", s.what, sel)
		}
	}
	return ""
}

// witness returns the smallest label set a selector requires: its equality
// and In requirements with their first value, and Exists keys with a
// placeholder value. A nil selector requires nothing.
func witness(sel labels.Selector) labels.Set {
	out := labels.Set{}
	if sel == nil {
		return out
	}
	reqs, _ := sel.Requirements()
	for _, r := range reqs {
		switch r.Operator() {
		case selection.Equals, selection.DoubleEquals, selection.In:
			if v, ok := r.Values().PopAny(); ok {
				out[r.Key()] = v
			}
		case selection.Exists:
			out[r.Key()] = "x"
		}
	}
	return out
}

// selectorWitness is the witness of a webhook's label selector; none for
// an invalid one (reach reports it).
func selectorWitness(ls *metav1.LabelSelector) labels.Set {
	sel, err := metav1.LabelSelectorAsSelector(ls)
	if err != nil {
		return labels.Set{}
	}
	return witness(sel)
}

// CAPool parses a caBundle.
func CAPool(caBundle []byte) (*x509.CertPool, []*x509.Certificate, error) {
	if len(caBundle) == 0 {
		return nil, nil, errors.New("the caBundle is empty: the apiserver cannot verify the webhook's certificate")
	}
	pool := x509.NewCertPool()
	var certs []*x509.Certificate
	rest := caBundle
	for {
		var b *pem.Block
		b, rest = pem.Decode(rest)
		if b == nil {
			break
		}
		if b.Type != "CERTIFICATE" {
			continue
		}
		c, err := x509.ParseCertificate(b.Bytes)
		if err != nil {
			return nil, nil, fmt.Errorf("the caBundle holds an invalid certificate: %w", err)
		}
		pool.AddCert(c)
		certs = append(certs, c)
	}
	if len(certs) == 0 {
		return nil, nil, errors.New("the caBundle holds no PEM certificate")
	}
	return pool, certs, nil
}

// Serving is what a webhook endpoint serves.
type Serving struct {
	// Chain is the certificate chain, leaf first.
	Chain []*x509.Certificate
	// Unverified says why the chain does not verify against the caBundle
	// for the server name; nil when it does.
	Unverified error
}

// ServingCert connects to address (host:port) and returns the certificate
// chain the webhook serves and whether it verifies against pool for
// serverName. The error is for an endpoint that cannot be reached.
func ServingCert(ctx context.Context, address, serverName string, pool *x509.CertPool) (Serving, error) {
	d := &tls.Dialer{NetDialer: &net.Dialer{Timeout: 5 * time.Second}, Config: &tls.Config{
		InsecureSkipVerify: true, //nolint:gosec // verified below against the caBundle, to say why it fails
		ServerName:         serverName,
	}}
	conn, err := d.DialContext(ctx, "tcp", address)
	if err != nil {
		return Serving{}, err
	}
	defer conn.Close()
	chain := conn.(*tls.Conn).ConnectionState().PeerCertificates
	if len(chain) == 0 {
		return Serving{Unverified: errors.New("the webhook served no certificate")}, nil
	}
	inter := x509.NewCertPool()
	for _, c := range chain[1:] {
		inter.AddCert(c)
	}
	_, verr := chain[0].Verify(x509.VerifyOptions{Roots: pool, Intermediates: inter, DNSName: serverName})
	return Serving{Chain: chain, Unverified: verr}, nil
}
