// Package e2e tests sandbox-webhook against a real kube-apiserver: the
// sandbox-webhook binary runs as a process with generated certificates and
// the example policies, behind the Helm chart's MutatingWebhookConfiguration
// (rendered with webhook.url pointing at the process), and pods are created
// with client-go. The control plane comes from bin/ (`make tools`); without
// it the suite fails, it never skips. The harness it runs on is package
// harness, shared with `make demo`.
package e2e
