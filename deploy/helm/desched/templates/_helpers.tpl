{{/* Names: as upstream's chart, so a release keeps its object names when it swaps charts. */}}
{{- define "desched.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "desched.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- $name := default .Chart.Name .Values.nameOverride -}}
{{- if contains $name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{- define "desched.namespace" -}}
{{- default .Release.Namespace .Values.namespaceOverride -}}
{{- end -}}

{{- define "desched.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "desched.selectorLabels" -}}
app.kubernetes.io/name: {{ include "desched.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "desched.labels" -}}
{{- $own := dict "helm.sh/chart" (include "desched.chart" .) "app.kubernetes.io/version" .Chart.AppVersion "app.kubernetes.io/managed-by" .Release.Service -}}
{{- $selector := include "desched.selectorLabels" . | fromYaml -}}
{{- mustMergeOverwrite (dict) (.Values.commonLabels | default dict) $own $selector | toYaml -}}
{{- end -}}

{{- define "desched.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}
{{- default (include "desched.fullname" .) .Values.serviceAccount.name -}}
{{- else -}}
{{- default "default" .Values.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{/* Metrics are served unless a flag turns them (or the whole endpoint) off. */}}
{{- define "desched.servesMetrics" -}}
{{- $off := false -}}
{{- range $k, $v := .Values.cmdOptions -}}
{{- if and (eq $k "disable-metrics") (or (kindIs "invalid" $v) (eq (toString $v) "true")) }}{{ $off = true }}{{ end -}}
{{- if and (eq $k "secure-port") (eq (toString $v) "0") }}{{ $off = true }}{{ end -}}
{{- end -}}
{{- if and (eq .Values.kind "Deployment") (not $off) }}true{{ end -}}
{{- end -}}

{{/* The container image. Upstream's own repository (a whole upstream values file brings
registry.k8s.io/descheduler/descheduler, often with upstream's tag) would run upstream's binary, or
pull a tag it never had: it is replaced by this chart's default repository (values.yaml's
image.repository, kept equal by tests/e2e/test_helm_chart.py) and appVersion; NOTES.txt says so. */}}
{{- define "desched.upstreamImage" -}}
{{- if regexMatch "^(registry[.]k8s[.]io|k8s[.]gcr[.]io)/descheduler/descheduler$" (toString .Values.image.repository) }}true{{ end -}}
{{- end -}}

{{- define "desched.image" -}}
{{- $default := "ghcr.io/your-org/desched" -}}
{{- $repository := .Values.image.repository | default $default -}}
{{- $tag := .Values.image.tag | default .Chart.AppVersion | toString -}}
{{- if include "desched.upstreamImage" . -}}
{{- $repository = $default -}}
{{- $tag = .Chart.AppVersion -}}
{{- end -}}
{{- printf "%s:%s" $repository $tag -}}
{{- end -}}

{{/* The rendered policy document ("" when deschedulerPolicy is null or empty: the user keeps the
ConfigMap). As upstream's chart, the policy goes through `tpl` ({{ .Release.Namespace }} and
.Values work in it). A v1alpha1 policy (`strategies:`) is rendered alone, as descheduler/v1alpha1
(desched converts it at start): Helm merges a user's deschedulerPolicy with the chart's default
one, whose v1alpha2 `profiles` would otherwise ride along (a v1alpha1 document has no profiles). */}}
{{- define "desched.policy" -}}
{{- $policy := .Values.deschedulerPolicy -}}
{{- if $policy -}}
{{- $apiVersion := .Values.deschedulerPolicyAPIVersion | default "descheduler/v1alpha2" -}}
{{- if hasKey $policy "strategies" -}}
{{- $policy = omit $policy "profiles" -}}
{{- $apiVersion = "descheduler/v1alpha1" -}}
{{- end -}}
apiVersion: {{ $apiVersion | quote }}
kind: "DeschedulerPolicy"
{{ tpl (toYaml $policy) . | trim }}
{{- end -}}
{{- end -}}

{{/* "true" when the policy's evictionPolicy (top level or a profile's) has a rule that remembers
across cycles (cooldown, rateLimits, waitForReplacement): desched keeps that memory in the ConfigMap
"<fullname>-safety-state" (docs/operations.md, "The safety state"). */}}
{{- define "desched.safetyState" -}}
{{- $policy := .Values.deschedulerPolicy | default dict -}}
{{- $on := false -}}
{{- range (prepend ($policy.profiles | default list) $policy) -}}
{{- with .evictionPolicy -}}
{{- if or (hasKey . "cooldown") (hasKey . "rateLimits") (hasKey . "waitForReplacement") }}{{ $on = true }}{{ end -}}
{{- end -}}
{{- end -}}
{{- if $on }}true{{ end -}}
{{- end -}}

{{/* The leader election flags (Deployment only); unset keys keep desched's defaults. */}}
{{- define "desched.leaderElectionArgs" -}}
{{- with .Values.leaderElection }}
{{- if .enabled }}
- --leader-elect=true
{{- with .leaseDuration }}
- --leader-elect-lease-duration={{ . }}
{{- end }}
{{- with .renewDeadline }}
- --leader-elect-renew-deadline={{ . }}
{{- end }}
{{- with .retryPeriod }}
- --leader-elect-retry-period={{ . }}
{{- end }}
{{- with .resourceLock }}
- --leader-elect-resource-lock={{ . }}
{{- end }}
{{- with .resourceName }}
- --leader-elect-resource-name={{ . }}
{{- end }}
{{- with (default .resourceNamescape .resourceNamespace) }}
- --leader-elect-resource-namespace={{ . }}
{{- end }}
{{- end }}
{{- end }}
{{- end -}}

{{/* The pod template, shared by the CronJob, the Job and the Deployment. */}}
{{- define "desched.podTemplate" -}}
metadata:
  labels:
    {{- $selector := include "desched.selectorLabels" . | fromYaml }}
    {{- mustMergeOverwrite (dict) (.Values.commonLabels | default dict) (.Values.podLabels | default dict) $selector | toYaml | nindent 4 }}
  annotations:
    checksum/config: {{ include (print $.Template.BasePath "/configmap.yaml") . | sha256sum }}
    {{- with .Values.podAnnotations }}
    {{- toYaml . | nindent 4 }}
    {{- end }}
spec:
  {{- if ne .Values.kind "Deployment" }}
  restartPolicy: Never
  {{- end }}
  {{- with .Values.priorityClassName }}
  priorityClassName: {{ . }}
  {{- end }}
  {{- with .Values.schedulerName }}
  schedulerName: {{ . }}
  {{- end }}
  {{- with .Values.runtimeClassName }}
  runtimeClassName: {{ . }}
  {{- end }}
  serviceAccountName: {{ include "desched.serviceAccountName" . }}
  {{- if hasKey .Values "automountServiceAccountToken" }}
  automountServiceAccountToken: {{ .Values.automountServiceAccountToken }}
  {{- end }}
  {{- with .Values.imagePullSecrets }}
  imagePullSecrets:
    {{- toYaml . | nindent 4 }}
  {{- end }}
  {{- with .Values.podSecurityContext }}
  securityContext:
    {{- toYaml . | nindent 4 }}
  {{- end }}
  {{- with .Values.dnsConfig }}
  dnsConfig:
    {{- toYaml . | nindent 4 }}
  {{- end }}
  {{- with .Values.nodeSelector }}
  nodeSelector:
    {{- toYaml . | nindent 4 }}
  {{- end }}
  {{- with .Values.affinity }}
  affinity:
    {{- toYaml . | nindent 4 }}
  {{- end }}
  {{- with .Values.topologySpreadConstraints }}
  topologySpreadConstraints:
    {{- toYaml . | nindent 4 }}
  {{- end }}
  {{- with .Values.tolerations }}
  tolerations:
    {{- toYaml . | nindent 4 }}
  {{- end }}
  {{- with .Values.initContainers }}
  initContainers:
    {{- toYaml . | nindent 4 }}
  {{- end }}
  containers:
    - name: {{ .Chart.Name }}
      image: {{ include "desched.image" . | quote }}
      imagePullPolicy: {{ .Values.image.pullPolicy }}
      command:
        {{- toYaml .Values.command | nindent 8 }}
      args:
        - --policy-config-file=/policy-dir/policy.yaml
        - --cert-dir=/tmp/certs
        {{- if eq .Values.kind "Deployment" }}
        {{- with .Values.deschedulingIntervalCronExpression }}
        - {{ printf "--descheduling-interval-cron-expression=%s" . | quote }}
        {{- with $.Values.timeZone }}
        - --descheduling-interval-cron-time-zone={{ . }}
        {{- end }}
        {{- else }}
        - --descheduling-interval={{ required "deschedulingInterval is required for kind Deployment" .Values.deschedulingInterval }}
        {{- end }}
        {{- if .Values.eventDriven }}
        - --event-driven
        {{- end }}
        {{- with include "desched.leaderElectionArgs" . | trim }}
        {{- . | nindent 8 }}
        {{- end }}
        {{- end }}
        {{- if include "desched.safetyState" . }}
        - --safety-state-configmap={{ include "desched.fullname" . }}-safety-state
        {{- end }}
        {{- range $k, $v := .Values.cmdOptions }}
        {{- if kindIs "invalid" $v }}
        - --{{ $k }}
        {{- else }}
        - {{ printf "--%s=%s" $k (toString $v) | quote }}
        {{- end }}
        {{- end }}
      env:
        # desched's own pod: what a PolicyReloadFailed Event is about (docs/operations.md)
        - name: POD_NAME
          valueFrom: {fieldRef: {fieldPath: metadata.name}}
        - name: POD_NAMESPACE
          valueFrom: {fieldRef: {fieldPath: metadata.namespace}}
      {{- with .Values.ports }}
      ports:
        {{- toYaml . | nindent 8 }}
      {{- end }}
      {{- with .Values.livenessProbe }}
      livenessProbe:
        {{- toYaml . | nindent 8 }}
      {{- end }}
      {{- with .Values.resources }}
      resources:
        {{- toYaml . | nindent 8 }}
      {{- end }}
      {{- with .Values.securityContext }}
      securityContext:
        {{- toYaml . | nindent 8 }}
      {{- end }}
      volumeMounts:
        - mountPath: /policy-dir
          name: policy-volume
        # the self-signed serving certificate (--cert-dir) on a read-only root filesystem
        - mountPath: /tmp
          name: tmp
        {{- with .Values.extraServiceAccountVolumeMounts }}
        {{- toYaml . | nindent 8 }}
        {{- end }}
  volumes:
    - name: policy-volume
      configMap:
        name: {{ include "desched.fullname" . }}
    - name: tmp
      emptyDir: {}
    {{- with .Values.extraServiceAccountVolumes }}
    {{- toYaml . | nindent 4 }}
    {{- end }}
{{- end -}}

{{/* A Go duration (5m, 1h30m, 90s) in seconds. */}}
{{- define "desched.durationSeconds" -}}
{{- $units := dict "h" 3600.0 "m" 60.0 "s" 1.0 "ms" 0.001 "us" 0.000001 "ns" 0.000000001 -}}
{{- $total := 0.0 -}}
{{- range regexFindAll "[0-9.]+(ns|us|ms|s|m|h)" (toString .) -1 -}}
{{- $unit := regexFind "(ns|us|ms|s|m|h)$" . -}}
{{- $total = addf $total (mulf (float64 (trimSuffix $unit .)) (get $units $unit)) -}}
{{- end -}}
{{- $total -}}
{{- end -}}

{{/* A memory quantity (384Mi, 1Gi, 500M, 1e9) in bytes. */}}
{{- define "desched.memoryBytes" -}}
{{- $units := dict "Ki" 1024.0 "Mi" 1048576.0 "Gi" 1073741824.0 "Ti" 1099511627776.0 "k" 1000.0 "M" 1000000.0 "G" 1000000000.0 "T" 1000000000000.0 -}}
{{- $q := toString . -}}
{{- $unit := regexFind "(Ki|Mi|Gi|Ti|k|M|G|T)$" $q -}}
{{- if $unit -}}
{{- mulf (float64 (trimSuffix $unit $q)) (get $units $unit) | int64 -}}
{{- else -}}
{{- float64 $q | int64 -}}
{{- end -}}
{{- end -}}
