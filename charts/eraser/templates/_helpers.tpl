{{/* The chart's name, as the app.kubernetes.io/name label carries it. */}}
{{- define "eraser.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "eraser.commonLabels" -}}
app.kubernetes.io/instance: {{ .Release.Name | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service | quote }}
app.kubernetes.io/name: {{ include "eraser.name" . | quote }}
helm.sh/chart: {{ include "eraser.name" . | quote }}
{{- end -}}

{{/*
Selector of the manager's pods. These are upstream's labels and values:
a Deployment's selector cannot change, so keeping them lets `helm upgrade`
move a release of upstream's chart to this one.
*/}}
{{- define "eraser.selectorLabels" -}}
{{ include "eraser.commonLabels" . }}
control-plane: controller-manager
{{- end -}}

{{- define "eraser.labels" -}}
{{ include "eraser.commonLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
{{- end -}}

{{/*
The EraserConfig document: runtimeConfig as given, with apiVersion and kind
filled in when the values leave them out (upstream's v1.0.0 values did; the
shape tells the version apart).
*/}}
{{- define "eraser.config" -}}
{{- $cfg := deepCopy (.Values.runtimeConfig | default dict) -}}
{{- if not $cfg.apiVersion -}}
{{- $manager := $cfg.manager | default dict -}}
{{- $components := $cfg.components | default dict -}}
{{- $version := "eraser.sh/v1alpha3" -}}
{{- if hasKey $components "eraser" -}}
{{- $version = "eraser.sh/v1alpha1" -}}
{{- else if kindIs "string" $manager.runtime -}}
{{- $version = "eraser.sh/v1alpha2" -}}
{{- end -}}
{{- $_ := set $cfg "apiVersion" $version -}}
{{- end -}}
{{- if not $cfg.kind -}}
{{- $_ := set $cfg "kind" "EraserConfig" -}}
{{- end -}}
{{- if .Values.imageRegistry -}}
{{- /* The worker images at their default location are pulled from
imageRegistry: an image left out gets its default repository written here
(the tag stays the manager's default), one set under ghcr.io/eraser-oss/ is
rewritten. The remover is components.eraser before v1alpha2. */ -}}
{{- $components := $cfg.components | default dict -}}
{{- $names := dict "collector" "collector" "scanner" "eraser-trivy-scanner" -}}
{{- $_ := set $names (eq $cfg.apiVersion "eraser.sh/v1alpha1" | ternary "eraser" "remover") "remover" -}}
{{- range $key, $name := $names -}}
{{- $component := get $components $key | default dict -}}
{{- $image := $component.image | default dict -}}
{{- $repo := $image.repo | default (printf "%s/%s" (include "eraser.defaultRepo" $) $name) -}}
{{- $_ := set $image "repo" (include "eraser.mirror" (list $ $repo)) -}}
{{- $_ := set $component "image" $image -}}
{{- $windows := $component.windows -}}
{{- if and (kindIs "map" $windows) (kindIs "map" $windows.image) -}}
{{- if $windows.image.repo -}}
{{- $_ := set $windows.image "repo" (include "eraser.mirror" (list $ $windows.image.repo)) -}}
{{- end -}}
{{- end -}}
{{- $_ := set $components $key $component -}}
{{- end -}}
{{- $_ := set $cfg "components" $components -}}
{{- end -}}
{{- toYaml $cfg -}}
{{- end -}}

{{/* Where the project's images live by default (internal/process/version.DefaultRepo). */}}
{{- define "eraser.defaultRepo" -}}
ghcr.io/eraser-oss
{{- end -}}

{{/*
An image repository, pulled from imageRegistry when that is set and the
repository is at the default location: ghcr.io/eraser-oss/remover becomes
<imageRegistry>/remover, as `make release REGISTRY=<imageRegistry>` pushes
it (a mirror of ghcr.io is then imageRegistry=<mirror>/eraser-oss). Any
other repository is kept as given. Takes (list $root $repo).
*/}}
{{- define "eraser.mirror" -}}
{{- $root := index . 0 -}}
{{- $repo := index . 1 | toString -}}
{{- $registry := trimSuffix "/" ($root.Values.imageRegistry | default "" | toString) -}}
{{- $default := include "eraser.defaultRepo" $root -}}
{{- if and $registry (hasPrefix (printf "%s/" $default) $repo) -}}
{{- printf "%s/%s" $registry (trimPrefix (printf "%s/" $default) $repo) -}}
{{- else -}}
{{- $repo -}}
{{- end -}}
{{- end -}}

{{/* Labels of the metrics Service, which the ServiceMonitor selects by. */}}
{{- define "eraser.metricsLabels" -}}
app.kubernetes.io/component: metrics
{{- end -}}

{{/*
"true" when the CRD named (index . 1) is this release's to render: not in
the cluster yet (or no cluster: helm template, --dry-run=client), owned by
this release (Helm's own ownership metadata), or crds.adopt is set. Takes
(list $root $name).
*/}}
{{- define "eraser.crdOwned" -}}
{{- $root := index . 0 -}}
{{- $existing := lookup "apiextensions.k8s.io/v1" "CustomResourceDefinition" "" (index . 1) -}}
{{- if or (not $existing) $root.Values.crds.adopt -}}
true
{{- else -}}
{{- $labels := $existing.metadata.labels | default dict -}}
{{- $annotations := $existing.metadata.annotations | default dict -}}
{{- and (eq (get $labels "app.kubernetes.io/managed-by") "Helm") (eq (get $annotations "meta.helm.sh/release-name") $root.Release.Name) (eq (get $annotations "meta.helm.sh/release-namespace") $root.Release.Namespace) | toString -}}
{{- end -}}
{{- end -}}
