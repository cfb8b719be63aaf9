{{- define "receivers.fullname" -}}
{{- printf "%s-%s" .Release.Name .Chart.Name | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "receivers.labels" -}}
app.kubernetes.io/name: {{ .Chart.Name }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
{{- end }}

{{- define "receivers.selectorLabels" -}}
app.kubernetes.io/name: {{ .Chart.Name }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{/* The ports the receivers listen on, one per protocol, as a list of {name, port}: the port
     ends its endpoint (host:port). */}}
{{- define "receivers.ports" -}}
{{- range $receiver, $settings := .Values.config.receivers }}
{{- with $settings }}
{{- range $protocol, $p := .protocols }}
- name: {{ printf "%s-%s" $receiver $protocol | replace "_" "-" | trunc 15 | trimSuffix "-" }}
  port: {{ splitList ":" $p.endpoint | last }}
{{- end }}
{{- end }}
{{- end }}
{{- end }}
