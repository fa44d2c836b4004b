{{/* The chart's name, as the app.kubernetes.io/name label carries it. */}}
{{- define "eraser.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "eraser.commonLabels" -}}
app.kubernetes.io/instance: {{ .Release.Name | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service | quote }}
app.kubernetes.io/name: {{ include "eraser.name" . | quote }}
helm.sh/chart: {{ include "eraser.name" . | quote }}
{{- end -}}

{{/*
Selector of the manager's pods. These are upstream's labels and values:
a Deployment's selector cannot change, so keeping them lets `helm upgrade`
move a release of upstream's chart to this one.
*/}}
{{- define "eraser.selectorLabels" -}}
{{ include "eraser.commonLabels" . }}
control-plane: controller-manager
{{- end -}}

{{- define "eraser.labels" -}}
{{ include "eraser.commonLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
{{- end -}}

{{/*
The EraserConfig document: runtimeConfig as given, with apiVersion and kind
filled in when the values leave them out (upstream's v1.0.0 values did; the
shape tells the version apart).
*/}}
{{- define "eraser.config" -}}
{{- $v := include "eraser.values" . | fromYaml -}}
{{- $cfg := deepCopy ($v.runtimeConfig | default dict) -}}
{{- if not $cfg.apiVersion -}}
{{- $manager := $cfg.manager | default dict -}}
{{- $components := $cfg.components | default dict -}}
{{- $version := "eraser.sh/v1alpha3" -}}
{{- if hasKey $components "eraser" -}}
{{- $version = "eraser.sh/v1alpha1" -}}
{{- else if kindIs "string" $manager.runtime -}}
{{- $version = "eraser.sh/v1alpha2" -}}
{{- end -}}
{{- $_ := set $cfg "apiVersion" $version -}}
{{- end -}}
{{- if not $cfg.kind -}}
{{- $_ := set $cfg "kind" "EraserConfig" -}}
{{- end -}}
{{- /* The worker images: a repository set is resolved as the manager's
is (eraser.repo); with imageRegistry, one left out gets its default
repository under imageRegistry written here. A tag left out stays the
manager's default, its own version, so the workers follow the manager. The
remover is components.eraser before v1alpha2. */ -}}
{{- $components := $cfg.components | default dict -}}
{{- $names := dict "collector" "collector" "scanner" "eraser-trivy-scanner" -}}
{{- $_ := set $names (eq $cfg.apiVersion "eraser.sh/v1alpha1" | ternary "eraser" "remover") "remover" -}}
{{- range $key, $name := $names -}}
{{- $component := get $components $key -}}
{{- $path := printf "runtimeConfig.components.%s.image.repo" $key -}}
{{- $repo := dig "image" "repo" "" ($component | default dict) | toString -}}
{{- if or $repo $v.imageRegistry -}}
{{- $component = $component | default dict -}}
{{- $image := $component.image | default dict -}}
{{- $_ := set $image "repo" (include "eraser.repo" (list $ ($repo | default (printf "%s/%s" (include "eraser.defaultRepo" $) $name)) $path)) -}}
{{- $_ := set $component "image" $image -}}
{{- $_ := set $components $key $component -}}
{{- end -}}
{{- $windows := dig "windows" "image" "repo" "" ($component | default dict) | toString -}}
{{- if $windows -}}
{{- $_ := set $component.windows.image "repo" (include "eraser.repo" (list $ $windows (printf "runtimeConfig.components.%s.windows.image.repo" $key))) -}}
{{- end -}}
{{- end -}}
{{- /* A released chart pins the release's worker images to the digests it
pushed (files/release.yaml): written out in full, repository:tag@digest
(the runtime pulls by the digest; the tag is kept for reading, and for
helm test's check of the release's tag). */ -}}
{{- if (include "eraser.release" . | fromYaml).digests -}}
{{- range $key, $name := $names -}}
{{- $component := get $components $key | default dict -}}
{{- $image := $component.image | default dict -}}
{{- $repo := $image.repo | default (include "eraser.repo" (list $ (printf "%s/%s" (include "eraser.defaultRepo" $) $name) "")) | toString -}}
{{- $tag := $image.tag | default $.Chart.AppVersion | toString -}}
{{- $digest := include "eraser.digest" (list $ $repo $tag) -}}
{{- if $digest -}}
{{- $_ := set $image "repo" $repo -}}
{{- $_ := set $image "tag" (printf "%s@%s" $tag $digest) -}}
{{- $_ := set $component "image" $image -}}
{{- $_ := set $components $key $component -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- if $components -}}
{{- $_ := set $cfg "components" $components -}}
{{- end -}}
{{- toYaml $cfg -}}
{{- end -}}

{{/*
The digest a released chart pulls an image by (files/release.yaml), or "":
when the tag is the release's (the chart's appVersion) and the repository's
last element names one of its images, wherever imageRegistry moved it.
Takes (list $root $repo $tag).
*/}}
{{- define "eraser.digest" -}}
{{- $root := index . 0 -}}
{{- $repo := index . 1 | toString -}}
{{- if eq (index . 2 | toString) (toString $root.Chart.AppVersion) -}}
{{- get ((include "eraser.release" $root | fromYaml).digests | default dict) (base $repo) -}}
{{- end -}}
{{- end -}}

{{/*
The registry path this chart's images are under by default: the one `make
release REGISTRY=...` packaged the chart for (files/release.yaml, which only
a released chart has), else where the project publishes them
(internal/process/version.DefaultRepo).
*/}}
{{- define "eraser.defaultRepo" -}}
{{- (include "eraser.release" . | fromYaml).registry | default (include "eraser.publishedRepo" .) -}}
{{- end -}}

{{- define "eraser.publishedRepo" -}}
ghcr.io/eraser-oss
{{- end -}}

{{/* files/release.yaml as YAML: what `make release` packaged the chart for; empty in a checkout. */}}
{{- define "eraser.release" -}}
{{- .Files.Get "files/release.yaml" -}}
{{- end -}}

{{/*
The version every image of this release runs: a released chart's
appVersion, which a deploy.image.tag set to anything else contradicts (NOTES
say so and helm test fails); in a checkout, whose chart carries a
development appVersion, the images are the user's build: deploy.image.tag
when set.
*/}}
{{- define "eraser.version" -}}
{{- $v := include "eraser.values" . | fromYaml -}}
{{- if (include "eraser.release" . | fromYaml).registry -}}
{{- .Chart.AppVersion -}}
{{- else -}}
{{- dig "deploy" "image" "tag" "" $v | toString | default .Chart.AppVersion -}}
{{- end -}}
{{- end -}}

{{/*
An image repository as the chart pulls it. One at the default location
(ghcr.io/eraser-oss/<name>, or the registry path the release was packaged
for) is pulled from imageRegistry when that is set, else from the release's
registry path: <imageRegistry>/<name>, as `make release
REGISTRY=<imageRegistry>` pushes it (a mirror of ghcr.io is then
imageRegistry=<mirror>/eraser-oss). With imageRegistry set, any other
repository outside it fails the render, naming the value (index . 2): a
mirror switch that moved some images and not others would pull the rest
from where the cluster may not reach. Takes (list $root $repo $valuePath).
*/}}
{{- define "eraser.repo" -}}
{{- $root := index . 0 -}}
{{- $repo := index . 1 | toString -}}
{{- $registry := trimSuffix "/" ($root.Values.imageRegistry | default "" | toString) -}}
{{- $target := $registry | default (include "eraser.defaultRepo" $root) -}}
{{- $moved := "" -}}
{{- range $from := list (include "eraser.publishedRepo" $root) (include "eraser.defaultRepo" $root) -}}
{{- if and (not $moved) (hasPrefix (printf "%s/" $from) $repo) -}}
{{- $moved = printf "%s/%s" $target (trimPrefix (printf "%s/" $from) $repo) -}}
{{- end -}}
{{- end -}}
{{- if $moved -}}
{{- $moved -}}
{{- else if and $registry (not (hasPrefix (printf "%s/" $registry) $repo)) -}}
{{- fail (printf "imageRegistry=%s cannot move %s (%s): it is not under %s, where this chart's images are. Unset %s to pull this project's image from imageRegistry, or give a repository under %s" $registry $repo (index . 2) (include "eraser.defaultRepo" $root) (index . 2) $registry) -}}
{{- else -}}
{{- $repo -}}
{{- end -}}
{{- end -}}

{{/*
The manager's image as the Deployment runs it: repository (eraser.repo),
tag (deploy.image.tag, else the chart's appVersion), and a digest when one
is given; a released chart's own image by the digest it pushed
(eraser.digest).
*/}}
{{- define "eraser.managerImage" -}}
{{- $v := include "eraser.values" . | fromYaml -}}
{{- $img := $v.deploy.image | default dict -}}
{{- $repo := include "eraser.repo" (list . $img.repo "deploy.image.repo") -}}
{{- $tag := toString ($img.tag | default .Chart.AppVersion) -}}
{{- $ref := printf "%s:%s" $repo $tag -}}
{{- $released := include "eraser.digest" (list . $repo $tag) -}}
{{- if $img.digest -}}
{{- $ref = printf "%s@%s" $ref $img.digest -}}
{{- else if $released -}}
{{- $ref = printf "%s@%s" $ref $released -}}
{{- end -}}
{{- $ref -}}
{{- end -}}

{{/* Labels of the metrics Service, which the ServiceMonitor selects by. */}}
{{- define "eraser.metricsLabels" -}}
app.kubernetes.io/component: metrics
{{- end -}}

{{/*
"true" when the CRD named (index . 1) is this release's to render: not in
the cluster yet (or no cluster: helm template, --dry-run=client), owned by
this release (Helm's own ownership metadata), or crds.adopt is set. Takes
(list $root $name).
*/}}
{{- define "eraser.crdOwned" -}}
{{- $root := index . 0 -}}
{{- $existing := lookup "apiextensions.k8s.io/v1" "CustomResourceDefinition" "" (index . 1) -}}
{{- if or (not $existing) (dig "crds" "adopt" false ($root.Values | toYaml | fromYaml)) -}}
true
{{- else -}}
{{- $labels := $existing.metadata.labels | default dict -}}
{{- $annotations := $existing.metadata.annotations | default dict -}}
{{- and (eq (get $labels "app.kubernetes.io/managed-by") "Helm") (eq (get $annotations "meta.helm.sh/release-name") $root.Release.Name) (eq (get $annotations "meta.helm.sh/release-namespace") $root.Release.Namespace) | toString -}}
{{- end -}}
{{- end -}}

{{/*
The values in force, as YAML (include "eraser.values" . | fromYaml): the
release's values over the chart's defaults (files/values-defaults.yaml, the
copy of values.yaml that make manifests writes), then upstream's settings
that would change meaning here translated (eraser.upstream). Helm fills in a
chart's defaults itself, except on `helm upgrade --reuse-values`, which
keeps the previous release's values alone: from upstream's release, or from
an older version of this chart, the keys this one added would be missing.
*/}}
{{- define "eraser.values" -}}
{{- $v := .Files.Get "files/values-defaults.yaml" | fromYaml -}}
{{- $_ := include "eraser.merge" (list $v .Values) -}}
{{- $_ := include "eraser.upstream" (list . $v) -}}
{{- toYaml $v -}}
{{- end -}}

{{/*
Merges (index . 1) into the map (index . 0), in place: maps key by key,
anything else replaced. Unlike sprig's mergeOverwrite, a false, 0 or ""
given replaces a default.
*/}}
{{- define "eraser.merge" -}}
{{- $dst := index . 0 -}}
{{- range $k, $src := index . 1 -}}
{{- $cur := get $dst $k -}}
{{- if and (kindIs "map" $src) (kindIs "map" $cur) -}}
{{- $_ := include "eraser.merge" (list $cur $src) -}}
{{- else -}}
{{- $_ := set $dst $k (deepCopy $src) -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{/*
Upstream Eraser's values that would change meaning under this chart,
translated in place in the values (index . 1), each with a line in
_translated that NOTES prints (docs/migrating.md#upstream-values-files):

- upstream's images (ghcr.io/eraser-dev/..., ghcr.io/azure/...): this
  chart would run upstream's manager or workers with its own configuration.
  They become this release's images.
- a worker image tag of an upstream release (v1.0.0 to v1.5.x) with no
  repository: it would name a tag of this project's repositories that
  upstream published. It becomes this release's tag.
- upstream's manager memory (limit 30Mi, request 20Mi): this manager needs
  more. It becomes this chart's default.
- upstream's default worker sizes, which its EraserConfig wrote out (a
  copied configuration carries them): the scanner's request (cpu 1000m, mem
  500Mi), which a packed node's kubelet refuses to admit since worker pods
  bypass the scheduler, and the remover's memory limit 30Mi, at the edge
  for a node with many images. Each is dropped, so that the manager applies
  its own default (the numbers in the notes are the configuration's
  defaults, which a render test holds them to).
Any other memory limit under 128Mi is refused, with the fix.
*/}}
{{- define "eraser.upstream" -}}
{{- $root := index . 0 -}}
{{- $v := index . 1 -}}
{{- $notes := list -}}
{{- $upstreamRepo := "^(ghcr\\.io/eraser-dev/|ghcr\\.io/azure/)" -}}
{{- $upstreamTag := "^v1\\.[0-5]\\.[0-9]+(-[0-9A-Za-z.]+)?$" -}}
{{- $d := $v.deploy | default dict -}}
{{- $img := $d.image | default dict -}}
{{- if regexMatch $upstreamRepo (toString ($img.repo | default "")) -}}
{{- $tag := toString ($img.tag | default "") -}}
{{- $notes = append $notes (printf "deploy.image %s:%s is upstream's manager: this release's runs instead" $img.repo ($tag | default "latest")) -}}
{{- $_ := set $img "repo" (printf "%s/eraser-manager" (include "eraser.publishedRepo" $root)) -}}
{{- if and (regexMatch $upstreamTag $tag) (ne $tag $root.Chart.AppVersion) -}}
{{- $_ := set $img "tag" "" -}}
{{- end -}}
{{- end -}}
{{- $components := dig "runtimeConfig" "components" dict $v -}}
{{- range $key := list "collector" "scanner" "remover" "eraser" -}}
{{- $c := get $components $key -}}
{{- if and (kindIs "map" $c) (kindIs "map" $c.image) -}}
{{- $repo := toString ($c.image.repo | default "") -}}
{{- $tag := toString ($c.image.tag | default "") -}}
{{- if regexMatch $upstreamRepo $repo -}}
{{- $notes = append $notes (printf "runtimeConfig.components.%s.image %s:%s is upstream's: this release's runs instead" $key $repo $tag) -}}
{{- $_ := unset $c.image "repo" -}}
{{- $_ := unset $c.image "tag" -}}
{{- else if and (not $repo) (regexMatch $upstreamTag $tag) (ne $tag $root.Chart.AppVersion) -}}
{{- $notes = append $notes (printf "runtimeConfig.components.%s.image.tag %s is an upstream release's: this release's tag is used" $key $tag) -}}
{{- $_ := unset $c.image "tag" -}}
{{- end -}}
{{- if not $c.image -}}
{{- $_ := unset $c "image" -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- $scanner := get $components "scanner" -}}
{{- if and (kindIs "map" $scanner) (kindIs "map" $scanner.request) -}}
{{- if and (eq (toString ($scanner.request.cpu | default "")) "1000m") (eq (toString ($scanner.request.mem | default "")) "500Mi") -}}
{{- $notes = append $notes "runtimeConfig.components.scanner.request (cpu 1000m, mem 500Mi) is upstream's default, which a packed node refuses (OutOfcpu): this release's default (cpu 100m, mem 256Mi) is used (docs/configuration.md#components)" -}}
{{- $_ := unset $scanner.request "cpu" -}}
{{- $_ := unset $scanner.request "mem" -}}
{{- end -}}
{{- end -}}
{{- range $key := list "remover" "eraser" -}}
{{- $c := get $components $key -}}
{{- if and (kindIs "map" $c) (kindIs "map" $c.limit) (eq (toString ($c.limit.mem | default "")) "30Mi") -}}
{{- $notes = append $notes (printf "runtimeConfig.components.%s.limit.mem 30Mi is upstream's default, at the edge for a node with many images: this release's default (64Mi) is used (docs/configuration.md#components)" $key) -}}
{{- $_ := unset $c.limit "mem" -}}
{{- end -}}
{{- end -}}
{{- $res := $d.resources | default dict -}}
{{- $limit := toString (dig "limits" "memory" "" $res) -}}
{{- $request := toString (dig "requests" "memory" "" $res) -}}
{{- if and (eq $limit "30Mi") (eq $request "20Mi") -}}
{{- $defaults := $root.Files.Get "files/values-defaults.yaml" | fromYaml -}}
{{- $notes = append $notes "deploy.resources (memory limit 30Mi, request 20Mi) are upstream's manager's: this manager's defaults are used (docs/install.md#sizing-the-manager)" -}}
{{- $_ := set $d "resources" $defaults.deploy.resources -}}
{{- else if $limit -}}
{{- $bytes := include "eraser.bytes" $limit | float64 -}}
{{- if and (gt $bytes 0.0) (lt $bytes 134217728.0) -}}
{{- fail (printf "deploy.resources.limits.memory is %s: the manager needs at least 128Mi (about 80 MiB at 1,000 nodes, more with the cluster: docs/install.md#sizing-the-manager); set it to 256Mi or more" $limit) -}}
{{- end -}}
{{- end -}}
{{- $_ := set $v "_translated" $notes -}}
{{- end -}}

{{/* A memory quantity in bytes ("0" when it does not parse). */}}
{{- define "eraser.bytes" -}}
{{- $q := toString . -}}
{{- $units := dict "" 1.0 "k" 1000.0 "K" 1000.0 "M" 1000000.0 "G" 1000000000.0 "T" 1000000000000.0 "Ki" 1024.0 "Mi" 1048576.0 "Gi" 1073741824.0 "Ti" 1099511627776.0 -}}
{{- if regexMatch "^[0-9]+(\\.[0-9]+)?(k|K|M|G|T|Ki|Mi|Gi|Ti)?$" $q -}}
{{- $num := regexReplaceAll "^([0-9.]+).*$" $q "${1}" | float64 -}}
{{- $unit := regexReplaceAll "^[0-9.]+" $q "" -}}
{{- mulf $num (get $units $unit) -}}
{{- else -}}
0
{{- end -}}
{{- end -}}

{{/*
eraser.workloadProtection is "true" where the manager reads the cluster's pods
and workloads (rbac.workloadProtection), "" where it does not. Off, the
configuration must not protect referenced images: every run would fail.
*/}}
{{- define "eraser.workloadProtection" -}}
{{- $v := include "eraser.values" . | fromYaml -}}
{{- $on := dig "rbac" "workloadProtection" true $v -}}
{{- if $on -}}
true
{{- else if ne (toString (dig "runtimeConfig" "manager" "retention" "protectReferenced" true $v)) "false" -}}
{{- fail "rbac.workloadProtection: false leaves out the read of pods and workloads that protecting referenced images needs: set runtimeConfig.manager.retention.protectReferenced: false too (docs/retention.md), or keep rbac.workloadProtection: true" -}}
{{- end -}}
{{- end -}}
