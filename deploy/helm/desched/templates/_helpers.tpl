{{- define "desched.name" -}}{{ .Release.Name }}{{- end -}}
{{- define "desched.serviceAccountName" -}}{{ default (include "desched.name" .) .Values.serviceAccount.name }}{{- end -}}
{{- define "desched.labels" -}}
app.kubernetes.io/name: desched
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
{{- end -}}
{{- define "desched.podSpec" -}}
priorityClassName: {{ .Values.priorityClassName }}
serviceAccountName: {{ include "desched.serviceAccountName" . }}
containers:
  - name: desched
    image: "{{ .Values.image.repository }}:{{ default .Chart.AppVersion .Values.image.tag }}"
    imagePullPolicy: {{ .Values.image.pullPolicy }}
    args:
      - run
      - --policy-config-file=/policy-dir/policy.yaml
      - --cert-dir=/tmp/certs
      {{- if eq .Values.kind "Deployment" }}
      - --descheduling-interval={{ .Values.deschedulingInterval }}
      {{- if .Values.eventDriven }}
      - --event-driven
      {{- end }}
      {{- if .Values.leaderElection.enabled }}
      - --leader-elect=true
      - --leader-elect-lease-duration={{ .Values.leaderElection.leaseDuration }}
      - --leader-elect-renew-deadline={{ .Values.leaderElection.renewDeadline }}
      - --leader-elect-retry-period={{ .Values.leaderElection.retryPeriod }}
      - --leader-elect-resource-name={{ .Values.leaderElection.resourceName }}
      - --leader-elect-resource-namespace={{ .Values.leaderElection.resourceNamespace }}
      {{- end }}
      {{- end }}
      {{- range $k, $v := .Values.cmdOptions }}
      - --{{ $k }}={{ $v }}
      {{- end }}
    ports:
      - {containerPort: 10258, name: https, protocol: TCP}
    livenessProbe:
      httpGet: {path: /healthz, port: 10258, scheme: HTTPS}
      initialDelaySeconds: 5
      periodSeconds: 10
    resources: {{- toYaml .Values.resources | nindent 6 }}
    securityContext:
      allowPrivilegeEscalation: false
      capabilities: {drop: ["ALL"]}
      privileged: false
      readOnlyRootFilesystem: true
      runAsNonRoot: true
      runAsUser: 10001
    volumeMounts:
      - {mountPath: /policy-dir, name: policy-volume}
      - {mountPath: /tmp, name: tmp}
volumes:
  - name: policy-volume
    configMap:
      name: {{ include "desched.name" . }}
  - name: tmp
    emptyDir: {}
{{- end -}}
