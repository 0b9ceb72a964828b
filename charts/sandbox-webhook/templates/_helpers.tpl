{{/* The chart name, overridable with nameOverride. */}}
{{- define "sandbox-webhook.name" -}}
{{- .Values.nameOverride | default .Chart.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/* The full object name: fullnameOverride, or <release>-<name> unless the release name contains it. */}}
{{- define "sandbox-webhook.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- $name := include "sandbox-webhook.name" . -}}
{{- if contains $name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{/* name-version for the helm.sh/chart label. */}}
{{- define "sandbox-webhook.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/* Labels every object carries. */}}
{{- define "sandbox-webhook.labels" -}}
helm.sh/chart: {{ include "sandbox-webhook.chart" . }}
{{ include "sandbox-webhook.selectorLabels" . }}
app.kubernetes.io/version: {{ .Values.image.tag | default .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end -}}

{{/* The labels the Deployment, Service, PDB and ServiceMonitor select on. */}}
{{- define "sandbox-webhook.selectorLabels" -}}
app.kubernetes.io/name: {{ include "sandbox-webhook.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{/* The ServiceAccount name. */}}
{{- define "sandbox-webhook.serviceAccountName" -}}
{{- .Values.serviceAccount.name | default (include "sandbox-webhook.fullname" .) -}}
{{- end -}}

{{/* The image reference: repository@digest or repository:tag. */}}
{{- define "sandbox-webhook.image" -}}
{{- if .Values.image.digest -}}
{{- printf "%s@%s" .Values.image.repository .Values.image.digest -}}
{{- else -}}
{{- printf "%s:%s" .Values.image.repository (.Values.image.tag | default .Chart.AppVersion) -}}
{{- end -}}
{{- end -}}

{{/* The Secret holding the serving certificate (unused in existingSecret mode it names the user's). */}}
{{- define "sandbox-webhook.tlsSecretName" -}}
{{- if eq .Values.certificates.mode "existingSecret" -}}
{{- .Values.certificates.existingSecret.secretName -}}
{{- else -}}
{{- printf "%s-tls" (include "sandbox-webhook.fullname" .) -}}
{{- end -}}
{{- end -}}

{{/* The ConfigMap the policies directory is mounted from. */}}
{{- define "sandbox-webhook.policiesConfigMapName" -}}
{{- .Values.policies.existingConfigMap | default (printf "%s-policies" (include "sandbox-webhook.fullname" .)) -}}
{{- end -}}

{{/* The namespaces the webhook never sees: kube-system, the release namespace and webhook.excludeNamespaces. */}}
{{- define "sandbox-webhook.excludedNamespaces" -}}
{{- concat (list "kube-system" .Release.Namespace) (.Values.webhook.excludeNamespaces | default list) | uniq | toJson -}}
{{- end -}}

{{/* Where the apiserver calls the webhook: webhook.url, else the Service. */}}
{{- define "sandbox-webhook.clientConfig" -}}
{{- if .Values.webhook.url -}}
url: {{ .Values.webhook.url | quote }}
{{- else -}}
service:
  name: {{ include "sandbox-webhook.fullname" . }}
  namespace: {{ .Release.Namespace }}
  path: /mutate-v1-pod
  port: 443
{{- end }}
{{- with .Values.webhook.caBundle }}
caBundle: {{ . | quote }}
{{- end }}
{{- end -}}

{{/* webhook.namespaceSelector with the excluded namespaces ANDed in. */}}
{{- define "sandbox-webhook.namespaceSelector" -}}
{{- $selector := deepCopy (.Values.webhook.namespaceSelector | default dict) -}}
{{- $exclude := dict "key" "kubernetes.io/metadata.name" "operator" "NotIn" "values" (include "sandbox-webhook.excludedNamespaces" . | fromJsonArray) -}}
{{- $_ := set $selector "matchExpressions" (append ($selector.matchExpressions | default list) $exclude) -}}
{{- toYaml $selector -}}
{{- end -}}

{{/*
Checks for values that contradict each other; the schema already rejects unknown keys and
bad types. Included by every template so that any render fails the same way.
*/}}
{{- define "sandbox-webhook.validate" -}}
{{- $v := .Values -}}
{{- $mode := $v.certificates.mode -}}
{{- if and (eq $mode "existingSecret") (not $v.certificates.existingSecret.secretName) -}}
{{- fail "certificates.mode=existingSecret needs certificates.existingSecret.secretName: the kubernetes.io/tls Secret holding the serving certificate" -}}
{{- end -}}
{{- if and (ne $mode "existingSecret") $v.certificates.existingSecret.secretName -}}
{{- fail (printf "certificates.existingSecret.secretName is set but certificates.mode=%s ignores it; set certificates.mode=existingSecret or unset the secretName" $mode) -}}
{{- end -}}
{{- if and (eq $mode "existingSecret") (not $v.webhook.caBundle) -}}
{{- if $v.webhook.url -}}
{{- fail "webhook.url without cert-manager or selfManaged certificates needs webhook.caBundle: the base64 PEM CA that signed the server's certificate" -}}
{{- else -}}
{{- fail "certificates.mode=existingSecret needs webhook.caBundle: the base64 PEM CA that signed the certificate in certificates.existingSecret.secretName" -}}
{{- end -}}
{{- end -}}
{{- if and (ne $mode "existingSecret") $v.webhook.caBundle -}}
{{- fail (printf "webhook.caBundle is set but certificates.mode=%s injects the CA and would overwrite it; use certificates.mode=existingSecret to supply your own CA" $mode) -}}
{{- end -}}
{{- /* A cluster's discovery lists kinds ("v1/Pod"); helm template's built-in set does not, so only a real install is checked. */ -}}
{{- if and (eq $mode "certManager") (.Capabilities.APIVersions.Has "v1/Pod") (not (.Capabilities.APIVersions.Has "cert-manager.io/v1/Certificate")) -}}
{{- fail "certificates.mode=certManager (the default) needs cert-manager, and this cluster has no cert-manager.io/v1 Certificate: install cert-manager first, or set certificates.mode=selfManaged (the server keeps its own CA and certificate in a Secret) or certificates.mode=existingSecret (your own kubernetes.io/tls Secret and webhook.caBundle); see docs/install.md" -}}
{{- end -}}
{{- if and (ne $mode "certManager") $v.certificates.certManager.issuerRef.name -}}
{{- fail (printf "certificates.certManager.issuerRef.name is set but certificates.mode=%s does not use cert-manager; set certificates.mode=certManager or unset the issuerRef name" $mode) -}}
{{- end -}}
{{- if and $v.policies.inline $v.policies.existingConfigMap -}}
{{- fail "policies.inline and policies.existingConfigMap are both set; use one: set policies.inline=null to use only the existing ConfigMap" -}}
{{- end -}}
{{- if not (or $v.policies.inline $v.policies.existingConfigMap) -}}
{{- fail "no policies: set policies.inline (SandboxPolicy files by name) or policies.existingConfigMap; without policies the webhook would change nothing" -}}
{{- end -}}
{{- $objectSelector := $v.webhook.objectSelector | default dict -}}
{{- if and (not $v.webhook.allowEmptyObjectSelector) (not $objectSelector.matchLabels) (not $objectSelector.matchExpressions) (not $v.webhook.matchConditions) -}}
{{- fail "webhook.objectSelector selects every pod and no webhook.matchConditions narrow it: while the webhook is down, with failurePolicy=Fail, no pod could be created in any namespace it sees (cert-manager's and the CNI's included); set webhook.objectSelector.matchLabels or matchExpressions, or webhook.matchConditions that select the sandbox pods (for pods with one label or another), or webhook.allowEmptyObjectSelector=true if every pod of those namespaces is a sandbox" -}}
{{- end -}}
{{- $drain := add $v.server.shutdownDelaySeconds $v.server.idleDrainSeconds $v.webhook.timeoutSeconds 5 -}}
{{- if lt (int $v.terminationGracePeriodSeconds) (int $drain) -}}
{{- fail (printf "terminationGracePeriodSeconds=%d is shorter than the server's shutdown (server.shutdownDelaySeconds + server.idleDrainSeconds + webhook.timeoutSeconds + 5s = %ds): the kubelet would kill it while it still answers admissions" (int $v.terminationGracePeriodSeconds) (int $drain)) -}}
{{- end -}}
{{- if $v.podDisruptionBudget.enabled -}}
{{- $pdb := $v.podDisruptionBudget -}}
{{- if and (not (kindIs "invalid" $pdb.minAvailable)) (not (kindIs "invalid" $pdb.maxUnavailable)) -}}
{{- fail "podDisruptionBudget.minAvailable and podDisruptionBudget.maxUnavailable are both set; set the other to null" -}}
{{- end -}}
{{- if and (kindIs "invalid" $pdb.minAvailable) (kindIs "invalid" $pdb.maxUnavailable) -}}
{{- fail "podDisruptionBudget.enabled=true needs podDisruptionBudget.minAvailable or podDisruptionBudget.maxUnavailable" -}}
{{- end -}}
{{- if and (not (kindIs "invalid" $pdb.minAvailable)) (not (kindIs "string" $pdb.minAvailable)) -}}
{{- if ge (int $pdb.minAvailable) (int $v.replicaCount) -}}
{{- fail (printf "podDisruptionBudget.minAvailable=%d with replicaCount=%d lets no replica be evicted, so node drains would hang; raise replicaCount, lower minAvailable or set podDisruptionBudget.enabled=false" (int $pdb.minAvailable) (int $v.replicaCount)) -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- $leak := $v.prometheusRule.nodeLeak -}}
{{- if and $v.prometheusRule.enabled $leak.enabled -}}
{{- if ge (int64 $leak.memoryCgroupsWarning) (int64 $leak.memoryCgroupsCritical) -}}
{{- fail (printf "prometheusRule.nodeLeak.memoryCgroupsWarning=%d is not below memoryCgroupsCritical=%d: the warning would never come before the critical alert" (int64 $leak.memoryCgroupsWarning) (int64 $leak.memoryCgroupsCritical)) -}}
{{- end -}}
{{- if ge (float64 $leak.percpuWarningGiB) (float64 $leak.percpuCriticalGiB) -}}
{{- fail (printf "prometheusRule.nodeLeak.percpuWarningGiB=%v is not below percpuCriticalGiB=%v: the warning would never come before the critical alert" $leak.percpuWarningGiB $leak.percpuCriticalGiB) -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{/*
Inline policy selections that webhook.objectSelector never sends: one "- file: policy
match...podSelector (...)" line each. A selection's smallest pod carries only the labels
its podSelector requires (matchLabels; In: the first value; Exists); it must match the
objectSelector, else the policy silently does nothing. `kubectl-sandbox_webhook check install`
makes the same check on the cluster.
*/}}
{{- define "sandbox-webhook.unreachablePolicies" -}}
{{- $obj := .Values.webhook.objectSelector | default dict -}}
{{- range $file, $text := .Values.policies.inline -}}
{{- if $text -}}
{{- /* A mapping is one policy; a string is a file's text, possibly several documents. */ -}}
{{- $docs := list $text -}}
{{- if kindIs "string" $text -}}
{{- $docs = list -}}
{{- range $doc := regexSplit "(?m)^---.*$" $text -1 -}}
{{- $docs = append $docs (fromYaml $doc | default dict) -}}
{{- end -}}
{{- end -}}
{{- range $p := $docs -}}
{{- $match := (($p.spec | default dict).match | default dict) -}}
{{- $blocks := $match.any | default (list $match) -}}
{{- range $i, $b := $blocks -}}
{{- with $b.podSelector -}}
{{- $w := dict -}}
{{- range $k, $v := (.matchLabels | default dict) -}}{{- $_ := set $w $k (toString $v) -}}{{- end -}}
{{- range (.matchExpressions | default list) -}}
{{- if eq .operator "In" -}}{{- $_ := set $w .key (toString (first .values)) -}}
{{- else if eq .operator "Exists" -}}{{- $_ := set $w .key "x" -}}{{- end -}}
{{- end -}}
{{- $ok := true -}}
{{- range $k, $v := ($obj.matchLabels | default dict) -}}
{{- if ne (get $w $k) (toString $v) -}}{{- $ok = false -}}{{- end -}}
{{- end -}}
{{- range ($obj.matchExpressions | default list) -}}
{{- if eq .operator "Exists" -}}{{- if not (hasKey $w .key) -}}{{- $ok = false -}}{{- end -}}
{{- else if eq .operator "In" -}}{{- if not (and (hasKey $w .key) (has (get $w .key) .values)) -}}{{- $ok = false -}}{{- end -}}
{{- else if eq .operator "NotIn" -}}{{- if and (hasKey $w .key) (has (get $w .key) .values) -}}{{- $ok = false -}}{{- end -}}
{{- else if eq .operator "DoesNotExist" -}}{{- if hasKey $w .key -}}{{- $ok = false -}}{{- end -}}
{{- end -}}
{{- end -}}
{{- if not $ok }}
  - {{ $file }}: policy {{ ($p.metadata | default dict).name }} {{ if $match.any }}match.any[{{ $i }}]{{ else }}match{{ end }}.podSelector {{ toJson $b.podSelector }}
{{- end -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{/*
GOMEMLIMIT for the webhook container: nine tenths of resources.limits.memory when it is
written in Ki, Mi or Gi or as a plain number of bytes, so that the Go collector works harder
as the server nears its limit instead of leaving the heap to grow to twice what it holds;
empty without a memory limit or with one written otherwise.
*/}}
{{- define "sandbox-webhook.goMemLimit" -}}
{{- $v := dig "limits" "memory" "" .Values.resources -}}
{{- $m := toString $v -}}
{{- if kindIs "float64" $v -}}
{{- $m = printf "%d" (int64 $v) -}}
{{- end -}}
{{- $mib := 0 -}}
{{- if hasSuffix "Gi" $m -}}
{{- $mib = mul (trimSuffix "Gi" $m | atoi) 1024 -}}
{{- else if hasSuffix "Mi" $m -}}
{{- $mib = trimSuffix "Mi" $m | atoi -}}
{{- else if hasSuffix "Ki" $m -}}
{{- $mib = div (trimSuffix "Ki" $m | atoi) 1024 -}}
{{- else if regexMatch "^[0-9]+$" $m -}}
{{- $mib = div (atoi $m) 1048576 -}}
{{- end -}}
{{- if gt (int $mib) 0 -}}
{{ div (mul $mib 9) 10 }}MiB
{{- end -}}
{{- end -}}

{{/* "true" when the guard is on: webhook.guard.enabled with failurePolicy Fail. */}}
{{- define "sandbox-webhook.guard" -}}
{{- and .Values.webhook.guard.enabled (eq .Values.webhook.failurePolicy "Fail") -}}
{{- end -}}

{{/* CEL: the pod has the status annotation, which a webhook call that answered it wrote. */}}
{{- define "sandbox-webhook.answered" -}}
has(object.metadata.annotations) && 'sandbox-webhook.io/status' in object.metadata.annotations
{{- end -}}
