{{/*
Name of every object of a release: the release name (which is the MyProxy's name), so that
`kubectl get deploy,svc <myproxy>` finds them. Truncated to 63 characters (DNS label limit).
*/}}
{{- define "myproxy.fullname" -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "myproxy.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/* Labels that select the proxy Pods; they never change over a release's life. */}}
{{- define "myproxy.selectorLabels" -}}
app.kubernetes.io/name: {{ .Chart.Name }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{/* Standard labels on every object. */}}
{{- define "myproxy.labels" -}}
helm.sh/chart: {{ include "myproxy.chart" . }}
{{ include "myproxy.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/component: proxy
app.kubernetes.io/part-of: myproxy-operator
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end -}}

{{/* Container ports nginx listens on: unprivileged, so nginx runs as non-root. */}}
{{- define "myproxy.httpPort" -}}8080{{- end -}}
{{- define "myproxy.httpsPort" -}}8443{{- end -}}

{{/*
Checksum of the data of a Secret in the cluster, for a pod annotation that rolls the Pods when
the Secret's content changes. Without a cluster (helm template) the Secret reads as empty.
*/}}
{{- define "myproxy.secretChecksum" -}}
{{- (lookup "v1" "Secret" .namespace .name).data | default dict | toJson | sha256sum -}}
{{- end -}}

{{/*
A second line of defence behind values.schema.json, for values that become nginx syntax: the
rendering fails unless the value matches the pattern. Called with (list field value pattern).
*/}}
{{- define "myproxy.refuseUnless" -}}
{{- $field := index . 0 }}{{ $value := index . 1 | toString }}{{ $pattern := index . 2 -}}
{{- if not (regexMatch $pattern $value) -}}
{{- fail (printf "%s: %q is refused: it must match %s" $field $value $pattern) -}}
{{- end -}}
{{- end -}}

{{/*
A value as an nginx quoted string that says exactly the value: quoted and escaped, and every
"$" written as ${myproxy_dollar} (nginx.conf.tpl defines it as "$"), so that no variable is read.
*/}}
{{- define "myproxy.nginxString" -}}
{{- . | toString | quote | replace "$" "${myproxy_dollar}" -}}
{{- end -}}
