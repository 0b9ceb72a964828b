package maprun

import (
	"context"
	"errors"
	"fmt"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/managedfields"
	"k8s.io/apiserver/pkg/admission"
	plugincel "k8s.io/apiserver/pkg/admission/plugin/cel"
	"k8s.io/apiserver/pkg/admission/plugin/policy/mutating/patch"
	"k8s.io/apiserver/pkg/admission/plugin/policy/validating"
	"k8s.io/apiserver/pkg/admission/plugin/webhook/matchconditions"
	celconfig "k8s.io/apiserver/pkg/apis/cel"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/cel/environment"
	"k8s.io/client-go/applyconfigurations"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"

	"github.com/sandbox-webhook/sandbox-webhook/internal/mapexport"
)

var (
	podGVK = corev1.SchemeGroupVersion.WithKind("Pod")
	podGVR = corev1.SchemeGroupVersion.WithResource("pods")
)

// Compiled are exported policies compiled for Run.
type Compiled struct {
	policies []compiledPolicy
}

type compiledPolicy struct {
	mapexport.Exported
	compiler  *plugincel.CompositedCompiler
	matcher   matchconditions.Matcher // nil without match conditions
	patchers  []patch.Patcher
	objects   admission.ObjectInterfaces
	converter managedfields.TypeConverter
}

// Compile compiles exported policies with the apiserver's own
// MutatingAdmissionPolicy code (k8s.io/apiserver's CEL compiler, match
// conditions and ApplyConfiguration and JSONPatch patchers), in the CEL
// environment in which a 1.36 apiserver accepts new policies.
func Compile(exported []mapexport.Exported) (*Compiled, error) {
	scheme := clientgoscheme.Scheme
	objects := admission.NewObjectInterfacesFromScheme(scheme)
	converter := applyconfigurations.NewTypeConverter(scheme)
	c := &Compiled{}
	for _, e := range exported {
		p := e.Policy
		compiler, err := plugincel.NewCompositedCompiler(environment.MustBaseEnvSet(mapexport.CELCompatibility))
		if err != nil {
			return nil, err
		}
		cp := compiledPolicy{Exported: e, compiler: compiler, objects: objects, converter: converter}
		opts := plugincel.OptionalVariableDeclarations{HasParams: p.Spec.ParamKind != nil, HasAuthorizer: true}
		for _, v := range p.Spec.Variables {
			r := compiler.CompileAndStoreVariable(&validating.Variable{Name: v.Name, Expression: v.Expression}, opts, environment.NewExpressions)
			if r.Error != nil {
				return nil, fmt.Errorf("%s: variable %s: %w", p.Name, v.Name, r.Error)
			}
		}
		if len(p.Spec.MatchConditions) > 0 {
			var acc []plugincel.ExpressionAccessor
			for i := range p.Spec.MatchConditions {
				acc = append(acc, (*matchconditions.MatchCondition)(&p.Spec.MatchConditions[i]))
			}
			cond := compiler.CompileCondition(acc, opts, environment.NewExpressions)
			if errs := cond.CompilationErrors(); len(errs) > 0 {
				return nil, fmt.Errorf("%s: match conditions: %w", p.Name, errors.Join(errs...))
			}
			cp.matcher = matchconditions.NewMatcher(cond, p.Spec.FailurePolicy, "policy", "mutate", p.Name)
		}
		popts := opts
		popts.HasPatchTypes = true
		for i, m := range p.Spec.Mutations {
			var eval plugincel.MutatingEvaluator
			switch m.PatchType {
			case admissionregistrationv1.PatchTypeJSONPatch:
				eval = compiler.CompileMutatingEvaluator(&patch.JSONPatchCondition{Expression: m.JSONPatch.Expression}, popts, environment.NewExpressions)
				cp.patchers = append(cp.patchers, patch.NewJSONPatcher(eval))
			case admissionregistrationv1.PatchTypeApplyConfiguration:
				eval = compiler.CompileMutatingEvaluator(&patch.ApplyConfigurationCondition{Expression: m.ApplyConfiguration.Expression}, popts, environment.NewExpressions)
				cp.patchers = append(cp.patchers, patch.NewApplyConfigurationPatcher(eval))
			default:
				return nil, fmt.Errorf("%s: mutation %d: unsupported patchType %q", p.Name, i, m.PatchType)
			}
			if errs := eval.CompilationErrors(); len(errs) > 0 {
				return nil, fmt.Errorf("%s: mutation %d: %w", p.Name, i, errors.Join(errs...))
			}
		}
		c.policies = append(c.policies, cp)
	}
	return c, nil
}

// Run runs the policies, in order, on a pod CREATE in namespace ns, as the
// apiserver does: what it would store, before its defaulting and
// validation. The pod is not modified.
func (c *Compiled) Run(ctx context.Context, pod *corev1.Pod, ns *corev1.Namespace) (*corev1.Pod, error) {
	out := pod.DeepCopy()
	out.SetGroupVersionKind(podGVK)
	if out.Namespace == "" {
		out.Namespace = ns.Name
	}
	for _, p := range c.policies {
		var err error
		if out, err = p.run(ctx, out, ns); err != nil {
			return nil, fmt.Errorf("%s: %w", p.Policy.Name, err)
		}
	}
	return out, nil
}

func (p *compiledPolicy) run(ctx context.Context, pod *corev1.Pod, ns *corev1.Namespace) (*corev1.Pod, error) {
	for _, mr := range []*admissionregistrationv1.MatchResources{p.Policy.Spec.MatchConstraints, p.Binding.Spec.MatchResources} {
		ok, err := matchesResources(mr, pod, ns)
		if err != nil || !ok {
			return pod, err
		}
	}
	attr := admission.NewAttributesRecord(pod.DeepCopy(), nil, podGVK, ns.Name, pod.Name, podGVR, "",
		admission.Create, &metav1.CreateOptions{}, false, &user.DefaultInfo{Name: "sandbox-webhook-offline"})
	va := &admission.VersionedAttributes{Attributes: attr, VersionedKind: podGVK, VersionedObject: admission.NewLazyObject(pod.DeepCopy())}
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
			ObjectInterfaces:    p.objects,
			Namespace:           ns,
			TypeConverter:       p.converter,
		}, celconfig.RuntimeCELCostBudget)
		if err != nil {
			return nil, fmt.Errorf("mutation %d: %w", i, err)
		}
		next := &corev1.Pod{}
		switch o := obj.(type) {
		case *corev1.Pod:
			next = o
		case *unstructured.Unstructured:
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(o.Object, next); err != nil {
				return nil, fmt.Errorf("mutation %d: %w", i, err)
			}
		default:
			return nil, fmt.Errorf("mutation %d: unexpected result %T", i, obj)
		}
		next.SetGroupVersionKind(podGVK)
		va.UpdateObject(next)
	}
	return va.VersionedObject.Object().(*corev1.Pod), nil
}

// matchesResources evaluates the label selectors of match resources (the
// resource rules of exported policies always are pod CREATE).
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
