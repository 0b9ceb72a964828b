// Package node runs sandbox-webhook's pods on a real node: the local
// kube-apiserver and etcd of the e2e suite, the webhook in front of them, and
// containerd with a kubelet registered as a node, all local processes (see
// harness.StartNode). Its tests check from inside and outside the running
// containers what a sandbox pod actually gets, and measure the memory cgroups
// that pod churn leaves behind in memory and in disk (leak-mitigation) mode.
//
// The tests need root, cgroup v1 with the memory controller, and the tools
// of hack/node-tools.sh; they are built only with the nodee2e tag:
//
//	make node-e2e
package node
