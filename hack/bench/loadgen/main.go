// Command loadgen measures the real `sandbox-webhook serve` process on
// loopback: how long it takes from process start to ready, and what it
// sustains under AdmissionReview load over keep-alive TLS connections at
// several concurrencies, next to a bare TLS server that answers every
// review with a fixed response (the floor). Both servers run as separate
// processes, are driven by the same client in the same run, and their peak
// RSS is read from /proc. Request counts and durations are bounded.
//
//	go run ./hack/bench/loadgen --binary bin/sandbox-webhook --out _output/bench/load.md
//
// The webhook needs a namespace cache, so loadgen starts kube-apiserver and
// etcd from --assets (make tools), as the e2e suite does.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:])
	stop()
	if err != nil {
		fmt.Fprintf(os.Stderr, "loadgen: %v\n", err)
		os.Exit(1)
	}
}
