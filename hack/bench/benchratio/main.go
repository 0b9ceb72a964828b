// Command benchratio reads `go test -bench -benchmem` output on stdin and
// prints, as a markdown table, every benchmark that has a path=handler and
// a path=floor variant (gobench's BenchmarkReview) as ratios to its floor:
// time, bytes and allocations per operation, then the raw numbers. With
// -count above 1 each figure is the median of its runs. Ratios are computed
// from numbers of one run, so they survive a noisy machine better than the
// absolute figures.
//
//	go test -run '^$' -bench BenchmarkReview -benchmem -count 5 ./gobench | go run ./benchratio   # in hack/bench
package main

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

func main() {
	if err := run(os.Stdin, os.Stdout); err != nil {
		fmt.Fprintf(os.Stderr, "benchratio: %v\n", err)
		os.Exit(1)
	}
}

// sample is one benchmark line's figures.
type sample struct{ ns, bytes, allocs, ratio float64 }

type series struct {
	ns, bytes, allocs, ratio []float64
}

func (s *series) add(x sample) {
	s.ns = append(s.ns, x.ns)
	s.bytes = append(s.bytes, x.bytes)
	s.allocs = append(s.allocs, x.allocs)
	s.ratio = append(s.ratio, x.ratio)
}

func median(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	s := slices.Clone(v)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

var (
	lineRE = regexp.MustCompile(`^(Benchmark\S+?)(?:-\d+)?\s+\d+\s+(.*)$`)
	pathRE = regexp.MustCompile(`/path=(handler|floor)`)
	// policiesRE splits a name into what precedes and follows policies=N.
	policiesRE = regexp.MustCompile(`^(.*)/policies=(\d+)(.*)$`)
)

// parse reads benchmark lines into series by name (GOMAXPROCS suffix cut).
func parse(r io.Reader) (map[string]*series, []string, []string, error) {
	out := map[string]*series{}
	var order, header []string
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		for _, h := range []string{"goos:", "goarch:", "cpu:"} {
			if strings.HasPrefix(line, h) && !slices.Contains(header, line) {
				header = append(header, line)
			}
		}
		m := lineRE.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		f := strings.Fields(m[2])
		var x sample
		for i := 0; i+1 < len(f); i += 2 {
			v, err := strconv.ParseFloat(f[i], 64)
			if err != nil {
				continue
			}
			switch f[i+1] {
			case "ns/op":
				x.ns = v
			case "B/op":
				x.bytes = v
			case "allocs/op":
				x.allocs = v
			case "handler/floor":
				x.ratio = v
			}
		}
		if out[m[1]] == nil {
			out[m[1]] = &series{}
			order = append(order, m[1])
		}
		out[m[1]].add(x)
	}
	return out, order, header, sc.Err()
}

func run(in io.Reader, w io.Writer) error {
	all, order, header, err := parse(in)
	if err != nil {
		return err
	}
	type row struct {
		name           string
		handler, floor *series
		// interleaved is the <Name>Ratio benchmark of the pair, if any.
		interleaved *series
	}
	var rows []row
	seen := map[string]bool{}
	for _, name := range order {
		if !pathRE.MatchString(name) {
			continue
		}
		base := pathRE.ReplaceAllString(name, "")
		if seen[base] {
			continue
		}
		seen[base] = true
		h, f := all[pathRE.ReplaceAllString(name, "/path=handler")], all[pathRE.ReplaceAllString(name, "/path=floor")]
		if h == nil || f == nil {
			continue
		}
		bench, rest, _ := strings.Cut(base, "/")
		rows = append(rows, row{base, h, f, all[bench+"Ratio/"+rest]})
	}
	if len(rows) == 0 {
		return fmt.Errorf("no benchmark with both a path=handler and a path=floor variant in the input")
	}
	r := func(a, b float64) string {
		if b == 0 {
			return "n/a"
		}
		return fmt.Sprintf("%.2f×", a/b)
	}
	fmt.Fprintf(w, "%s; median of %d run(s) each.\n\n", strings.Join(header, ", "), len(rows[0].handler.ns))
	fmt.Fprintln(w, "*time / floor* is measured interleaved (one review through each per iteration, so both see the same load) when a …Ratio benchmark ran; *separate* divides the two benchmarks' own times.")
	fmt.Fprintln(w)
	fmt.Fprintln(w, "| benchmark | time / floor | time / floor, separate | B/op / floor | allocs/op / floor | handler ns/op | floor ns/op | handler B/op | floor B/op | handler allocs/op | floor allocs/op |")
	fmt.Fprintln(w, "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
	timeRatio := map[string]float64{}
	for _, x := range rows {
		hn, fn := median(x.handler.ns), median(x.floor.ns)
		hb, fb := median(x.handler.bytes), median(x.floor.bytes)
		ha, fa := median(x.handler.allocs), median(x.floor.allocs)
		tr, interleaved := hn/fn, "—"
		if x.interleaved != nil {
			tr = median(x.interleaved.ratio)
			interleaved = fmt.Sprintf("%.2f×", tr)
		}
		timeRatio[x.name] = tr
		fmt.Fprintf(w, "| %s | %s | %s | %s | %s | %.0f | %.0f | %.0f | %.0f | %.0f | %.0f |\n",
			strings.TrimPrefix(x.name, "Benchmark"), interleaved, r(hn, fn), r(hb, fb), r(ha, fa), hn, fn, hb, fb, ha, fa)
	}
	scaling(w, func(yield func(name string, ratio float64) bool) {
		for _, x := range rows {
			if !yield(x.name, timeRatio[x.name]) {
				return
			}
		}
	})
	return nil
}

// scaling prints, for benchmarks named …/policies=N…, how the time ratio
// at each N compares with the smallest N: the cost of the extra policies,
// each measured against its own floor.
func scaling(w io.Writer, ratios func(func(string, float64) bool)) {
	type point struct {
		n     int
		ratio float64
	}
	groups := map[string][]point{}
	var order []string
	for name, ratio := range ratios {
		m := policiesRE.FindStringSubmatch(name)
		if m == nil {
			continue
		}
		n, _ := strconv.Atoi(m[2])
		key := m[1] + m[3]
		if groups[key] == nil {
			order = append(order, key)
		}
		groups[key] = append(groups[key], point{n, ratio})
	}
	if len(order) == 0 {
		return
	}
	fmt.Fprintln(w, "\nTime ratio at N policies over the time ratio at the fewest policies (1.00× = no cost from the non-matching policies):")
	fmt.Fprintln(w)
	fmt.Fprintln(w, "| benchmark | policies | relative to the fewest |")
	fmt.Fprintln(w, "|---|---:|---:|")
	for _, key := range order {
		ps := groups[key]
		slices.SortFunc(ps, func(a, b point) int { return a.n - b.n })
		for _, p := range ps[1:] {
			fmt.Fprintf(w, "| %s | %d vs %d | %.2f× |\n", strings.TrimPrefix(key, "Benchmark"), p.n, ps[0].n, p.ratio/ps[0].ratio)
		}
	}
}
