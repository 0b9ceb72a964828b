// Package serve is the serve command: it turns flags, environment variables
// and a config file into server.Options and runs the admission server.
package serve

import (
	"cmp"
	"crypto/tls"
	"fmt"
	"maps"
	"os"
	"os/signal"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/klog/v2"
	"sigs.k8s.io/controller-runtime/pkg/client/config"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/yaml"

	"github.com/sandbox-webhook/sandbox-webhook/certs"
	"github.com/sandbox-webhook/sandbox-webhook/internal/flags"
	"github.com/sandbox-webhook/sandbox-webhook/internal/server"
	"github.com/sandbox-webhook/sandbox-webhook/mutate"
	"github.com/sandbox-webhook/sandbox-webhook/policy"
)

// flagValues are the serve flags: those server.Options holds as given, and
// those it holds parsed.
type flagValues struct {
	server.Options
	config           string
	kubeconfig       string
	tlsMinVersion    string
	maxRequestBytes  string
	maxBufferedBytes string
	logLevel         string
}

// NewCommand returns the `serve` command, with the certificate flags of
// certOpts (certs.NewOptions() when nil), which it fills.
func NewCommand(certOpts *certs.Options) *cobra.Command {
	certOpts = cmp.Or(certOpts, certs.NewOptions())
	v := &flagValues{Options: server.Options{LeakMitigation: mutate.LeakMitigationPolicy}}
	cmd := &cobra.Command{
		Use:   "serve",
		Short: "Run the mutating admission webhook for sandbox pods",
		Long: `Run the mutating admission webhook. At every pod CREATE the API server sends
to /mutate-v1-pod, it applies the policies from --policy and answers with a
JSONPatch; every other request is allowed unchanged.

Policy files and the --leak-mitigation-file are watched: a valid change is
swapped in atomically, an invalid one is logged in full, counted in
sandbox_webhook_policy_reload_errors_total and shown on /status of the health
port, and the last good configuration keeps serving.

Every flag can also be set by an environment variable, SANDBOX_WEBHOOK_ and the
flag name in upper snake case (SANDBOX_WEBHOOK_LEAK_MITIGATION=on; lists are
comma-separated, as on the command line), or in a YAML --config file whose keys
are the long flag names (leak-mitigation: "on"; lists as YAML lists). A flag wins over the environment,
the environment over the config file.

Health port: /healthz, /readyz (certificate loaded, policies loaded, namespace
cache synced, not shutting down) and /status (JSON: the serving policy set and
the errors of the last rejected reload). Metrics port: /metrics.

On SIGTERM the server turns not ready and closes keep-alive connections after
each response, keeps answering for --shutdown-delay, then stops accepting,
leaves clients up to --idle-drain to close their idle connections and drains
in-flight requests; a second signal exits at once. Request heads must arrive
within 10s and idle keep-alive connections close after 120s, after the API
server's own 90s, so that the client closes them.`,
		Example: `  sandbox-webhook serve --policy /etc/sandbox-webhook/policies --cert-dir /tls \
      --leak-mitigation-file /etc/sandbox-webhook/policies/leakMitigation`,
		Args:         cobra.NoArgs,
		SilenceUsage: true,
		RunE: func(cmd *cobra.Command, _ []string) error {
			// Bad flags, environment or config file are usage errors,
			// reported before anything is looked up.
			usage := cmd.FlagErrorFunc()
			if err := resolveFlags(cmd.Flags(), os.LookupEnv); err != nil {
				return usage(cmd, err)
			}
			if len(v.PolicyPaths) == 0 {
				return usage(cmd, fmt.Errorf("--policy is required (or $%s, or the policy key of --config)", EnvVar("policy")))
			}
			log, err := server.NewLogger(v.logLevel, cmd.ErrOrStderr())
			if err != nil {
				return usage(cmd, fmt.Errorf("%s: %w", flagSource(cmd.Flags(), "log-level"), err))
			}
			opts, err := v.options(cmd.Flags())
			if err != nil {
				return usage(cmd, err)
			}
			logf.SetLogger(log)
			klog.SetLogger(log.WithName("client-go"))
			opts.Logger = log
			if opts.RESTConfig, err = restConfig(v.kubeconfig); err != nil {
				return err
			}
			ctx, stop := signal.NotifyContext(cmd.Context(), syscall.SIGTERM, os.Interrupt)
			defer stop()
			// After the first signal, restore the default handling: a
			// second SIGTERM or Ctrl-C ends the process at once.
			go func() {
				<-ctx.Done()
				stop()
			}()
			opts.Certificates = certOpts
			return server.Run(ctx, opts)
		},
	}

	fs := cmd.Flags()
	fs.SortFlags = false
	fs.StringVar(&v.config, "config", "", "YAML file with defaults for these flags; keys are the long flag names")
	flags.Policy(fs, &v.PolicyPaths, "; reloaded on change")
	flags.AllowEmptyPolicies(fs, &v.AllowEmptyPolicies)
	flags.LeakMitigation(fs, &v.LeakMitigation, "")
	fs.StringVar(&v.LeakMitigationFile, "leak-mitigation-file", "", "file holding on, off or policy; reloaded on change; wins over --leak-mitigation")
	fs.StringVar(&v.CertDir, "cert-dir", "/tmp/k8s-webhook-server/serving-certs", "directory with tls.crt and tls.key; reloaded on change")
	fs.StringVar(&v.BindAddress, "bind-address", "0.0.0.0", "address the webhook listens on")
	fs.IntVar(&v.Port, "port", 9443, "HTTPS port of the webhook; the path is /mutate-v1-pod")
	fs.StringVar(&v.MetricsBindAddress, "metrics-bind-address", ":8080", "address of the Prometheus /metrics endpoint; 0 disables it")
	fs.StringVar(&v.HealthProbeBindAddress, "health-probe-bind-address", ":8081", "address of /healthz, /readyz and /status; 0 disables it")
	fs.StringVar(&v.kubeconfig, "kubeconfig", "", "kubeconfig file for reading namespaces; default: $KUBECONFIG, else the in-cluster config, else ~/.kube/config")
	flags.AllowedHostPath(fs, &v.AllowedHostPaths)
	flags.ExcludeNamespace(fs, &v.ExcludeNamespaces, "; default: $POD_NAMESPACE when set")
	fs.BoolVar(&v.StatusAlways, "status-always", false, "status annotation on every pod answered, so a guard can refuse a pod no call answered")
	fs.StringVar(&v.tlsMinVersion, "tls-min-version", "1.3", "minimum TLS version: 1.2 (ECDHE AEAD cipher suites only) or 1.3")
	fs.StringVar(&v.maxRequestBytes, "max-request-bytes", "3Mi", "largest AdmissionReview accepted, in bytes or as a quantity (3Mi); larger requests get HTTP 413; below 7Mi")
	fs.StringVar(&v.maxBufferedBytes, "max-buffered-bytes", "32Mi", "request body bytes held at once, counted before reading; bodies over 64Ki share 3/4 of it; no room within 2s: HTTP 503")
	fs.IntVar(&v.MaxInFlight, "max-in-flight", 256, "requests read or answered at once; no room within 2s: HTTP 503")
	fs.IntVar(&v.MaxConnections, "max-connections", 1024, "connections the webhook port holds open at once; one more is closed when accepted")
	fs.IntVar(&v.MaxConnectionsPerSource, "max-connections-per-source", 1024, "connections the webhook port holds open at once from one source IP; at most --max-connections")
	fs.StringVar(&v.logLevel, "log-level", "info", "info, or debug for a line per admission decision; JSON on stderr")
	fs.DurationVar(&v.ReadTimeout, "read-timeout", 10*time.Second, "time allowed to read a request body")
	fs.DurationVar(&v.WriteTimeout, "write-timeout", 30*time.Second, "time allowed for a request, from its start to the end of the response")
	fs.DurationVar(&v.ShutdownDelay, "shutdown-delay", 5*time.Second, "on SIGTERM, how long to keep answering, not ready, before closing the listener")
	fs.DurationVar(&v.IdleDrain, "idle-drain", 95*time.Second, "after --shutdown-delay, how long clients may take to close idle keep-alive connections")
	fs.DurationVar(&v.ReloadInterval, "reload-interval", 30*time.Second, "how often policy and leak-mitigation files are re-read even without a file event")
	certificateFlags(fs, certOpts)
	return cmd
}

// options turns the resolved flags into server.Options.
func (v *flagValues) options(fs *pflag.FlagSet) (server.Options, error) {
	o := v.Options
	if err := policy.CheckAllowedHostPaths(o.AllowedHostPaths); err != nil {
		return o, err
	}
	switch v.tlsMinVersion {
	case "1.2":
		o.TLSMinVersion = tls.VersionTLS12
	case "1.3":
		o.TLSMinVersion = tls.VersionTLS13
	default:
		return o, fmt.Errorf("%s %q: must be 1.2 or 1.3", flagSource(fs, "tls-min-version"), v.tlsMinVersion)
	}
	q, err := resource.ParseQuantity(v.maxRequestBytes)
	if err != nil {
		return o, fmt.Errorf("%s %q: must be a number of bytes or a quantity such as 3Mi", flagSource(fs, "max-request-bytes"), v.maxRequestBytes)
	}
	o.MaxRequestBytes = q.Value()
	if o.MaxRequestBytes <= 0 {
		return o, fmt.Errorf("%s %q: must be positive", flagSource(fs, "max-request-bytes"), v.maxRequestBytes)
	}
	if v.maxBufferedBytes != "" {
		if q, err = resource.ParseQuantity(v.maxBufferedBytes); err != nil || q.Value() <= 0 {
			return o, fmt.Errorf("--max-buffered-bytes %q: must be a positive number of bytes or a quantity such as 32Mi", v.maxBufferedBytes)
		}
		o.MaxBufferedBytes = q.Value()
	}
	if o.MaxInFlight < 0 {
		return o, fmt.Errorf("--max-in-flight %d: must be positive", o.MaxInFlight)
	}
	if !fs.Changed("exclude-namespace") {
		if ns := os.Getenv("POD_NAMESPACE"); ns != "" {
			o.ExcludeNamespaces = []string{ns}
		}
	}
	return o, nil
}

// resolveFlags fills every flag not given on the command line from its
// environment variable, then from the --config file.
func resolveFlags(fs *pflag.FlagSet, lookupEnv func(string) (string, bool)) error {
	var errs []string
	fs.VisitAll(func(f *pflag.Flag) {
		if f.Changed || f.Name == "help" {
			return
		}
		env := EnvVar(f.Name)
		if val, ok := lookupEnv(env); ok {
			if err := fs.Set(f.Name, val); err != nil {
				errs = append(errs, fmt.Sprintf("%s=%q: %v", env, val, err))
			}
			_ = fs.SetAnnotation(f.Name, sourceAnnotation, []string{"$" + env})
		}
	})
	if len(errs) > 0 {
		return fmt.Errorf("invalid environment: %s", strings.Join(errs, "; "))
	}
	path, err := fs.GetString("config")
	if err != nil || path == "" {
		return nil
	}
	raw, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("reading --config: %w", err)
	}
	return applyConfig(fs, path, raw)
}

// applyConfig sets the flags not set yet from a YAML map of long flag names.
func applyConfig(fs *pflag.FlagSet, path string, raw []byte) error {
	var values map[string]any
	if err := yaml.UnmarshalStrict(raw, &values); err != nil {
		return fmt.Errorf("--config %s: %w", path, err)
	}
	var errs []string
	for _, k := range slices.Sorted(maps.Keys(values)) {
		f := fs.Lookup(k)
		if f == nil || k == "config" || k == "help" {
			errs = append(errs, fmt.Sprintf("unknown key %q (keys are the long flag names of serve)", k))
			continue
		}
		if f.Changed {
			continue
		}
		list, isList := values[k].([]any)
		if !isList {
			list = []any{values[k]}
		}
		for _, item := range list {
			s, err := scalar(item)
			if err == nil {
				err = fs.Set(k, s)
			}
			if err != nil {
				errs = append(errs, fmt.Sprintf("%s: %v", k, err))
				break
			}
		}
		_ = fs.SetAnnotation(f.Name, sourceAnnotation, []string{"key " + k + " of --config " + path})
	}
	if len(errs) > 0 {
		return fmt.Errorf("--config %s: %s", path, strings.Join(errs, "; "))
	}
	return nil
}

func scalar(v any) (string, error) {
	switch v := v.(type) {
	case string:
		return v, nil
	case bool:
		return strconv.FormatBool(v), nil
	case float64:
		return strconv.FormatFloat(v, 'f', -1, 64), nil
	case int64:
		return strconv.FormatInt(v, 10), nil
	case nil:
		return "", fmt.Errorf("no value")
	}
	return "", fmt.Errorf("a string, number or boolean is expected, not %T", v)
}

// sourceAnnotation records on a flag where a value that did not come from
// the command line came from, for error messages.
const sourceAnnotation = "sandbox-webhook.io/source"

// flagSource names a flag in an error about its value: "--port", or
// "--port (from $SANDBOX_WEBHOOK_PORT)" when the environment or the config
// file set it, so that the message points at what to fix.
func flagSource(fs *pflag.FlagSet, name string) string {
	if f := fs.Lookup(name); f != nil {
		if src := f.Annotations[sourceAnnotation]; len(src) == 1 {
			return "--" + name + " (from " + src[0] + ")"
		}
	}
	return "--" + name
}

// EnvVar returns the environment variable of a serve flag:
// --leak-mitigation is SANDBOX_WEBHOOK_LEAK_MITIGATION.
func EnvVar(flag string) string {
	return "SANDBOX_WEBHOOK_" + strings.ToUpper(strings.ReplaceAll(flag, "-", "_"))
}

// restConfig is --kubeconfig, else controller-runtime's default: $KUBECONFIG,
// else the in-cluster config, else ~/.kube/config.
func restConfig(kubeconfig string) (*rest.Config, error) {
	var cfg *rest.Config
	var err error
	if kubeconfig != "" {
		cfg, err = clientcmd.BuildConfigFromFlags("", kubeconfig)
	} else {
		cfg, err = config.GetConfig()
	}
	if err != nil {
		return nil, fmt.Errorf("finding the Kubernetes client configuration (--kubeconfig, $KUBECONFIG, in-cluster): %w", err)
	}
	cfg.UserAgent = "sandbox-webhook"
	return cfg, nil
}
