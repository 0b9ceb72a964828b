package kyvernoimport

import (
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/sandbox-webhook/sandbox-webhook/internal/imageref"
	"github.com/sandbox-webhook/sandbox-webhook/policy"
)

// placement is the runtime placement one rule, or the rules of one match,
// give a pod: its runtimeClassName, tolerations and nodeSelector entries,
// each with what Kyverno does when the pod sets its own.
type placement struct {
	className     string
	classConflict policy.ConflictAction
	tolerations   []policy.Toleration
	nodeSelector  map[string]string
	keyConflict   map[string]policy.ConflictAction
	paths         map[string]*field.Path // by "className" or "nodeSelector/KEY"
}

func (p *placement) empty() bool {
	return p == nil || p.className == "" && len(p.tolerations) == 0 && len(p.nodeSelector) == 0
}

// conflict is the one onConflict of p's parts that have one, "" when none
// has; ok is false when they disagree.
func (p *placement) conflict() (policy.ConflictAction, bool) {
	var out policy.ConflictAction
	if p.className != "" {
		out = p.classConflict
	}
	for _, k := range slices.Sorted(maps.Keys(p.keyConflict)) {
		c := p.keyConflict[k]
		if out != "" && c != out {
			return out, false
		}
		out = c
	}
	return out, true
}

// compatible reports whether o can join p in one SandboxPolicy's runtime.
func (p *placement) compatible(o *placement) bool {
	if p.empty() || o.empty() {
		return true
	}
	if p.className != "" && o.className != "" {
		return false
	}
	for k := range o.nodeSelector {
		if _, ok := p.nodeSelector[k]; ok {
			return false
		}
	}
	a, _ := p.conflict()
	b, _ := o.conflict()
	return a == "" || b == "" || a == b
}

func (p *placement) add(o *placement) {
	if o.className != "" {
		p.className, p.classConflict = o.className, o.classConflict
	}
	p.tolerations = append(p.tolerations, o.tolerations...)
	for k, v := range o.nodeSelector {
		p.nodeSelector[k], p.keyConflict[k] = v, o.keyConflict[k]
	}
	maps.Copy(p.paths, o.paths)
}

func newPlacement() *placement {
	return &placement{nodeSelector: map[string]string{}, keyConflict: map[string]policy.ConflictAction{}, paths: map[string]*field.Path{}}
}

// check leaves out the parts whose onConflict differs from the rest's: a
// SandboxPolicy's runtime has one.
func (p *placement) check(r *ruleConverter) {
	if _, ok := p.conflict(); ok {
		return
	}
	want := p.classConflict
	for _, k := range slices.Sorted(maps.Keys(p.keyConflict)) {
		if p.keyConflict[k] != want {
			r.leave(p.paths["nodeSelector/"+k], fmt.Sprintf("nodeSelector %s is %s where the pod sets its own, runtimeClassName %s: a SandboxPolicy's runtime has one onConflict",
				k, conflictWords[p.keyConflict[k]], conflictWords[want]))
			delete(p.nodeSelector, k)
			delete(p.keyConflict, k)
		}
	}
}

var conflictWords = map[policy.ConflictAction]string{policy.Keep: "kept (+() anchor)", policy.Override: "replaced"}

func (p *placement) runtime() *policy.Runtime {
	if p.empty() {
		return nil
	}
	rt := &policy.Runtime{ClassName: p.className, Tolerations: p.tolerations}
	if len(p.nodeSelector) > 0 {
		rt.NodeSelector = maps.Clone(p.nodeSelector)
	}
	rt.OnConflict, _ = p.conflict()
	return rt
}

// runtimeClass reads runtimeClassName (override) or +(runtimeClassName)
// (keep) of a strategic merge patch.
func (r *ruleConverter) runtimeClass(inj *injection, k string, v any, path *field.Path) {
	name, _ := v.(string)
	if name == "" || strings.Contains(name, "{{") {
		r.leave(path, "runtimeClassName is not a plain name")
		return
	}
	inj.place.className, inj.place.classConflict = name, policy.Override
	if k == "+(runtimeClassName)" {
		inj.place.classConflict = policy.Keep
	}
	inj.place.paths["className"] = path
}

// nodeSelector reads the entries of a strategic merge patch's nodeSelector,
// which merges key by key: KEY replaces the pod's value, +(KEY) keeps it.
func (r *ruleConverter) nodeSelector(inj *injection, v any, path *field.Path) {
	m, ok := v.(map[string]any)
	if !ok {
		r.leave(path, "nodeSelector is not a map of labels")
		return
	}
	for _, k := range sortedKeys(m) {
		kp := path.Key(k)
		key, conflict := k, policy.Override
		if inner, ok := strings.CutPrefix(k, "+("); ok && strings.HasSuffix(inner, ")") {
			key, conflict = strings.TrimSuffix(inner, ")"), policy.Keep
		}
		value, isString := m[k].(string)
		if !isString || strings.ContainsAny(key, "(){}") || strings.Contains(value, "{{") {
			r.leave(kp, "not converted: a nodeSelector entry of a plain label and value (KEY, or +(KEY) when absent)")
			continue
		}
		inj.place.nodeSelector[key], inj.place.keyConflict[key] = value, conflict
		inj.place.paths["nodeSelector/"+key] = kp
	}
}

// tolerations reads a strategic merge patch's tolerations. core/v1 gives
// the list no merge key, so Kyverno's merge replaces the pod's own list
// with the patch's; the webhook adds the policy's to the pod's own.
func (r *ruleConverter) tolerations(inj *injection, v any, path *field.Path) {
	list, _ := v.([]any)
	n := len(inj.place.tolerations)
	for i, t := range list {
		tm, _ := t.(map[string]any)
		r.toleration(inj, tm, path.Index(i))
	}
	if len(inj.place.tolerations) > n {
		r.differs(path, "Kyverno's strategic merge replaces the pod's own tolerations with these (core/v1 tolerations have no merge key), so a pod loses the tolerations it had; sandbox-webhook adds these to the pod's own, each unless the pod has an equal one")
	}
}

func (r *ruleConverter) toleration(inj *injection, t map[string]any, path *field.Path) bool {
	var tol policy.Toleration
	for _, k := range sortedKeys(t) {
		s, isString := t[k].(string)
		switch {
		case k == "tolerationSeconds":
			n, ok := t[k].(float64)
			if !ok || n != float64(int64(n)) {
				r.leave(path.Child(k), "tolerationSeconds is not a whole number")
				return false
			}
			tol.TolerationSeconds = new(int64(n))
		case !isString || strings.Contains(s, "{{"):
			r.leave(path.Child(k), "not converted: a toleration of plain key, operator, value, effect and tolerationSeconds")
			return false
		case k == "key":
			tol.Key = s
		case k == "operator":
			tol.Operator = corev1.TolerationOperator(s)
		case k == "value":
			tol.Value = s
		case k == "effect":
			tol.Effect = corev1.TaintEffect(s)
		default:
			r.leave(path.Child(k), "not converted: a toleration field this import does not know")
			return false
		}
	}
	inj.place.tolerations = append(inj.place.tolerations, tol)
	return true
}

// mirror is one image rewrite of a rule and the container lists it
// rewrites.
type mirror struct {
	policy.ImageMirror
	lists int
	path  *field.Path
}

// The image rewrites import converts: a foreach element's image replaced
// by regex_replace_all (or its _literal form) of the element's own image,
// with a pattern that is a registry or repository prefix and a literal
// replacement.
var (
	rewriteCall = regexp.MustCompile(`^\{\{\s*regex_replace_all(_literal)?\(\s*'([^']*)'\s*,\s*(?:'\{\{\s*element\.image\s*\}\}'|element\.image)\s*,\s*'([^']*)'\s*\)\s*\}\}$`)
	// a prefix pattern: ^PREFIX/ or ^PREFIX/(.*)$ (or (.+)), the capture
	// put back with $1 or ${1}.
	prefixPattern = regexp.MustCompile(`^\^((?:[a-z0-9_:-]|\\\.|\.|/)+?)/(\((?:\.\*|\.\+)\)\$)?$`)
)

// image reads the image a foreach patch gives its element.
func (r *ruleConverter) image(inj *injection, v any, path *field.Path, list int) {
	if !r.foreachSel.empty() {
		r.leave(path, "rewrites the images of the containers the foreach's preconditions select by name; sandbox-webhook's imageMirrors rewrite every container's")
		return
	}
	s, _ := v.(string)
	from, to, why := imageRewrite(s)
	if why != "" {
		r.leave(path, why)
		return
	}
	for i := range inj.mirrors {
		if inj.mirrors[i].ImageMirror == (policy.ImageMirror{From: from, To: to}) {
			inj.mirrors[i].lists |= list
			return
		}
	}
	inj.mirrors = append(inj.mirrors, mirror{ImageMirror: policy.ImageMirror{From: from, To: to}, lists: list, path: path})
}

// imageRewrite reads an image expression as a mirror rule, or says why it
// is none: the rewrite must be, for every image the rule sees, what
// imageMirrors does to it.
func imageRewrite(s string) (from, to, why string) {
	const how = "write the mirror as spec.imageMirrors (from: the registry, to: the mirror), which rewrites the images under a registry or repository prefix as the container runtime names them"
	expr := strings.TrimSpace(s)
	switch {
	case strings.Contains(expr, "image_normalize"):
		return "", "", "image_normalize gives untagged images the tag latest and names Docker Hub images without library/ (busybox is docker.io/busybox:latest), so the rewrite is not a prefix rewrite of the image as written; " + how
	case strings.Contains(expr, "imageData") || strings.Contains(expr, "images."):
		return "", "", "the image is built from image data (a context variable or the images variable), not rewritten by a prefix; " + how
	}
	m := rewriteCall.FindStringSubmatch(expr)
	if m == nil {
		return "", "", fmt.Sprintf("sets the image to %q, not regex_replace_all('^REGISTRY/', '{{element.image}}', 'MIRROR/') of the element's own image; %s", s, how)
	}
	literal, pattern, repl := m[1] != "", m[2], m[3]
	if strings.Contains(pattern, `\\`) && prefixPattern.MatchString(strings.ReplaceAll(pattern, `\\`, `\`)) {
		return "", "", fmt.Sprintf("the pattern '%s', as Kyverno reads it, matches a backslash, which no image has: Kyverno rewrites no image by it (in the text of a patchesJson6902 Kyverno reads the expression before YAML reads its escapes, so \\\\. there is a backslash and any character; \\. is the dot)", pattern)
	}
	p := prefixPattern.FindStringSubmatch(pattern)
	if p == nil {
		return "", "", fmt.Sprintf("the pattern %q is not a registry or repository prefix (^ghcr\\.io/): Kyverno rewrites images by it that no prefix rule matches alike, such as every registry's, dropping the registry's name; %s", pattern, how)
	}
	prefix, capture := p[1], p[2] != ""
	from = strings.ReplaceAll(prefix, `\.`, ".")
	if imageref.Under(from+"/x", "docker.io") {
		return "", "", fmt.Sprintf("Kyverno's pattern %q sees the image as written: Docker Hub images written without their registry (busybox, bitnami/redis) are left as they are, and those written docker.io/... are rewritten; sandbox-webhook names every image as the container runtime does and would rewrite both: %s", pattern, how)
	}
	if strings.Contains(strings.ReplaceAll(prefix, `\.`, ""), ".") {
		return "", "", fmt.Sprintf("the pattern %q has an unescaped '.', which matches any character: Kyverno would also rewrite images of other names (such as the Docker Hub repository %s); escape it (\\.) to convert", pattern, strings.ReplaceAll(from, ".", "-"))
	}
	switch {
	case capture && !literal && (strings.HasSuffix(repl, "/$1") || strings.HasSuffix(repl, "/${1}")):
		to = repl[:strings.LastIndex(repl, "/")]
	case !capture && strings.HasSuffix(repl, "/") && (literal || !strings.Contains(repl, "$")):
		to = strings.TrimSuffix(repl, "/")
	default:
		return "", "", fmt.Sprintf("the replacement %q does not put the rest of the image after a mirror prefix: %s", repl, how)
	}
	for _, s := range []string{from, to} {
		if bad := imageref.CheckPrefix(s); bad != "" {
			return "", "", fmt.Sprintf("%q %s; Kyverno compares the image as written, the webhook as the container runtime names it", s, bad)
		}
	}
	return from, to, ""
}

// inForeachWhy says why placement in a foreach over lists is left out.
func inForeachWhy(lists []string) string {
	return fmt.Sprintf("places the pod from a foreach over %s: Kyverno does so only for a pod that has an element to iterate; a SandboxPolicy's runtime places every pod it matches, so write it outside the foreach", strings.Join(lists, ", "))
}

// tolerationOp reads add /spec/tolerations/-: Kyverno appends the
// toleration, also when the pod has an equal one.
func (r *ruleConverter) tolerationOp(inj *injection, op map[string]any, path *field.Path) {
	value, _ := op["value"].(map[string]any)
	if value == nil || !r.toleration(inj, value, path.Child("value")) {
		return
	}
	r.differs(path, "Kyverno appends the toleration also to a pod that has an equal one (a second, equal entry); sandbox-webhook adds it only where the pod has none equal")
}

// checkMirrors leaves out rewrites of init containers alone, and says what
// the webhook rewrites beyond the lists the rule iterates.
func (inj *injection) checkMirrors(r *ruleConverter) {
	var kept []mirror
	for _, m := range inj.mirrors {
		switch {
		case m.lists&inContainers == 0:
			r.leave(m.path, fmt.Sprintf("rewrites the images of %s in the init containers only; sandbox-webhook's imageMirrors rewrite every container's", m.From))
			continue
		case m.lists&inInit == 0:
			r.differs(m.path, fmt.Sprintf("Kyverno rewrites the images of %s in the app containers only; sandbox-webhook's imageMirrors rewrite the init containers' and image volumes' too", m.From))
		default:
			r.differs(m.path, fmt.Sprintf("Kyverno rewrites the containers' images of %s; sandbox-webhook's imageMirrors rewrite the image volumes' too (and ephemeral containers' where the chart sends their updates)", m.From))
		}
		kept = append(kept, m)
	}
	inj.mirrors = kept
}

// holdExpressions replaces each {{ }} expression of text (nested ones
// inside it) with a placeholder YAML reads as plain text, as Kyverno
// replaces them with their values before it reads the YAML; exprs[i] is
// the expression of placeholder i.
func holdExpressions(text string) (string, []string) {
	var b strings.Builder
	var exprs []string
	for {
		start := strings.Index(text, "{{")
		if start < 0 {
			break
		}
		depth, end := 0, -1
		for i := start; i+1 < len(text); i++ {
			switch text[i : i+2] {
			case "{{":
				depth++
				i++
			case "}}":
				depth--
				i++
				if depth == 0 {
					end = i + 1
				}
			}
			if end >= 0 {
				break
			}
		}
		if end < 0 {
			break
		}
		b.WriteString(text[:start])
		b.WriteString(placeholder(len(exprs)))
		exprs = append(exprs, text[start:end])
		text = text[end:]
	}
	b.WriteString(text)
	return b.String(), exprs
}

func placeholder(i int) string { return fmt.Sprintf("KYVERNOEXPRESSION%dHELD", i) }

// restoreExpressions puts the expressions back into the strings of v and
// returns v.
func restoreExpressions(v any, exprs []string) any {
	switch x := v.(type) {
	case string:
		for i := len(exprs) - 1; i >= 0; i-- {
			x = strings.ReplaceAll(x, placeholder(i), exprs[i])
		}
		return x
	case []any:
		for i := range x {
			x[i] = restoreExpressions(x[i], exprs)
		}
	case map[string]any:
		for k := range x {
			x[k] = restoreExpressions(x[k], exprs)
		}
	}
	return v
}
