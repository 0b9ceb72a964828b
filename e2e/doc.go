// Package e2e tests sandbox-webhook against a real kube-apiserver: the
// server binary, built as the container image's (cmd/webhook, make
// build-server), runs as a process with certificates from `certs generate`
// and the example policies, behind the Helm chart's own
// MutatingWebhookConfiguration (rendered with webhook.url pointing at the
// process), and pods are created with client-go. Its harness (package
// harness) is shared with `make demo`.
//
// Run it with `make test` or `make e2e`, or `go test .` in e2e/ (a module
// of its own) once `make tools` has built kube-apiserver and etcd into bin/ (envtest's
// KUBEBUILDER_ASSETS layout); without them the suite fails, it never skips.
// The control plane has no scheduler, kubelet or controller-manager: pods are
// admitted and stored, never run.
//
// Each test starts its own webhook process and configuration, whose
// namespaceSelector requires the label e2e.sandbox-webhook.io/instance=<test>
// on top of the chart's exclusions, so tests never see each other's webhooks.
// Policies and the leak-mitigation switch live in directories laid out like
// mounted ConfigMaps and change by symlink swap, as they do in a cluster.
//
// The burst case writes its latency report to $E2E_REPORT, default
// _output/e2e-burst.txt.
package e2e
