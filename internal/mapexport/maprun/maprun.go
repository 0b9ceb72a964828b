package maprun

import (
	"context"
	"errors"
	"fmt"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apiserver/pkg/admission"
	plugincel "k8s.io/apiserver/pkg/admission/plugin/cel"
	"k8s.io/apiserver/pkg/admission/plugin/policy/mutating/patch"
	"k8s.io/apiserver/pkg/admission/plugin/policy/validating"
	"k8s.io/apiserver/pkg/admission/plugin/webhook/matchconditions"
	celconfig "k8s.io/apiserver/pkg/apis/cel"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/cel/environment"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"

	"github.com/sandbox-webhook/sandbox-webhook/internal/mapexport"
)

var (
	podGVK  = corev1.SchemeGroupVersion.WithKind("Pod")
	podGVR  = corev1.SchemeGroupVersion.WithResource("pods")
	objects = admission.NewObjectInterfacesFromScheme(clientgoscheme.Scheme)
)

// Compiled are exported policies compiled for Run.
type Compiled []compiledPolicy

type compiledPolicy struct {
	mapexport.Exported
	compiler *plugincel.CompositedCompiler
	matcher  matchconditions.Matcher // nil without match conditions
	patchers []patch.Patcher
}

// Compile compiles exported policies with the apiserver's own
// MutatingAdmissionPolicy code (k8s.io/apiserver's CEL compiler, match
// conditions and JSONPatch patcher, the only patch type mapexport writes),
// in the CEL environment in which a 1.36 apiserver accepts new policies.
func Compile(exported []mapexport.Exported) (Compiled, error) {
	var c Compiled
	for _, e := range exported {
		p := e.Policy
		compiler, err := plugincel.NewCompositedCompiler(environment.MustBaseEnvSet(mapexport.CELCompatibility))
		if err != nil {
			return nil, err
		}
		cp := compiledPolicy{Exported: e, compiler: compiler}
		opts := plugincel.OptionalVariableDeclarations{HasParams: p.Spec.ParamKind != nil, HasAuthorizer: true}
		for _, v := range p.Spec.Variables {
			r := compiler.CompileAndStoreVariable(&validating.Variable{Name: v.Name, Expression: v.Expression}, opts, environment.NewExpressions)
			if r.Error != nil {
				return nil, fmt.Errorf("%s: variable %s: %w", p.Name, v.Name, r.Error)
			}
		}
		if len(p.Spec.MatchConditions) > 0 {
			cond, err := compileConditions(compiler, p.Spec.MatchConditions, opts)
			if err != nil {
				return nil, fmt.Errorf("%s: match conditions: %w", p.Name, err)
			}
			cp.matcher = matchconditions.NewMatcher(cond, p.Spec.FailurePolicy, "policy", "mutate", p.Name)
		}
		opts.HasPatchTypes = true
		for i, m := range p.Spec.Mutations {
			if m.PatchType != admissionregistrationv1.PatchTypeJSONPatch {
				return nil, fmt.Errorf("%s: mutation %d: unsupported patchType %q", p.Name, i, m.PatchType)
			}
			eval := compiler.CompileMutatingEvaluator(&patch.JSONPatchCondition{Expression: m.JSONPatch.Expression}, opts, environment.NewExpressions)
			if errs := eval.CompilationErrors(); len(errs) > 0 {
				return nil, fmt.Errorf("%s: mutation %d: %w", p.Name, i, errors.Join(errs...))
			}
			cp.patchers = append(cp.patchers, patch.NewJSONPatcher(eval))
		}
		c = append(c, cp)
	}
	return c, nil
}

// compileConditions compiles match conditions with the apiserver's matcher
// code.
func compileConditions(compiler *plugincel.CompositedCompiler, conds []admissionregistrationv1.MatchCondition, opts plugincel.OptionalVariableDeclarations) (plugincel.ConditionEvaluator, error) {
	acc := make([]plugincel.ExpressionAccessor, len(conds))
	for i := range conds {
		acc[i] = (*matchconditions.MatchCondition)(&conds[i])
	}
	cond := compiler.CompileCondition(acc, opts, environment.NewExpressions)
	return cond, errors.Join(cond.CompilationErrors()...)
}

// createAttributes are the admission attributes of a CREATE of pod in
// namespace ns by userName.
func createAttributes(pod *corev1.Pod, ns *corev1.Namespace, userName string) *admission.VersionedAttributes {
	obj := pod.DeepCopy()
	obj.SetGroupVersionKind(podGVK)
	attr := admission.NewAttributesRecord(obj, nil, podGVK, ns.Name, pod.Name, podGVR, "",
		admission.Create, &metav1.CreateOptions{}, false, &user.DefaultInfo{Name: userName})
	return &admission.VersionedAttributes{Attributes: attr, VersionedKind: podGVK, VersionedObject: admission.NewLazyObject(obj.DeepCopy())}
}

// Run runs the policies, in order, on a pod CREATE in namespace ns, as the
// apiserver does: what it would store, before its defaulting and
// validation. The pod is not modified.
func (c Compiled) Run(ctx context.Context, pod *corev1.Pod, ns *corev1.Namespace) (*corev1.Pod, error) {
	out := pod.DeepCopy()
	out.SetGroupVersionKind(podGVK)
	if out.Namespace == "" {
		out.Namespace = ns.Name
	}
	for _, p := range c {
		var err error
		if out, err = p.run(ctx, out, ns); err != nil {
			return nil, fmt.Errorf("%s: %w", p.Policy.Name, err)
		}
	}
	return out, nil
}

func (p *compiledPolicy) run(ctx context.Context, pod *corev1.Pod, ns *corev1.Namespace) (*corev1.Pod, error) {
	if ok, err := matchesResources(p.Policy.Spec.MatchConstraints, pod, ns); err != nil || !ok {
		return pod, err
	}
	va := createAttributes(pod, ns, "sandbox-webhook-offline")
	if p.matcher != nil {
		r := p.matcher.Match(p.compiler.CreateContext(ctx), va, nil, nil)
		if r.Error != nil {
			return nil, r.Error
		}
		if !r.Matches {
			return pod, nil
		}
	}
	for i, patcher := range p.patchers {
		obj, err := patcher.Patch(p.compiler.CreateContext(ctx), patch.Request{
			MatchedResource:     podGVR,
			VersionedAttributes: va,
			ObjectInterfaces:    objects,
			Namespace:           ns,
		}, celconfig.RuntimeCELCostBudget)
		if err != nil {
			return nil, fmt.Errorf("mutation %d: %w", i, err)
		}
		next, ok := obj.(*corev1.Pod)
		if !ok {
			return nil, fmt.Errorf("mutation %d: unexpected result %T", i, obj)
		}
		next.SetGroupVersionKind(podGVK)
		va.UpdateObject(next)
	}
	return va.VersionedObject.Object().(*corev1.Pod), nil
}

// matchesResources evaluates the label selectors of match resources (the
// resource rules of exported policies always are pod CREATE, and their
// bindings have no match resources of their own).
func matchesResources(mr *admissionregistrationv1.MatchResources, pod *corev1.Pod, ns *corev1.Namespace) (bool, error) {
	if mr == nil {
		return true, nil
	}
	for _, s := range []struct {
		sel    *metav1.LabelSelector
		labels map[string]string
	}{{mr.NamespaceSelector, ns.Labels}, {mr.ObjectSelector, pod.Labels}} {
		if s.sel == nil {
			continue
		}
		sel, err := metav1.LabelSelectorAsSelector(s.sel)
		if err != nil {
			return false, err
		}
		if !sel.Matches(labels.Set(s.labels)) {
			return false, nil
		}
	}
	return true, nil
}
