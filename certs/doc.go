// Package certs provides the webhook's serving certificate: the offline
// `certs generate` command (a CA and a serving certificate as files, for a
// webhook outside the cluster) and the --cert-mode family of `serve` flags.
//
// Modes (Options.Mode, --cert-mode):
//
//   - files: --cert-dir holds tls.crt and tls.key (a mounted Secret, or `certs
//     generate`); serve's certwatcher reloads them. Needs no RBAC.
//   - cert-manager: cert-manager issues into a Secret mounted at --cert-dir. The
//     server watches its Certificate (--certificate in --namespace) with
//     cert-manager's clientset: readiness check "cert-manager-certificate" passes
//     only while the Certificate has Ready=True; gauges
//     sandbox_webhook_cert_manager_certificate_not_after_timestamp_seconds and
//     sandbox_webhook_cert_manager_certificate_ready follow it; an error-level log
//     with the fix is repeated every minute while it is missing or not Ready, or
//     while --webhook-config (optional) has an empty caBundle (the cainjector
//     race) or is missing.
//   - self-managed: the server keeps its own CA and serving certificate in the
//     Secret --cert-secret, serves it from memory, writes it to --cert-dir (which
//     must be writable: an emptyDir) and keeps the caBundle of --webhook-config in
//     sync, with every replica running; see newSelfManaged for how replicas agree.
//     Readiness checks "cert-rotator" and "cert-secret".
//
// RBAC, exactly what Options.RBAC returns (the envtest suite runs each mode as a
// user holding only these, and fails on any "forbidden"):
//
//	cert-manager   Role in --namespace:
//	                 cert-manager.io certificates, resourceNames [--certificate]: list, watch
//	               ClusterRole, only with --webhook-config:
//	                 admissionregistration.k8s.io mutatingwebhookconfigurations,
//	                 resourceNames [--webhook-config]: list, watch
//	self-managed   Role in --namespace:
//	                 "" secrets: list, watch
//	                 "" secrets, resourceNames [--cert-secret]: update
//	               ClusterRole:
//	                 admissionregistration.k8s.io mutatingwebhookconfigurations: list, watch
//	                 admissionregistration.k8s.io mutatingwebhookconfigurations,
//	                 resourceNames [--webhook-config]: update
//
// No get, create, patch or delete in either mode. In self-managed mode the
// Secret must exist (the chart renders it empty, type Opaque; a kubernetes.io/tls
// Secret would need its keys at creation) and list/watch cannot be narrowed by
// name because cert-controller's cache selects by namespace only.
package certs
