package admission

import (
	"errors"
	"testing"

	"github.com/go-logr/logr"
	"github.com/go-logr/logr/funcr"
)

// TestDeferredValuesWriteWhatWithValuesWrites: every line written through
// withDeferredValues is the line log.WithValues writes, the caller
// included, whatever comes after (more values, a name, a call depth, a
// level).
func TestDeferredValuesWriteWhatWithValuesWrites(t *testing.T) {
	var lines []string
	log := funcr.New(func(prefix, args string) { lines = append(lines, prefix+" "+args) },
		funcr.Options{Verbosity: 1, LogCaller: funcr.All})
	kv := []any{"uid", "u-1", "namespace", "sandboxes"}
	for name, write := range map[string]func(logr.Logger){
		"info":       func(l logr.Logger) { l.Info("decision", "outcome", "mutated") },
		"error":      func(l logr.Logger) { l.Error(errors.New("boom"), "failed", "code", 400) },
		"v1":         func(l logr.Logger) { l.V(1).Info("decision") },
		"values":     func(l logr.Logger) { l.WithValues("pod", "sandboxes/p").WithValues("policySet", "h").Info("decision") },
		"name":       func(l logr.Logger) { l.WithName("admission").WithValues("pod", "p").Error(nil, "failed") },
		"call depth": func(l logr.Logger) { helperLine(l.WithCallDepth(1)) },
	} {
		lines = nil
		write(log.WithValues(kv...))
		write(withDeferredValues(log, kv...))
		if len(lines) != 2 || lines[0] != lines[1] {
			t.Errorf("%s: WithValues wrote, then withDeferredValues:\n%q", name, lines)
		}
	}
}

func helperLine(l logr.Logger) { l.Info("from a helper") }

// TestDeferredValuesAreGivenOnlyToLinesWritten: a logger that writes
// nothing (a level above its verbosity) never hands its sink the values.
func TestDeferredValuesAreGivenOnlyToLinesWritten(t *testing.T) {
	var lines []string
	sink := &countingSink{LogSink: funcr.New(func(prefix, args string) { lines = append(lines, args) }, funcr.Options{}).GetSink()}
	log := withDeferredValues(logr.New(sink), "uid", "u-1").WithValues("pod", "p")
	log.V(1).Info("decision", "outcome", "mutated")
	if sink.withValues != 0 || len(lines) != 0 {
		t.Fatalf("a line above the verbosity: %d calls of WithValues, lines %q; want none", sink.withValues, lines)
	}
	log.Error(errors.New("boom"), "failed")
	if sink.withValues != 1 || len(lines) != 1 {
		t.Fatalf("an error: %d calls of WithValues, lines %q; want one of each", sink.withValues, lines)
	}
	if want := `"msg"="failed" "error"="boom" "uid"="u-1" "pod"="p"`; lines[0] != want {
		t.Errorf("line %s, want %s", lines[0], want)
	}
	if got := withDeferredValues(logr.Discard(), "uid", "u-1"); got.GetSink() != nil {
		t.Errorf("logr.Discard() with deferred values has a sink: %T", got.GetSink())
	}
}

type countingSink struct {
	logr.LogSink
	withValues int
}

func (c *countingSink) WithValues(kv ...any) logr.LogSink {
	c.withValues++
	return c.LogSink.WithValues(kv...)
}
