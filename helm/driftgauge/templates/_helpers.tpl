{{/* Chart name, overridable. */}}
{{- define "driftgauge.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* Fully qualified name: release-name plus chart name unless the release already has it. */}}
{{- define "driftgauge.fullname" -}}
{{- if .Values.fullnameOverride }}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- $name := default .Chart.Name .Values.nameOverride }}
{{- if contains $name .Release.Name }}
{{- .Release.Name | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" }}
{{- end }}
{{- end }}
{{- end }}

{{/* The image reference; the repository has no default because no public image exists. */}}
{{- define "driftgauge.image" -}}
{{- $repository := required "image.repository is required: build the driftgauge image, push it to your registry and set image.repository (see docs/deploy.md)" .Values.image.repository }}
{{- if .Values.image.digest }}
{{- /* A digest pins the exact image; the tag is then only informative, so it is left out. */}}
{{- printf "%s@%s" $repository .Values.image.digest }}
{{- else }}
{{- printf "%s:%s" $repository (.Values.image.tag | default .Chart.AppVersion) }}
{{- end }}
{{- end }}

{{/* The ConfigMap holding config.yml: existingConfigMap, or the one the chart renders. */}}
{{- define "driftgauge.configMapName" -}}
{{- .Values.existingConfigMap | default (include "driftgauge.fullname" .) }}
{{- end }}

{{/* Labels that select the pod; never change them after the first install. */}}
{{- define "driftgauge.selectorLabels" -}}
app.kubernetes.io/name: {{ include "driftgauge.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{/* Labels on every object. */}}
{{- define "driftgauge.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{ include "driftgauge.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end }}

{{/* Secret the container reads its credentials from, or empty for none. */}}
{{- define "driftgauge.secretName" -}}
{{- if .Values.secret.existingSecret }}
{{- .Values.secret.existingSecret }}
{{- else if .Values.secret.values }}
{{- include "driftgauge.fullname" . }}
{{- end }}
{{- end }}

{{- define "driftgauge.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "driftgauge.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- default "default" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{/* The matchers the alert rules add to every series selector: prometheusRule.selectors,
or by default the job the ServiceMonitor gives the target (the chart name, or nameOverride)
and the release namespace. */}}
{{- define "driftgauge.ruleSelector" -}}
{{- $selectors := .Values.prometheusRule.selectors }}
{{- if not $selectors }}
{{- $selectors = list (printf "job=%q" (include "driftgauge.name" .)) (printf "namespace=%q" .Release.Namespace) }}
{{- end }}
{{- join ", " $selectors }}
{{- end }}
