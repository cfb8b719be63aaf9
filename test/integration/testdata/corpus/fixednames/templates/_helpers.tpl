{{/* Every object's name starts with this, not with the release's name. */}}
{{- define "fixednames.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 40 | trimSuffix "-" }}
{{- end }}

{{- define "fixednames.labels" -}}
app.kubernetes.io/name: {{ include "fixednames.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: {{ include "fixednames.name" . }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
{{- end }}

{{- define "fixednames.selectorLabels" -}}
app.kubernetes.io/name: {{ include "fixednames.name" . }}-server
{{- end }}
