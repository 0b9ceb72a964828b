package certs

import (
	"strings"
	"testing"

	rbacv1 "k8s.io/api/rbac/v1"
)

func TestOptionsRBAC(t *testing.T) {
	files := &Options{Mode: ModeFiles}
	if r, c := files.RBAC(); len(r) != 0 || len(c) != 0 {
		t.Errorf("files mode needs no RBAC, got %v %v", r, c)
	}
	cm := &Options{Mode: ModeCertManager, Namespace: "ns", Certificate: "crt"}
	if r, c := cm.RBAC(); len(r) != 1 || len(c) != 0 || r[0].ResourceNames[0] != "crt" {
		t.Errorf("cert-manager without --webhook-config: %v %v", r, c)
	}
	cm.WebhookConfig = "mwc"
	if _, c := cm.RBAC(); len(c) != 1 || c[0].ResourceNames[0] != "mwc" || strings.Join(c[0].Verbs, ",") != "list,watch" {
		t.Errorf("cert-manager with --webhook-config: %v", c)
	}
	sm := &Options{Mode: ModeSelfManaged, Namespace: "ns", Secret: "s", WebhookConfig: "mwc", ServiceName: "svc"}
	r, c := sm.RBAC()
	for _, rules := range [][]string{verbs(r), verbs(c)} {
		for _, v := range rules {
			if v == "create" || v == "delete" || v == "patch" || v == "get" || v == "*" {
				t.Errorf("self-managed asks for %q", v)
			}
		}
	}
}

func verbs(rules []rbacv1.PolicyRule) []string {
	var out []string
	for _, r := range rules {
		out = append(out, r.Verbs...)
	}
	return out
}
