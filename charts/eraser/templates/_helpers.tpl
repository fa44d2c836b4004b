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
{{- toYaml $cfg -}}
{{- end -}}
