{{/* The values of metrics.auth, metrics.tls and serviceMonitor.bearerTokenSecret
with their defaults, as JSON (fromJson reads it): `helm upgrade
--reuse-values` from a chart before them renders with that chart's values,
where they are missing, and a nil map would fail the render. */}}
{{- define "tessera.metricsValues" -}}
{{- $m := .Values.metrics | default dict }}
{{- toJson (dict
  "auth" (dig "auth" "enabled" true $m)
  "scrapers" (dig "auth" "scraperServiceAccounts" (list) $m)
  "tlsSecret" (dig "tls" "existingSecret" "" $m)
  "serverName" (dig "tls" "serverName" "" $m)
  "bearerTokenSecret" (dig "bearerTokenSecret" (dict) (.Values.serviceMonitor | default dict))) }}
{{- end }}

{{/* "true" when the agent serves /metrics with authentication, over HTTPS
(--metrics-auth): metrics on and metrics.auth.enabled. */}}
{{- define "tessera.metricsAuth" -}}
{{- $mv := include "tessera.metricsValues" . | fromJson }}
{{- and .Values.metrics.enabled $mv.auth | toString }}
{{- end }}

{{/* "true" when the agent polls the kubelet for which pod holds which device
(--attribution-poll), putting tenants' names on the metrics port: as
daemonset.yaml computes $attribution. */}}
{{- define "tessera.attribution" -}}
{{- and .Values.metrics.enabled (not (has (toString .Values.attribution.poll) (list "0" "0s" ""))) | toString }}
{{- end }}

{{/* "true" when the NetworkPolicy admits to the metrics port only peers of a
namespace the tenants cannot put pods in: each peer has a namespaceSelector
that selects something in particular (not {}), or a podSelector alone,
which selects pods of the release namespace. An ipBlock or an empty
namespaceSelector may cover a tenant's pod. */}}
{{- define "tessera.metricsScrapersPinned" -}}
{{- $pinned := and .Values.networkPolicy.enabled (not .Values.hostNetwork) (gt (len .Values.networkPolicy.metricsFrom) 0) }}
{{- range .Values.networkPolicy.metricsFrom }}
{{- if hasKey . "ipBlock" }}
{{- $pinned = false }}
{{- else if hasKey . "namespaceSelector" }}
{{- $sel := .namespaceSelector | default dict }}
{{- if not (or $sel.matchLabels $sel.matchExpressions) }}
{{- $pinned = false }}
{{- end }}
{{- else if not (hasKey . "podSelector") }}
{{- $pinned = false }}
{{- end }}
{{- end }}
{{- $pinned | toString }}
{{- end }}

{{/* The metrics values' rules; a render that breaks one fails naming the
values. Included by service.yaml, rendered whenever metrics are on. */}}
{{- define "tessera.metricsCheck" -}}
{{- $mv := include "tessera.metricsValues" . | fromJson }}
{{- if $mv.auth }}
{{- range $mv.scrapers }}
{{- if not (and .name .namespace) }}
{{- fail (printf "metrics.auth.scraperServiceAccounts: %s needs a name and a namespace" (toJson .)) }}
{{- end }}
{{- end }}
{{- with $mv.bearerTokenSecret }}
{{- if not (and .name .key) }}
{{- fail "serviceMonitor.bearerTokenSecret needs a name and a key (the Secret and its key holding Prometheus's token)" }}
{{- end }}
{{- end }}
{{- else }}
{{- if $mv.tlsSecret }}
{{- fail "metrics.tls.existingSecret is the certificate of the HTTPS port of metrics.auth.enabled=true; with metrics.auth.enabled=false the port serves plain HTTP: drop one of them" }}
{{- end }}
{{- if and (include "tessera.attribution" . | eq "true") (include "tessera.metricsScrapersPinned" . | eq "false") }}
{{- fail "metrics.auth.enabled=false serves /metrics to anyone who reaches the port, and attribution.poll puts every tenant's pod, namespace, claim and container names there. Set attribution.poll=0, or networkPolicy.enabled=true (without hostNetwork) with every networkPolicy.metricsFrom peer pinned to the scraper's namespace (a namespaceSelector such as {matchLabels: {kubernetes.io/metadata.name: monitoring}}), or keep metrics.auth.enabled=true (docs/metrics.md, Who may read it)" }}
{{- end }}
{{- end }}
{{- end }}
