{{/* The chart's name. */}}
{{- define "tessera.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* The full name: of the DaemonSet, Service and of the cluster-wide RBAC
and policy objects (one set per release). */}}
{{- define "tessera.fullname" -}}
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

{{- define "tessera.serviceAccountName" -}}
{{- default (include "tessera.fullname" .) .Values.serviceAccount.name }}
{{- end }}

{{- define "tessera.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
{{ include "tessera.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end }}

{{- define "tessera.selectorLabels" -}}
app.kubernetes.io/name: {{ include "tessera.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/component: kubelet-plugin
{{- end }}

{{/* The plugin's own directory under the kubelet's plugins directory. */}}
{{- define "tessera.pluginDataDir" -}}
{{- printf "%s/plugins/gpu.tessera.dev" (trimSuffix "/" .Values.kubeletDir) }}
{{- end }}

{{- define "tessera.registrarDir" -}}
{{- printf "%s/plugins_registry" (trimSuffix "/" .Values.kubeletDir) }}
{{- end }}

{{/* The admission webhook: its Deployment, Service and configuration are
named <fullname>-webhook, and labelled as component webhook so that the
agent's selectors never match its pods. */}}
{{- define "tessera.webhook.fullname" -}}
{{- printf "%s-webhook" (include "tessera.fullname" .) | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* The webhook's serving Secret: the operator's (webhook.tls.existingSecret)
or the one the chart or cert-manager writes. */}}
{{- define "tessera.webhook.tlsSecretName" -}}
{{- if and .Values.webhook.tls.existingSecret (not .Values.webhook.certManager.enabled) }}
{{- .Values.webhook.tls.existingSecret }}
{{- else }}
{{- printf "%s-webhook-tls" (include "tessera.fullname" .) | trunc 63 | trimSuffix "-" }}
{{- end }}
{{- end }}

{{- define "tessera.webhook.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
{{ include "tessera.webhook.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end }}

{{- define "tessera.webhook.selectorLabels" -}}
app.kubernetes.io/name: {{ include "tessera.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/component: webhook
{{- end }}

{{/* Whether the agent runs privileged: the value when set, else for nvml
and for auto, which may choose nvml on the node (values.yaml privileged). */}}
{{- define "tessera.privileged" -}}
{{- if kindIs "invalid" .Values.privileged }}
{{- has .Values.backend (list "nvml" "auto") }}
{{- else }}
{{- .Values.privileged }}
{{- end }}
{{- end }}

{{/* The agent's image: with backend sim the one that carries the
simulator's tools, which the production image leaves out. */}}
{{- define "tessera.image" -}}
{{- if eq .Values.backend "sim" }}
{{- printf "%s:%s" .Values.sim.image.repository (.Values.sim.image.tag | default .Values.image.tag | default .Chart.AppVersion) }}
{{- else }}
{{- printf "%s:%s" .Values.image.repository (.Values.image.tag | default .Chart.AppVersion) }}
{{- end }}
{{- end }}

{{/* The labels of a node with a GPU the backend drives, as a JSON list:
empty for sim, or with gpuNodeAffinity off or affinity set. */}}
{{- define "tessera.gpuNodeLabels" -}}
{{- $labels := list }}
{{- if and .Values.gpuNodeAffinity.enabled (not .Values.affinity) }}
{{- if has .Values.backend (list "nvml" "auto") }}
{{- $labels = concat $labels .Values.gpuNodeAffinity.nvidia }}
{{- end }}
{{- if has .Values.backend (list "amd" "auto") }}
{{- $labels = concat $labels .Values.gpuNodeAffinity.amd }}
{{- end }}
{{- end }}
{{- toJson $labels }}
{{- end }}

{{/* Whether the cluster's version has DRAResourceClaimGranularStatusAuthorization
on by default (beta from 1.36), which narrows resourceclaims/status to the
agent's own node. Helm sees the version, not the gate. */}}
{{- define "tessera.granularClaimStatus" -}}
{{- semverCompare ">=1.36.0-0" .Capabilities.KubeVersion.Version }}
{{- end }}

{{/* The MPS daemon pods' ServiceAccount, which has no rights. */}}
{{- define "tessera.mpsDaemonServiceAccountName" -}}
{{- printf "%s-mps-daemon" (include "tessera.fullname" .) | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* Whether the agent runs each MPS daemon as a pod (values.yaml mps.daemons). */}}
{{- define "tessera.mpsDaemonPods" -}}
{{- if not (has .Values.mps.daemons (list "pod" "process")) }}
{{- fail (printf "mps.daemons must be pod or process, not %q" .Values.mps.daemons) }}
{{- end }}
{{- eq .Values.mps.daemons "pod" }}
{{- end }}

{{/* Whether the agent runs the node's IMEX daemon as a pod (values.yaml
imex.daemons), which needs imex.channels. */}}
{{- define "tessera.imexDaemonPods" -}}
{{- if not (has .Values.imex.daemons (list "host" "pod")) }}
{{- fail (printf "imex.daemons must be host or pod, not %q" .Values.imex.daemons) }}
{{- end }}
{{- and (eq .Values.imex.daemons "pod") (gt (int .Values.imex.channels) 0) }}
{{- end }}

{{/* Whether the agent creates daemon pods at all: MPS's or IMEX's. They
share a ServiceAccount, a Role for pods and the pod settings
(mps.daemonPod). */}}
{{- define "tessera.daemonPods" -}}
{{- or (include "tessera.mpsDaemonPods" . | eq "true") (include "tessera.imexDaemonPods" . | eq "true") }}
{{- end }}

{{/* The IMEX daemon's directory of this install as a CEL string
expression (--imex-daemon-dir): imex.daemonDir, or with backend sim
<sim-state-dir>/imex, naming the node the token is bound to by default. */}}
{{- define "tessera.imexDirCEL" -}}
{{- if eq .Values.backend "sim" }}
{{- if .Values.sim.stateDir }}
{{- printf "'%s/imex'" (trimSuffix "/" .Values.sim.stateDir) }}
{{- else }}
{{- print "'/var/run/tessera/sim/' + variables.nodeName + '/imex'" }}
{{- end }}
{{- else }}
{{- printf "'%s'" (trimSuffix "/" .Values.imex.daemonDir) }}
{{- end }}
{{- end }}

{{/* The IMEX daemon programs (each with its leading arguments) the daemon
pod may run, as a JSON list of lists: with a driver root, nvidia-imex in
one of the root's program directories under its mount, where the agent
looks; the sim image's stand-in; nothing else (nvml needs a driver root). */}}
{{- define "tessera.imexPrograms" -}}
{{- $m := include "tessera.driverRootMount" . }}
{{- $out := list }}
{{- if eq .Values.backend "sim" }}
{{- $out = append $out (list "/usr/bin/tessera-sim" "imex") }}
{{- else if include "tessera.driverRoot" . }}
{{- range list "usr/bin" "usr/sbin" "bin" "sbin" "opt/bin" }}
{{- $out = append $out (list (printf "%s/%s/nvidia-imex" $m .)) }}
{{- end }}
{{- end }}
{{- toJson $out }}
{{- end }}

{{/* Whether the MPS daemon pods run privileged: the value when set, else
for nvml and auto (values.yaml mps.daemonPod.privileged). */}}
{{- define "tessera.mpsDaemonPrivileged" -}}
{{- if kindIs "invalid" .Values.mps.daemonPod.privileged }}
{{- has .Values.backend (list "nvml" "auto") }}
{{- else }}
{{- .Values.mps.daemonPod.privileged }}
{{- end }}
{{- end }}

{{/* The MPS root of this install as a CEL string expression, with a
trailing slash: what the agent's --mps-root comes to. With backend sim it
is <sim-state-dir>/mps, the state dir defaulting to
/var/run/tessera/sim/<node>, so it names the node the token is bound to. */}}
{{- define "tessera.mpsRootCEL" -}}
{{- if eq .Values.backend "sim" }}
{{- if .Values.sim.stateDir }}
{{- printf "'%s/mps/'" (trimSuffix "/" .Values.sim.stateDir) }}
{{- else }}
{{- print "'/var/run/tessera/sim/' + variables.nodeName + '/mps/'" }}
{{- end }}
{{- else }}
{{- printf "'%s/'" (trimSuffix "/" .Values.mps.root) }}
{{- end }}
{{- end }}

{{/* The driver root on the host (--nvidia-driver-root): nvidiaDriverRoot
with backends auto and nvml, sim.driverRoot with sim, none with amd. ""
when none; else a clean absolute path. */}}
{{- define "tessera.driverRoot" -}}
{{- $root := "" }}
{{- if has .Values.backend (list "auto" "nvml") }}
{{- $root = .Values.nvidiaDriverRoot | default "" }}
{{- else if eq .Values.backend "sim" }}
{{- $root = .Values.sim.driverRoot | default "" }}
{{- end }}
{{- if and $root (or (not (isAbs $root)) (ne (clean $root) $root)) }}
{{- fail (printf "the driver root (nvidiaDriverRoot, sim.driverRoot) must be a clean absolute path such as / or /run/nvidia/driver, not %q" $root) }}
{{- end }}
{{- $root }}
{{- end }}

{{/* Where the driver root is mounted in the agent and the MPS daemon pods
(--nvidia-driver-root-mount). */}}
{{- define "tessera.driverRootMount" -}}
/driver-root
{{- end }}

{{/* The driver root's program and library directories, as JSON lists of
paths under its mount: internal/driverroot's BinaryDirs and LibraryDirs
(test/chart checks they agree). The MPS daemon pods' command and
LD_LIBRARY_PATH are admitted from these only. */}}
{{- define "tessera.driverRootBinaries" -}}
{{- $m := include "tessera.driverRootMount" . }}
{{- $out := list }}
{{- range list "usr/bin" "usr/sbin" "bin" "sbin" "opt/bin" }}
{{- $out = append $out (printf "%s/%s/nvidia-cuda-mps-control" $m .) }}
{{- end }}
{{- toJson $out }}
{{- end }}
{{- define "tessera.driverRootLibraryDirs" -}}
{{- $m := include "tessera.driverRootMount" . }}
{{- $out := list }}
{{- range list "usr/lib64" "usr/lib/x86_64-linux-gnu" "usr/lib/aarch64-linux-gnu" "lib64" "lib/x86_64-linux-gnu" "lib/aarch64-linux-gnu" }}
{{- $out = append $out (printf "%s/%s" $m .) }}
{{- end }}
{{- toJson $out }}
{{- end }}

{{/* The MPS control program and its leading arguments (--mps-control), as a
JSON list: the daemon pods' command is this plus the daemon's arguments,
and the admission policy admits no other. With a driver root the agent
finds the program in it (tessera.driverRootBinaries) and this is not set.
The sim image holds the stand-in at /usr/bin/tessera-sim; every other
backend runs NVIDIA's, found on the image's PATH. */}}
{{- define "tessera.mpsControl" -}}
{{- if eq .Values.backend "sim" }}
{{- toJson (list "/usr/bin/tessera-sim" "mps-control") }}
{{- else }}
{{- toJson (list "nvidia-cuda-mps-control") }}
{{- end }}
{{- end }}

{{/* The node groups (values.yaml nodeGroups) as a JSON list, checked: each
named (a DNS label, unique), with its own nodeSelector or affinity (no two
alike), overriding only the agent settings nothing cluster-wide pins. No
groups: one group of no name and no settings (one DaemonSet, as before). */}}
{{- define "tessera.nodeGroups" -}}
{{- $allowed := list "name" "nodeSelector" "affinity" "tolerations" "partitioning" "dynamicProfiles" "dynamicWindow" "sharing" "minShareIsolation" "legacyMPSShares" "sim" "sysfsRoot" "logging" "health" "attribution" "telemetry" "resources" "priorityClassName" "podAnnotations" "extraEnv" "updateStrategy" "imex" }}
{{- $groups := .Values.nodeGroups | default list }}
{{- if not (kindIs "slice" $groups) }}
{{- fail "nodeGroups must be a list of groups" }}
{{- end }}
{{- $names := dict }}
{{- $selectors := dict }}
{{- range $groups }}
{{- if not (regexMatch "^[a-z0-9]([-a-z0-9]{0,28}[a-z0-9])?$" (toString .name)) }}
{{- fail (printf "nodeGroups: name %q must be a DNS label of at most 30 characters" (toString .name)) }}
{{- end }}
{{- if hasKey $names .name }}
{{- fail (printf "nodeGroups: two groups are named %q" .name) }}
{{- end }}
{{- $_ := set $names .name true }}
{{- $g := . }}
{{- range $k, $v := . }}
{{- if not (has $k $allowed) }}
{{- fail (printf "nodeGroups %s: %s cannot differ between groups (the release's RBAC, admission policies, Service or images pin it); install a release per such group (docs/operating.md, \"Node groups\")" $g.name $k) }}
{{- end }}
{{- end }}
{{- if and (hasKey . "sim") (not (empty (omit .sim "profile"))) }}
{{- fail (printf "nodeGroups %s: of sim only sim.profile may differ between groups" .name) }}
{{- end }}
{{- if and (hasKey . "imex") (not (empty (omit .imex "address"))) }}
{{- fail (printf "nodeGroups %s: of imex only imex.address may differ between groups" .name) }}
{{- end }}
{{- if not (or .nodeSelector .affinity) }}
{{- fail (printf "nodeGroups %s: a group needs a nodeSelector or affinity that selects its nodes and no other group's" .name) }}
{{- end }}
{{- $sel := toJson (dict "nodeSelector" .nodeSelector "affinity" .affinity) }}
{{- if hasKey $selectors $sel }}
{{- fail (printf "nodeGroups %s and %s select the same nodes: each node must run one agent" (get $selectors $sel) .name) }}
{{- end }}
{{- $_ := set $selectors $sel .name }}
{{- end }}
{{- if $groups }}
{{- toJson $groups }}
{{- else }}
{{- toJson (list (dict)) }}
{{- end }}
{{- end }}

{{/* The DaemonSet of a node group: <fullname>-<group>, or <fullname>
without groups. */}}
{{- define "tessera.daemonSetName" -}}
{{- if .NodeGroup }}
{{- printf "%s-%s" (include "tessera.fullname" .) .NodeGroup | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- include "tessera.fullname" . }}
{{- end }}
{{- end }}
