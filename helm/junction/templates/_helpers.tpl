{{/* Chart name, truncated to the 63 characters of a DNS label. */}}
{{- define "junction.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/* Release-qualified name; the release name alone when it already contains the chart name. */}}
{{- define "junction.fullname" -}}
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

{{- define "junction.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "junction.selectorLabels" -}}
app.kubernetes.io/name: {{ include "junction.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "junction.labels" -}}
helm.sh/chart: {{ include "junction.chart" . }}
{{ include "junction.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: junction
{{- with .Values.commonLabels }}
{{ toYaml . }}
{{- end }}
{{- end -}}

{{- define "junction.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}
{{- default (include "junction.fullname" .) .Values.serviceAccount.name -}}
{{- else -}}
{{- default "default" .Values.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{- define "junction.image" -}}
{{- $tag := default .Chart.AppVersion .Values.image.tag -}}
{{- if .Values.image.digest -}}
{{- printf "%s@%s" .Values.image.repository .Values.image.digest -}}
{{- else -}}
{{- printf "%s:%s" .Values.image.repository $tag -}}
{{- end -}}
{{- end -}}

{{/* Name of the Secret holding the request-state key; empty when there is none. */}}
{{- define "junction.stateKeySecret" -}}
{{- if .Values.stateKey.existingSecret -}}
{{- .Values.stateKey.existingSecret -}}
{{- else if .Values.stateKey.value -}}
{{- printf "%s-state-key" (include "junction.fullname" .) | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{/* Name of the chart's own Redis (Deployment and Service). */}}
{{- define "junction.redis.fullname" -}}
{{- printf "%s-redis" (include "junction.fullname" .) | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/* "true" when the pods share a Redis (any of redis.*): rate limits and the fleet bus. */}}
{{- define "junction.redis.enabled" -}}
{{- if or .Values.redis.deploy.enabled .Values.redis.url .Values.redis.existingSecret -}}true{{- end -}}
{{- end -}}

{{/* host:port of the chart's own Redis Service. */}}
{{- define "junction.redis.address" -}}
{{- printf "%s.%s.svc.cluster.local:%v" (include "junction.redis.fullname" .) .Release.Namespace .Values.redis.deploy.port -}}
{{- end -}}

{{/*
Name of the Secret holding the chart's Redis password (redis.deploy.auth):
the existing one, or the one the chart makes; empty when that Redis has no
password (or is not deployed).
*/}}
{{- define "junction.redis.authSecret" -}}
{{- $d := .Values.redis.deploy -}}
{{- if and $d.enabled $d.auth.enabled -}}
{{- $d.auth.existingSecret | default (include "junction.redis.fullname" .) -}}
{{- end -}}
{{- end -}}

{{/* Its key: the chart's own Secret always uses redis-password. */}}
{{- define "junction.redis.authSecretKey" -}}
{{- if .Values.redis.deploy.auth.existingSecret -}}
{{- .Values.redis.deploy.auth.existingSecretKey -}}
{{- else -}}
redis-password
{{- end -}}
{{- end -}}

{{/*
The Redis URL written into gateway.yaml; empty when the pods get it from the
environment instead (redis.existingSecret, or the chart's Redis with a
password: the URL holds it, and the ConfigMap is no place for it), or there
is no Redis.
*/}}
{{- define "junction.redis.url" -}}
{{- if .Values.redis.deploy.enabled -}}
{{- if not (include "junction.redis.authSecret" .) -}}
{{- printf "redis://%s" (include "junction.redis.address" .) -}}
{{- end -}}
{{- else -}}
{{- .Values.redis.url -}}
{{- end -}}
{{- end -}}

{{- define "junction.redis.selectorLabels" -}}
app.kubernetes.io/name: redis
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/component: redis
{{- end -}}

{{- define "junction.redis.labels" -}}
helm.sh/chart: {{ include "junction.chart" . }}
{{ include "junction.redis.selectorLabels" . }}
app.kubernetes.io/version: {{ .Values.redis.deploy.image.tag | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: junction
{{- with .Values.commonLabels }}
{{ toYaml . }}
{{- end }}
{{- end -}}

{{- define "junction.redis.image" -}}
{{- if .Values.redis.deploy.image.digest -}}
{{- printf "%s@%s" .Values.redis.deploy.image.repository .Values.redis.deploy.image.digest -}}
{{- else -}}
{{- printf "%s:%s" .Values.redis.deploy.image.repository .Values.redis.deploy.image.tag -}}
{{- end -}}
{{- end -}}

{{- define "junction.scheme" -}}
{{- if .Values.tls.enabled }}https{{ else }}http{{ end -}}
{{- end -}}

{{- define "junction.publicUrl" -}}
{{- printf "%s://%s.%s.svc.cluster.local:%v" (include "junction.scheme" .) (include "junction.fullname" .) .Release.Namespace .Values.service.port -}}
{{- end -}}

{{/*
gateway.yaml as a dict: the user's config with the keys the chart owns set
(listen address, public_url default, TLS files, request-state key env var,
and, when redis.* names a Redis, the rate-limit backend and, unless the pods
get it from the environment, the Redis URL of both the rate limits and the
fleet bus).
Sections set to null are left out.
*/}}
{{- define "junction.gatewayConfig" -}}
{{- $cfg := deepCopy (.Values.config | default dict) -}}
{{- range $k, $v := $cfg -}}
{{- if kindIs "invalid" $v -}}{{- $_ := unset $cfg $k -}}{{- end -}}
{{- end -}}
{{- $server := deepCopy ($cfg.server | default dict) -}}
{{- $_ := set $server "listen" (printf "0.0.0.0:%v" .Values.containerPort) -}}
{{- if not $server.public_url -}}
{{- $_ := set $server "public_url" (include "junction.publicUrl" .) -}}
{{- end -}}
{{- if .Values.tls.enabled -}}
{{- $_ := set $server "tls" (dict "cert_file" "/etc/junction-tls/tls.crt" "key_file" "/etc/junction-tls/tls.key") -}}
{{- end -}}
{{- range $k, $v := $server -}}
{{- if kindIs "invalid" $v -}}{{- $_ := unset $server $k -}}{{- end -}}
{{- end -}}
{{- $_ := set $cfg "server" $server -}}
{{- if include "junction.stateKeySecret" . -}}
{{- $rs := deepCopy ($cfg.request_state | default dict) -}}
{{- $_ := set $rs "secret_env" "JUNCTION_STATE_KEY" -}}
{{- $_ := set $cfg "request_state" $rs -}}
{{- end -}}
{{- if include "junction.redis.enabled" . -}}
{{- $rl := deepCopy ($cfg.rate_limits | default dict) -}}
{{- $_ := set $rl "backend" "redis" -}}
{{- $fleet := dict -}}
{{- with include "junction.redis.url" . -}}
{{- $_ := set $rl "redis_url" . -}}
{{- $_ := set $fleet "redis_url" . -}}
{{- end -}}
{{- $_ := set $cfg "rate_limits" $rl -}}
{{- if $fleet -}}
{{- $_ := set $cfg "fleet" $fleet -}}
{{- end -}}
{{- end -}}
{{- toYaml $cfg -}}
{{- end -}}

{{/* Render-time checks: mistakes that would only show once pods run. */}}
{{- define "junction.validate" -}}
{{- $multi := or .Values.autoscaling.enabled (gt (int .Values.replicaCount) 1) -}}
{{- if and $multi (not (include "junction.stateKeySecret" .)) -}}
{{- fail "more than one replica (replicaCount > 1 or autoscaling.enabled) needs a shared request-state key: set stateKey.existingSecret (or stateKey.value)" -}}
{{- end -}}
{{- if and .Values.stateKey.value (lt (len .Values.stateKey.value) 32) -}}
{{- fail "stateKey.value must be at least 32 bytes" -}}
{{- end -}}
{{- if and .Values.tls.enabled (not .Values.tls.secretName) -}}
{{- fail "tls.enabled needs tls.secretName (a kubernetes.io/tls Secret)" -}}
{{- end -}}
{{- $redisSources := 0 -}}
{{- range (list .Values.redis.deploy.enabled .Values.redis.url .Values.redis.existingSecret) -}}
{{- if . -}}{{- $redisSources = add1 $redisSources -}}{{- end -}}
{{- end -}}
{{- if gt $redisSources 1 -}}
{{- fail "redis: set one of redis.deploy.enabled, redis.url and redis.existingSecret" -}}
{{- end -}}
{{- $rl := .Values.config.rate_limits | default dict -}}
{{- if and (include "junction.redis.enabled" .) $rl.redis_url -}}
{{- fail "config.rate_limits.redis_url is set by the chart from redis.*: leave it out" -}}
{{- end -}}
{{- if and (include "junction.redis.enabled" .) (eq (toString ($rl.backend | default "redis")) "local") -}}
{{- fail "config.rate_limits.backend is local, but redis.* names a Redis: leave backend out (the chart sets redis)" -}}
{{- end -}}
{{- $envNames := list -}}
{{- range .Values.secretEnv -}}{{- $envNames = append $envNames .name -}}{{- end -}}
{{- range .Values.env -}}{{- $envNames = append $envNames .name -}}{{- end -}}
{{- range (.Values.config.upstreams | default list) -}}
{{- if and .bearer_token_env (not (has .bearer_token_env $envNames)) (not $.Values.envFrom) -}}
{{- fail (printf "upstream %q reads its token from $%s: add {name: %s, secretName: ..., key: ...} to secretEnv" (toString .id) .bearer_token_env .bearer_token_env) -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{/* PromQL matchers selecting this release's series. */}}
{{- define "junction.promSelector" -}}
{{- if .Values.prometheusRule.selector -}}
{{- .Values.prometheusRule.selector -}}
{{- else -}}
{{- printf "job=%q,namespace=%q" (include "junction.fullname" .) .Release.Namespace -}}
{{- end -}}
{{- end -}}

{{/* A probe from values, with the httpGet scheme following tls.enabled. */}}
{{- define "junction.probe" -}}
{{- $p := deepCopy .probe -}}
{{- if $p.httpGet -}}
{{- $_ := set $p.httpGet "scheme" .scheme -}}
{{- end -}}
{{- toYaml $p -}}
{{- end -}}

{{/* The container's env list (YAML), empty when there is nothing to set. */}}
{{- define "junction.env" -}}
{{- $multi := or .Values.autoscaling.enabled (gt (int .Values.replicaCount) 1) }}
{{- if and $multi (not .Values.tls.enabled) }}
{{- /* Each pod as the others reach it: calls it holds are relayed to it. */}}
- name: POD_IP
  valueFrom:
    fieldRef:
      fieldPath: status.podIP
- name: JUNCTION_FLEET__ADVERTISE_URL
  value: "http://$(POD_IP):{{ .Values.containerPort }}"
{{- end }}
{{- if include "junction.stateKeySecret" . }}
- name: JUNCTION_STATE_KEY
  valueFrom:
    secretKeyRef:
      name: {{ include "junction.stateKeySecret" . }}
      key: {{ .Values.stateKey.key }}
{{- end }}
{{- if .Values.redis.existingSecret }}
{{- range (list "JUNCTION_RATE_LIMITS__REDIS_URL" "JUNCTION_FLEET__REDIS_URL") }}
- name: {{ . }}
  valueFrom:
    secretKeyRef:
      name: {{ $.Values.redis.existingSecret }}
      key: {{ $.Values.redis.existingSecretKey }}
{{- end }}
{{- end }}
{{- with include "junction.redis.authSecret" . }}
{{- /*
The chart's Redis password, then the URLs with it: Kubernetes expands
$(REDIS_PASSWORD) from the entries above it. Not JUNCTION_*: those are config keys.
*/}}
- name: REDIS_PASSWORD
  valueFrom:
    secretKeyRef:
      name: {{ . }}
      key: {{ include "junction.redis.authSecretKey" $ }}
{{- range (list "JUNCTION_RATE_LIMITS__REDIS_URL" "JUNCTION_FLEET__REDIS_URL") }}
- name: {{ . }}
  value: {{ printf "redis://:$(REDIS_PASSWORD)@%s" (include "junction.redis.address" $) | quote }}
{{- end }}
{{- end }}
{{- range .Values.secretEnv }}
- name: {{ .name }}
  valueFrom:
    secretKeyRef:
      name: {{ .secretName }}
      key: {{ .key }}
      {{- if hasKey . "optional" }}
      optional: {{ .optional }}
      {{- end }}
{{- end }}
{{- with include "junction.threads" . }}
- name: TOKIO_WORKER_THREADS
  value: {{ . | quote }}
{{- end }}
{{- with .Values.env }}
{{ toYaml . }}
{{- end }}
{{- end -}}

{{/*
The connection threads the pod is told to start (TOKIO_WORKER_THREADS), or
nothing: `threads` when set; with a CPU limit, nothing (Junction sizes itself
to the quota); otherwise the CPU request rounded up, at least 2. Nothing either
when `env` sets the variable itself.
*/}}
{{- define "junction.threads" -}}
{{- $own := false }}
{{- range .Values.env }}
{{- if eq (toString .name) "TOKIO_WORKER_THREADS" }}{{ $own = true }}{{ end }}
{{- end }}
{{- if not $own }}
{{- $resources := .Values.resources | default dict }}
{{- if gt (int .Values.threads) 0 }}
{{- .Values.threads }}
{{- else if not (dig "limits" "cpu" "" $resources) }}
{{- include "junction.cpuCeil" (dig "requests" "cpu" "" $resources) }}
{{- end }}
{{- end }}
{{- end -}}

{{/*
A CPU quantity ("100m", "1.5", 2) in whole CPUs, rounded up, at least 2.
*/}}
{{- define "junction.cpuCeil" -}}
{{- $q := toString . }}
{{- $cores := 0.0 }}
{{- if hasSuffix "m" $q }}
{{- $cores = divf (trimSuffix "m" $q | float64) 1000 }}
{{- else if $q }}
{{- $cores = float64 $q }}
{{- end }}
{{- max 2 (ceil $cores | int) }}
{{- end -}}
