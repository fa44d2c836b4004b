{{- define "fixture.labels" -}}
{{- if not .Values.global.static }}
app.kubernetes.io/instance: {{ .Release.Name | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service | quote }}
app.kubernetes.io/name: {{ .Chart.Name | quote }}
helm.sh/chart: {{ .Chart.Name | quote }}
{{- end }}
{{- end -}}

{{/* One CRD version: upstream's schema is the same in every version. */}}
{{- define "fixture.version" -}}
- name: {{ .name }}
  served: true
  storage: {{ .storage }}
  {{- if .deprecated }}
  deprecated: true
  deprecationWarning: v1alpha1 of the eraser API has been deprecated. Please migrate to v1.
  {{- end }}
  subresources:
    status: {}
  schema:
    openAPIV3Schema:
      type: object
      properties:
        apiVersion: {type: string}
        kind: {type: string}
        metadata: {type: object}
        {{- .schema | nindent 8 }}
{{- end -}}

{{- define "fixture.crd" -}}
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: {{ .plural }}.eraser.sh
  labels:
    {{- include "fixture.labels" .root | nindent 4 }}
spec:
  group: eraser.sh
  names:
    kind: {{ .kind }}
    listKind: {{ .kind }}List
    plural: {{ .plural }}
    singular: {{ .kind | lower }}
  scope: Cluster
  versions:
  {{- include "fixture.version" (dict "name" "v1" "storage" true "schema" .schema) | nindent 2 }}
  {{- include "fixture.version" (dict "name" "v1alpha1" "storage" false "deprecated" true "schema" .schema) | nindent 2 }}
{{- end -}}
