// Package mapexport compiles SandboxPolicies to native
// admissionregistration.k8s.io/v1 MutatingAdmissionPolicies and their
// bindings (Kubernetes 1.36+), which make the apiserver store the pods the
// webhook gives, field for field, status annotation included; it reports
// what CEL cannot reproduce as gaps. The export-map command is
// internal/command/exportmap.
//
// Running exported policies offline, with the apiserver's own
// MutatingAdmissionPolicy code, is package maprun's: this package does not
// import k8s.io/apiserver, so a binary that links it for export-map does
// not carry the apiserver's CEL and admission code.
package mapexport
