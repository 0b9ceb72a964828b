package plugincmd

import (
	"bytes"
	"os"
	"strings"
	"testing"

	"github.com/sandbox-webhook/sandbox-webhook/internal/command"
)

// TestPluginName: installed as kubectl-sandbox_webhook, usage lines say
// "kubectl sandbox-webhook"; under any other name they say the command's.
func TestPluginName(t *testing.T) {
	for argv0, want := range map[string]string{
		"/usr/local/bin/kubectl-sandbox_webhook": "kubectl sandbox-webhook",
		`C:\bin\kubectl-sandbox_webhook.exe`:     "",
		"kubectl-sandbox_webhook.exe":            "kubectl sandbox-webhook",
		"/usr/local/bin/sandbox-webhook":         "",
	} {
		if got := pluginDisplayName(argv0); got != want {
			t.Errorf("pluginDisplayName(%q) = %q, want %q", argv0, got, want)
		}
	}

	// As kubectl runs the plugin: the name is the command's own doing,
	// every subcommand's included.
	argv0 := os.Args[0]
	os.Args[0] = "/usr/local/bin/kubectl-sandbox_webhook"
	defer func() { os.Args[0] = argv0 }()
	var out bytes.Buffer
	root := NewCommand(command.IOStreams{Out: &out, ErrOut: &out})
	root.SetArgs([]string{"check", "--help"})
	if err := root.Execute(); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "Usage:\n  kubectl sandbox-webhook check (pod NAME") {
		t.Errorf("the plugin's usage does not name it kubectl sandbox-webhook:\n%s", out.String())
	}
	if !strings.Contains(out.String(), "Examples:\n  kubectl sandbox-webhook check pod ") || strings.Contains(out.String(), PluginBinary) {
		t.Errorf("the plugin's examples do not name it kubectl sandbox-webhook:\n%s", out.String())
	}
}
