package main

import (
	"strings"
	"testing"
)

const benchOutput = `goos: linux
goarch: amd64
pkg: github.com/sandbox-webhook/sandbox-webhook/internal/admission
cpu: Some CPU
BenchmarkReview/pod=typical/policies=1/path=handler-2   	    2000	    300 ns/op	   9.01 MB/s	  4000 B/op	    40 allocs/op
BenchmarkReview/pod=typical/policies=1/path=floor-2     	    2000	    100 ns/op	  66.65 MB/s	  1000 B/op	    10 allocs/op
BenchmarkReview/pod=typical/policies=1/path=handler-2   	    2000	    500 ns/op	   9.01 MB/s	  4000 B/op	    40 allocs/op
BenchmarkReview/pod=typical/policies=1/path=floor-2     	    2000	    100 ns/op	  66.65 MB/s	  1000 B/op	    10 allocs/op
BenchmarkReview/pod=typical/policies=1/path=handler-2   	    2000	    400 ns/op	   9.01 MB/s	  4000 B/op	    40 allocs/op
BenchmarkReview/pod=typical/policies=1/path=floor-2     	    2000	    200 ns/op	  66.65 MB/s	  1000 B/op	    10 allocs/op
BenchmarkReview/pod=typical/policies=100/path=handler-2 	    2000	    600 ns/op	   9.01 MB/s	  4000 B/op	    40 allocs/op
BenchmarkReview/pod=typical/policies=100/path=floor-2   	    2000	    100 ns/op	  66.65 MB/s	  1000 B/op	    10 allocs/op
BenchmarkReviewRatio/pod=typical/policies=1-2          	    2000	    500 ns/op	  110 floor-ns/op	  330 handler-ns/op	  3.000 handler/floor
BenchmarkReviewRatio/pod=typical/policies=100-2        	    2000	    500 ns/op	  110 floor-ns/op	  330 handler-ns/op	  4.500 handler/floor
BenchmarkPod/typical/policies=1-2                       	    2000	    100 ns/op	  1000 B/op	    10 allocs/op
PASS
`

// TestRatios checks the table: medians of the runs, ratios to the floor of
// the same configuration, and the cost of extra policies.
func TestRatios(t *testing.T) {
	var out strings.Builder
	if err := run(strings.NewReader(benchOutput), &out); err != nil {
		t.Fatal(err)
	}
	got := out.String()
	for _, want := range []string{
		"cpu: Some CPU; median of 3 run(s) each.",
		// median handler 400 over median floor 100
		"| Review/pod=typical/policies=1 | 3.00× | 4.00× | 4.00× | 4.00× | 400 | 100 | 4000 | 1000 | 40 | 10 |",
		"| Review/pod=typical/policies=100 | 4.50× | 6.00× | 4.00× | 4.00× | 600 | 100 | 4000 | 1000 | 40 | 10 |",
		"| Review/pod=typical | 100 vs 1 | 1.50× |",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("output lacks %q:\n%s", want, got)
		}
	}
	if strings.Contains(got, "BenchmarkPod") || strings.Contains(got, "Pod/typical") {
		t.Errorf("a benchmark without a floor variant is listed:\n%s", got)
	}
}

func TestNoPairs(t *testing.T) {
	if err := run(strings.NewReader("BenchmarkPod-2 1 1 ns/op\n"), &strings.Builder{}); err == nil {
		t.Error("no error for input without handler/floor pairs")
	}
}
