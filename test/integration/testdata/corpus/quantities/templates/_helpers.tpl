{{- define "quantities.fullname" -}}
{{- printf "%s-%s" .Release.Name .Chart.Name | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "quantities.labels" -}}
app.kubernetes.io/name: {{ .Chart.Name }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
{{- end }}

{{- define "quantities.selectorLabels" -}}
app.kubernetes.io/name: {{ .Chart.Name }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{/* A component's Deployment: (dict "root" $ "component" "operator" "resources" .Values.resources.operator). */}}
{{- define "quantities.deployment" -}}
apiVersion: apps/v1
kind: Deployment
metadata:
  name: {{ include "quantities.fullname" .root }}-{{ .component | kebabcase }}
  labels:
    {{- include "quantities.labels" .root | nindent 4 }}
    app.kubernetes.io/component: {{ .component | kebabcase }}
spec:
  replicas: 1
  selector:
    matchLabels:
      {{- include "quantities.selectorLabels" .root | nindent 6 }}
      app.kubernetes.io/component: {{ .component | kebabcase }}
  template:
    metadata:
      labels:
        {{- include "quantities.selectorLabels" .root | nindent 8 }}
        app.kubernetes.io/component: {{ .component | kebabcase }}
    spec:
      containers:
        - name: {{ .component | kebabcase }}
          image: "{{ .root.Values.image.repository }}:{{ .root.Values.image.tag }}"
          ports:
            - name: metrics
              containerPort: {{ .root.Values.service.port }}
          resources:
            {{- toYaml .resources | nindent 12 }}
{{- end }}
