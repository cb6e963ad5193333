{{- define "picomq-connect.name" -}}
{{- .Chart.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "picomq-connect.fullname" -}}
{{- if contains .Chart.Name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name .Chart.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{- define "picomq-connect.selectorLabels" -}}
app.kubernetes.io/name: {{ include "picomq-connect.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "picomq-connect.labels" -}}
{{ include "picomq-connect.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
{{- end -}}

{{/* The stop must fit in the pod's grace period: the runtime's shutdown_timeout plus a margin. */}}
{{- define "picomq-connect.gracePeriod" -}}
{{- if le (int .Values.runtime.terminationGraceMarginSeconds) 0 -}}
{{- fail "runtime.terminationGraceMarginSeconds must be > 0: the grace period has to exceed shutdown_timeout" -}}
{{- end -}}
{{- add .Values.runtime.shutdownTimeoutSeconds .Values.runtime.terminationGraceMarginSeconds -}}
{{- end -}}

{{/* A probe of the operations API: httpGet without a token; with one, the image's own probe
     (picomq-connect --health), which sends PICOMQ_API_TOKEN from the Secret. */}}
{{- define "picomq-connect.probe" -}}
{{- $root := index . 0 -}}{{- $path := index . 1 -}}{{- $p := index . 2 -}}
{{- if $root.Values.api.token.existingSecret }}
exec:
  command: ["picomq-connect", "--health", "http://127.0.0.1:{{ $root.Values.api.port }}{{ $path }}"]
{{- else }}
httpGet:
  path: {{ $path }}
  port: api
{{- end }}
initialDelaySeconds: {{ $p.initialDelaySeconds }}
periodSeconds: {{ $p.periodSeconds }}
failureThreshold: {{ $p.failureThreshold }}
timeoutSeconds: 5
{{- end -}}
