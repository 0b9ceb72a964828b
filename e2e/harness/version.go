package harness

// KubeVersion is the Kubernetes version the chart is rendered for: the one
// e2e/tools pins for the control plane.
const KubeVersion = "v1.37.2"
