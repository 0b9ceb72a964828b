// Package harness runs sandbox-webhook end to end on one machine: a local
// kube-apiserver and etcd (controller-runtime's envtest, binaries from bin/,
// built by `make tools`), the real sandbox-webhook binary started as a process
// with generated certificates; package chart renders the MutatingWebhookConfiguration
// from the Helm chart with webhook.url pointing at that process. The e2e suite,
// `make demo` and the load generator are built on it.
package harness
