// Command demo is `make demo`: a local kube-apiserver and etcd, the
// sandbox-webhook binary in front of them with the example policies, and the
// example pods created through it, with a summary of what was injected into
// each. It keeps running, with a kubeconfig to explore it, until Ctrl-C;
// --once stops everything after the summary.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	var o options
	fs := flag.NewFlagSet("demo", flag.ContinueOnError)
	fs.BoolVar(&o.once, "once", false, "stop everything and exit after printing the summary")
	fs.StringVar(&o.dir, "dir", "", "where the kubeconfig, logs and pod YAML go (default <repo>/_output/demo)")
	fs.StringVar(&o.webhook, "webhook", "", "the sandbox-webhook binary (default <repo>/bin/sandbox-webhook)")
	fs.StringVar(&o.assets, "assets", "", "directory holding kube-apiserver and etcd (default <repo>/bin)")
	if err := fs.Parse(os.Args[1:]); err != nil {
		os.Exit(2)
	}
	// kube-apiserver and etcd run in their own process groups and outlive
	// this process unless it stops them: a closed terminal or a closed
	// output pipe (make demo | head) must end in that cleanup too, not in
	// death by signal.
	signal.Ignore(syscall.SIGPIPE)
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM, syscall.SIGHUP)
	defer stop()
	if err := run(ctx, o, os.Stdout); err != nil {
		fmt.Fprintf(os.Stderr, "demo: %v\n", err)
		stop()
		os.Exit(1)
	}
}
