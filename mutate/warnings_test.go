package mutate

import (
	"fmt"
	"reflect"
	"strings"
	"testing"
)

func TestClientWarnings(t *testing.T) {
	long := strings.Repeat("é", 300)
	got := clientWarnings([]string{"a\nb\tc", "a\nb\tc", "bad \xff utf8", long, ""})
	want := []string{"a b c", "bad \uFFFD utf8", strings.Repeat("é", 255) + "…"}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got %q\nwant %q", got, want)
	}
	var many []string
	for i := range 100 {
		many = append(many, fmt.Sprintf("warning %03d %s", i, strings.Repeat("x", 100)))
	}
	got = clientWarnings(many)
	total := 0
	for _, w := range got {
		total += len([]rune(w))
	}
	if total > maxTotalWarningRunes {
		t.Errorf("%d runes of warnings, the API server truncates above %d", total, maxTotalWarningRunes)
	}
	if last := got[len(got)-1]; !strings.Contains(last, "more warnings not shown") {
		t.Errorf("last warning = %q", last)
	}
	if clientWarnings(nil) != nil {
		t.Error("no warnings should stay nil")
	}
}
