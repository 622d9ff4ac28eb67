#!/usr/bin/env bash
# Checks that the Helm chart in helm/junction deploys as written:
#   - helm lint --strict, with default values and with every helm/junction/ci/*.yaml
#   - helm template of each; kubernetes-validate --strict on the output against
#     the oldest (1.25) and newest (1.37) Kubernetes schemas it knows
#   - structure: hardened pod, probes, selectors that match, HPA/PDB/ServiceMonitor
#     wiring, shared state key whenever there can be more than one replica; the
#     chart's own Redis (redis.deploy.enabled) hardened, apart from the gateway's
#     selectors, and the one the Redis URLs point at; with its password (the
#     default), Redis and the gateway read it from one Secret, and the gateway's
#     URLs carry it only through $(REDIS_PASSWORD), never in gateway.yaml
#   - `junction validate` on the gateway.yaml each rendering puts in its ConfigMap,
#     with the pod's env var names set (secret values are stand-ins)
#   - the PrometheusRule groups pass `promtool check rules`, and the default rules
#     fire (and stay quiet) as intended under `promtool test rules`
#   - values the chart must refuse (schema and render-time checks), and redis.url wired
#   - the chart's Redis asks for a password by default, has none with auth.enabled=false,
#     reads auth.existingSecret when given, and its password shows only in its Secret
#   - a fleet's pods advertise themselves to each other (fleet.advertise_url from the
#     pod IP) unless they terminate TLS
#   - the pod's connection threads (TOKIO_WORKER_THREADS): from its CPU request
#     without a CPU limit, left to the quota with one, `threads` or `env` as given
#   - NOTES.txt of a multi-replica install: its state key, its Redis (or a warning that
#     rate limits and session changes stay per pod) and what still binds to one pod
#   - a real Junction (127.0.0.1, port 0) is driven through tools/list, tools/call,
#     an error, a good and a bad reload; its /metrics passes `promtool check metrics`,
#     and every metric family and label the dashboard and the alerts use is one it exports
# Needs: bash, python3, npm (first run, to fetch helm), apt-get (first run, if
# promtool is not installed), cargo (if the junction binary is not built).
# Binary: $JUNCTION_BIN, else target/debug/junction (built with `cargo build` when missing).
# Ends with `chart-check: N passed, M failed`; exit status 1 when M > 0.
# CHART_CHECK_KEEP=1 keeps the renderings, scrape and logs (the folder is printed).
set -uo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"
chart="helm/junction"
release="junction"
namespace="junction-ci"

passed=0
failed=0
ok() { passed=$((passed + 1)); echo "ok    $1"; }
bad() {
  failed=$((failed + 1))
  echo "FAIL  $1"
  [ -n "${2:-}" ] && printf '%s\n' "$2" | sed 's/^/      /' | head -60
  return 0
}
# check NAME CMD...: runs CMD, counts it, shows its output when it fails.
check() {
  local name="$1" out
  shift
  if out="$("$@" 2>&1)"; then ok "$name"; else bad "$name" "$out"; fi
}
finish() {
  echo "chart-check: $passed passed, $failed failed"
  [ "$failed" -eq 0 ]
  exit $?
}

bin="$(bash scripts/install-helm.sh)" || { bad "install tools (scripts/install-helm.sh)"; finish; }
helm="$bin/helm"
kv="$bin/kubernetes-validate"
promtool="$bin/promtool"
py="$root/target/tools/kv-venv/bin/python" # has PyYAML, pinned
[ -n "${JUNCTION_TOOLS_DIR:-}" ] && py="$JUNCTION_TOOLS_DIR/kv-venv/bin/python"

junction="${JUNCTION_BIN:-$root/target/debug/junction}"
if [ ! -x "$junction" ]; then
  echo "building $junction" >&2
  cargo build --quiet -p junction --bin junction || { bad "cargo build -p junction"; finish; }
fi

work="$(mktemp -d "${TMPDIR:-/tmp}/chart-check.XXXXXX")"
gw_pid=""
cleanup() {
  if [ -n "$gw_pid" ]; then
    kill "$gw_pid" 2>/dev/null
    wait "$gw_pid" 2>/dev/null
  fi
  if [ -n "${CHART_CHECK_KEEP:-}" ]; then echo "chart-check: work files kept in $work" >&2; else rm -rf "$work"; fi
}
trap cleanup EXIT

cat >"$work/check.py" <<'PY'
"""Helpers for chart-check.sh: split renderings, check their structure, compare metric use."""
import base64, hashlib, json, re, sys
import yaml

CRDS = {("monitoring.coreos.com/v1", "ServiceMonitor"), ("monitoring.coreos.com/v1", "PrometheusRule")}
KNOWN = {
    ("v1", "ConfigMap"), ("v1", "Secret"), ("v1", "Service"), ("v1", "ServiceAccount"),
    ("apps/v1", "Deployment"), ("autoscaling/v2", "HorizontalPodAutoscaler"),
    ("policy/v1", "PodDisruptionBudget"), ("networking.k8s.io/v1", "NetworkPolicy"),
} | CRDS


def docs(path):
    return [d for d in yaml.safe_load_all(open(path)) if d]


def subset(small, big):
    return all(big.get(k) == v for k, v in (small or {}).items())


def dashboard_problems(d, where):
    """What Grafana would choke on or show wrongly: ids, grid, data sources, variables."""
    problems = []
    for key in ("uid", "title", "panels", "schemaVersion"):
        if key not in d:
            problems.append(f"{where}: no {key}")
    ids, cells = set(), {}
    variables = {v["name"] for v in d.get("templating", {}).get("list", [])}

    def walk(panels):
        for p in panels:
            pid = p.get("id")
            if pid in ids:
                problems.append(f"{where}: panel id {pid} used twice")
            ids.add(pid)
            g = p.get("gridPos", {})
            if g.get("x", 0) + g.get("w", 0) > 24:
                problems.append(f"{where}: panel {p.get('title')!r} is wider than the grid")
            for yy in range(g.get("y", 0), g.get("y", 0) + g.get("h", 0)):
                for xx in range(g.get("x", 0), g.get("x", 0) + g.get("w", 0)):
                    if (xx, yy) in cells:
                        problems.append(f"{where}: panels {cells[(xx, yy)]!r} and {p.get('title')!r} overlap")
                        break
                    cells[(xx, yy)] = p.get("title")
                else:
                    continue
                break
            if p.get("type") != "row":
                if not p.get("targets"):
                    problems.append(f"{where}: panel {p.get('title')!r} has no queries")
                for t in p.get("targets", []):
                    for var in re.findall(r"\$(?:\{)?([a-zA-Z_]+)", t.get("expr", "")):
                        if not var.startswith("__") and var not in variables:
                            problems.append(f"{where}: panel {p.get('title')!r} uses undefined ${var}")
            walk(p.get("panels", []))
    walk(d.get("panels", []))
    return problems


def is_redis(o):
    return o.get("metadata", {}).get("labels", {}).get("app.kubernetes.io/component") == "redis"


URL_VARS = ("JUNCTION_RATE_LIMITS__REDIS_URL", "JUNCTION_FLEET__REDIS_URL")


def secret_ref(env, name):
    """(Secret, key) an env entry reads, None when there is no such entry, () when it is
    not from a Secret."""
    for e in env:
        if e["name"] == name:
            ref = e.get("valueFrom", {}).get("secretKeyRef") or {}
            return (ref.get("name"), ref.get("key")) if ref else ()
    return None


def requirepass_problem(args):
    """Why Redis's `args` do not ask for the password from $(REDIS_PASSWORD), or None."""
    i = args.index("--requirepass") if "--requirepass" in args else -1
    if i < 0 or args[i + 1:i + 2] != ["$(REDIS_PASSWORD)"]:
        return f"Redis args must hold --requirepass $(REDIS_PASSWORD), got {args}"
    return None


def password_leaks(objs, secret, key):
    """Where else the password in `secret` (a Secret object) under `key` shows,
    encoded or not: the other objects' kind and name."""
    encoded = (secret.get("data") or {}).get(key, "")
    plain = base64.b64decode(encoded).decode()
    return [f"{o['kind']} {o['metadata']['name']}" for o in objs
            if o is not secret and (plain in json.dumps(o) or encoded in json.dumps(o))]


def redis_problems(objs, gateway, env, gw_svc, gw_pod_labels, everything):
    """How the gateway reaches a Redis for shared rate limits and the fleet bus, and
    the chart's own Redis (redis.deploy.enabled): hardened, selected apart from the
    gateway, fenced, and, when it has a password, the same password on both sides."""
    problems = []
    gw = (yaml.safe_load(gateway) or {}) if gateway else {}
    rl = gw.get("rate_limits") or {}
    fleet = gw.get("fleet") or {}
    rl_env = [e for e in env if e["name"] == URL_VARS[0]]
    fleet_env = [e for e in env if e["name"] == URL_VARS[1]]
    if rl_env and rl.get("redis_url"):
        problems.append("rate_limits.redis_url is both in gateway.yaml and in the environment")
    if (rl.get("backend") == "redis") != bool(rl.get("redis_url") or rl_env):
        problems.append("rate_limits: backend redis needs a redis_url (in gateway.yaml or the environment), and only then")
    # One Redis for both: the fleet bus gets the rate limits' URL, the same way.
    if fleet.get("redis_url") != rl.get("redis_url"):
        problems.append(f"fleet.redis_url {fleet.get('redis_url')!r} is not rate_limits.redis_url {rl.get('redis_url')!r}")
    if [(e.get("value"), e.get("valueFrom")) for e in fleet_env] != [(e.get("value"), e.get("valueFrom")) for e in rl_env]:
        problems.append(f"{URL_VARS[1]} must be set as {URL_VARS[0]} is")
    pw_gw = secret_ref(env, "REDIS_PASSWORD")
    if not objs:
        # A Redis of the user's: a URL with a password only ever comes from their Secret.
        for e in rl_env:
            if not e.get("valueFrom", {}).get("secretKeyRef"):
                problems.append(f"{URL_VARS[0]} must come from a Secret (redis.existingSecret)")
        if pw_gw is not None:
            problems.append("REDIS_PASSWORD without the chart's Redis")
        return problems
    deps = [o for o in objs if o["kind"] == "Deployment"]
    svcs = [o for o in objs if o["kind"] == "Service"]
    if len(deps) != 1 or len(svcs) != 1:
        return problems + [f"Redis: want one Deployment and one Service, got {len(deps)} and {len(svcs)}"]
    dep, svc = deps[0], svcs[0]
    pod = dep["spec"]["template"]
    labels = pod["metadata"].get("labels", {})
    spec = pod["spec"]
    if not subset(dep["spec"]["selector"]["matchLabels"], labels):
        problems.append("Redis Deployment selector does not match its pod labels")
    if not subset(svc["spec"]["selector"], labels):
        problems.append("Redis Service selector does not match the Redis pod labels")
    if subset(gw_svc["spec"]["selector"], labels):
        problems.append("the gateway Service selects the Redis pod (MCP traffic would reach Redis)")
    if subset(svc["spec"]["selector"], gw_pod_labels):
        problems.append("the Redis Service selects gateway pods")
    for o in objs:
        if o["kind"] == "NetworkPolicy" and not subset(o["spec"]["podSelector"].get("matchLabels"), labels):
            problems.append("Redis NetworkPolicy does not select the Redis pod")
    if dep["spec"].get("replicas") != 1:
        problems.append("Redis must run one pod (the buckets live in it)")
    psc = spec.get("securityContext", {})
    if psc.get("runAsNonRoot") is not True or psc.get("seccompProfile", {}).get("type") != "RuntimeDefault":
        problems.append("Redis pod securityContext must set runAsNonRoot and seccompProfile RuntimeDefault")
    if spec.get("automountServiceAccountToken") is not False:
        problems.append("the Redis pod does not need a service-account token")
    c = spec["containers"][0]
    sc = c.get("securityContext", {})
    for key, want in (("readOnlyRootFilesystem", True), ("allowPrivilegeEscalation", False), ("runAsNonRoot", True)):
        if sc.get(key) is not want:
            problems.append(f"Redis container securityContext.{key} must be {want}")
    if "ALL" not in sc.get("capabilities", {}).get("drop", []):
        problems.append("Redis container must drop ALL capabilities")
    if sc.get("runAsUser", psc.get("runAsUser", 0)) == 0:
        problems.append("Redis must not run as uid 0")
    if not c.get("resources", {}).get("limits", {}).get("memory"):
        problems.append("Redis needs a memory limit")
    if not c.get("readinessProbe"):
        problems.append("Redis needs a readiness probe")
    ports = {p["name"]: p["containerPort"] for p in c.get("ports", [])}
    svc_port = {p["name"]: p for p in svc["spec"]["ports"]}.get("redis", {})
    if svc_port.get("targetPort") not in ("redis", ports.get("redis")):
        problems.append("Redis Service port redis must target the container port redis")
    host = f"{svc['metadata']['name']}.{svc['metadata']['namespace']}.svc.cluster.local:{svc_port.get('port')}"
    args = [str(a) for a in c.get("args", [])]
    pw_redis = secret_ref(c.get("env") or [], "REDIS_PASSWORD")
    chart_secrets = [o for o in objs if o["kind"] == "Secret"]
    if "--requirepass" in args or pw_redis is not None or pw_gw is not None:
        # With a password (redis.deploy.auth): Redis and Junction read it from one
        # Secret, and Junction's URLs carry it only once Kubernetes has expanded them.
        if requirepass_problem(args):
            problems.append(requirepass_problem(args))
        if "--protected-mode" in args:
            problems.append("Redis with a password needs no --protected-mode")
        if not pw_redis:
            problems.append(f"the Redis container's REDIS_PASSWORD must come from a Secret, got {pw_redis}")
        if pw_gw != pw_redis:
            problems.append(f"Junction's REDIS_PASSWORD must come from the Redis pod's Secret {pw_redis}, got {pw_gw}")
        names = [e["name"] for e in env]
        want = f"redis://:$(REDIS_PASSWORD)@{host}"
        for var in URL_VARS:
            e = next((e for e in env if e["name"] == var), None)
            if e is None or e.get("value") != want or e.get("valueFrom"):
                problems.append(f"{var} must be {want!r}, got {e}")
            elif "REDIS_PASSWORD" not in names or names.index("REDIS_PASSWORD") > names.index(var):
                problems.append(f"REDIS_PASSWORD must come before {var} (Kubernetes expands only earlier entries)")
        if rl.get("backend") != "redis" or rl.get("redis_url") or fleet.get("redis_url"):
            problems.append(f"gateway.yaml must say backend: redis and hold no redis_url, got {rl}, {fleet}")
        if pw_redis:
            secret, key = pw_redis
            same = [o for o in everything if o["kind"] == "Secret" and o["metadata"]["name"] == secret]
            if secret == svc["metadata"]["name"]:
                # The chart makes it.
                pw = (same[0].get("data") or {}).get(key) if len(same) == 1 else None
                if len(same) != 1 or key != "redis-password" or not pw:
                    problems.append(f"want one Secret {secret} with a redis-password, got {len(same)} (key {key})")
                elif password_leaks(everything, same[0], key):
                    problems.append(f"the password of Secret {secret} shows outside it")
            elif same or chart_secrets:
                problems.append(f"with auth.existingSecret {secret} the chart makes no Secret, got {[o['metadata']['name'] for o in same + chart_secrets]}")
    else:
        # No password (auth.enabled false): the plain URL, in gateway.yaml.
        if rl.get("redis_url") != f"redis://{host}":
            problems.append(f"rate_limits.redis_url {rl.get('redis_url')!r} is not the chart's Redis (redis://{host})")
        if chart_secrets:
            problems.append("a Redis without a password needs no Secret")
    return problems


def redis_auth(rendered, want, secret=None, key=None):
    """The chart's Redis in one rendering, as `want` says: "chart" (a password from the
    Secret the chart makes, secret/key: 32 letters and digits), "existing" (from the
    user's Secret secret/key; the chart makes none) or "off" (no password, no Secret)."""
    objs = docs(rendered)
    deps = [o for o in objs if o["kind"] == "Deployment"]
    redis = [o for o in deps if is_redis(o)]
    gw = [o for o in deps if not is_redis(o)]
    if len(redis) != 1 or len(gw) != 1:
        print(f"want the chart's Redis and Junction, got Deployments {[o['metadata']['name'] for o in deps]}")
        return 1
    rc = redis[0]["spec"]["template"]["spec"]["containers"][0]
    gc = gw[0]["spec"]["template"]["spec"]["containers"][0]
    args = [str(a) for a in rc.get("args", [])]
    secrets = [o for o in objs if o["kind"] == "Secret"]
    problems = []
    if want == "off":
        if "--requirepass" in args:
            problems.append(f"Redis still asks for a password: {args}")
        for who, c in (("Redis", rc), ("Junction", gc)):
            if any("REDIS_PASSWORD" in json.dumps(e) for e in c.get("env") or []):
                problems.append(f"{who} still gets REDIS_PASSWORD: {c.get('env')}")
        if secrets:
            problems.append(f"renders Secret(s) {[o['metadata']['name'] for o in secrets]}")
    else:
        if requirepass_problem(args):
            problems.append(requirepass_problem(args))
        for who, c in (("Redis", rc), ("Junction", gc)):
            got = secret_ref(c.get("env") or [], "REDIS_PASSWORD")
            if got != (secret, key):
                problems.append(f"{who}'s REDIS_PASSWORD comes from {got}, not Secret {secret} key {key}")
        made = [o for o in secrets if o["metadata"]["name"] == secret]
        if want == "chart":
            pw = (made[0].get("data") or {}).get(key, "") if len(made) == 1 else ""
            if len(made) != 1 or not re.fullmatch(r"[A-Za-z0-9]{32}", base64.b64decode(pw).decode()):
                problems.append(f"want one Secret {secret} with 32 letters and digits in {key}, got {made}")
        elif made or any(is_redis(o) for o in secrets):
            problems.append(f"the chart makes a Secret beside {secret}: {[o['metadata']['name'] for o in secrets]}")
    print("\n".join(problems))
    return 1 if problems else 0


def password_hidden(rendered, secret, key):
    """The password in Secret secret/key shows nowhere else: not in the ConfigMap
    (gateway.yaml), not in a pod spec, encoded or not."""
    objs = docs(rendered)
    made = [o for o in objs if o["kind"] == "Secret" and o["metadata"]["name"] == secret]
    if len(made) != 1 or not (made[0].get("data") or {}).get(key):
        print(f"no Secret {secret} with a {key}")
        return 1
    problems = [f"the password is in {where}" for where in password_leaks(objs, made[0], key)]
    if not any(o["kind"] == "ConfigMap" and "gateway.yaml" in o.get("data", {}) for o in objs):
        problems.append("no ConfigMap with gateway.yaml to look in")
    print("\n".join(problems))
    return 1 if problems else 0


def split(rendered, out):
    """Writes out/{gateway.yaml,env-names,rules.yaml,dashboard-N.json,core.yaml}; prints problems."""
    problems = []
    objs = docs(rendered)
    by_kind = {}
    for o in objs:
        key = (o.get("apiVersion"), o.get("kind"))
        if key not in KNOWN:
            problems.append(f"unexpected kind {key}")
        by_kind.setdefault(o.get("kind"), []).append(o)
    # kubernetes-validate has no schemas for the operator's CRDs: they are checked here.
    with open(f"{out}/core.yaml", "w") as f:
        yaml.safe_dump_all([o for o in objs if (o["apiVersion"], o["kind"]) not in CRDS], f)
    # The chart's own Redis is checked apart (redis_problems); the rest is the gateway's.
    redis = [o for o in objs if is_redis(o)]
    for o in redis:
        by_kind[o["kind"]].remove(o)

    deps = by_kind.get("Deployment", [])
    svcs = by_kind.get("Service", [])
    if len(deps) != 1 or len(svcs) != 1:
        problems.append(f"want one Deployment and one Service, got {len(deps)} and {len(svcs)}")
        print("\n".join(problems))
        return 1
    dep, svc = deps[0], svcs[0]
    pod = dep["spec"]["template"]
    spec = pod["spec"]
    pod_labels = pod["metadata"].get("labels", {})
    if not subset(dep["spec"]["selector"]["matchLabels"], pod_labels):
        problems.append("Deployment selector does not match its pod labels")
    if not subset(svc["spec"]["selector"], pod_labels):
        problems.append("Service selector does not match the pod labels")

    psc = spec.get("securityContext", {})
    if psc.get("runAsNonRoot") is not True or psc.get("seccompProfile", {}).get("type") != "RuntimeDefault":
        problems.append("pod securityContext must set runAsNonRoot and seccompProfile RuntimeDefault")
    if spec.get("automountServiceAccountToken") is not False:
        problems.append("the pod does not need a service-account token")
    cs = spec["containers"]
    if len(cs) != 1:
        problems.append(f"want one container, got {len(cs)}")
    c = cs[0]
    sc = c.get("securityContext", {})
    for key, want in (("readOnlyRootFilesystem", True), ("allowPrivilegeEscalation", False), ("runAsNonRoot", True)):
        if sc.get(key) is not want:
            problems.append(f"container securityContext.{key} must be {want}")
    if "ALL" not in sc.get("capabilities", {}).get("drop", []):
        problems.append("container must drop ALL capabilities")
    if sc.get("runAsUser", psc.get("runAsUser", 0)) == 0:
        problems.append("container must not run as uid 0")
    res = c.get("resources", {})
    if not res.get("requests") or not res.get("limits", {}).get("memory"):
        problems.append("container needs resource requests and a memory limit")
    ports = {p["name"]: p["containerPort"] for p in c.get("ports", [])}
    if "http" not in ports:
        problems.append("container port `http` missing")
    for probe, path in (("livenessProbe", "/healthz"), ("readinessProbe", "/readyz")):
        get = c.get(probe, {}).get("httpGet", {})
        if get.get("path") != path or get.get("port") not in ("http", ports.get("http")):
            problems.append(f"{probe} must GET {path} on port http, got {get}")
    svc_ports = {p["name"]: p for p in svc["spec"]["ports"]}
    if svc_ports.get("http", {}).get("targetPort") not in ("http", ports.get("http")):
        problems.append("Service port http must target the container port http")

    # The config: ConfigMap -> volume -> mount -> --config.
    args = c.get("args", [])
    cfg_path = args[args.index("--config") + 1] if "--config" in args else None
    cms = {o["metadata"]["name"]: o for o in by_kind.get("ConfigMap", [])}
    vols = {v["name"]: v for v in spec.get("volumes", [])}
    gateway = None
    for m in c.get("volumeMounts", []):
        v = vols.get(m["name"], {})
        if "configMap" in v and cfg_path and cfg_path.startswith(m["mountPath"].rstrip("/") + "/"):
            if m.get("subPath"):
                problems.append("config mounted with subPath: ConfigMap edits would never reach the pod")
            cm = cms.get(v["configMap"]["name"])
            key = cfg_path[len(m["mountPath"].rstrip("/")) + 1:]
            if cm is None or key not in cm.get("data", {}):
                problems.append(f"--config {cfg_path}: no ConfigMap key {key} behind it")
            else:
                gateway = cm["data"][key]
    if gateway is None:
        problems.append("found no gateway.yaml behind --config")
    else:
        open(f"{out}/gateway.yaml", "w").write(gateway)
        ann = pod["metadata"].get("annotations") or {}
        cs_ann = ann.get("checksum/config")
        if cs_ann is not None and not re.fullmatch(r"[0-9a-f]{64}", cs_ann):
            problems.append(f"checksum/config is not a sha256: {cs_ann!r}")
        cfg = yaml.safe_load(gateway)
        listen = str(cfg.get("server", {}).get("listen", ""))
        if listen != f"0.0.0.0:{ports.get('http')}":
            problems.append(f"server.listen {listen!r} must be 0.0.0.0:<container port http>")

    env = c.get("env") or []
    names = [e["name"] for e in env]
    open(f"{out}/env-names", "w").write("\n".join(names) + "\n")
    hpa = by_kind.get("HorizontalPodAutoscaler", [])
    multi = bool(hpa) or dep["spec"].get("replicas", 1) > 1
    if multi:
        rs = (yaml.safe_load(gateway) or {}).get("request_state", {}) if gateway else {}
        if "JUNCTION_STATE_KEY" not in names or rs.get("secret_env") != "JUNCTION_STATE_KEY":
            problems.append("more than one replica without a shared JUNCTION_STATE_KEY")
    for h in hpa:
        ref = h["spec"]["scaleTargetRef"]
        if ref.get("kind") != "Deployment" or ref.get("name") != dep["metadata"]["name"]:
            problems.append("HPA does not target the Deployment")
        if "replicas" in dep["spec"]:
            problems.append("with an HPA the Deployment must not set replicas (every upgrade would reset them)")
    for kind in ("PodDisruptionBudget", "NetworkPolicy"):
        for o in by_kind.get(kind, []):
            sel = o["spec"].get("selector", o["spec"].get("podSelector", {})).get("matchLabels")
            if not sel or not subset(sel, pod_labels):
                problems.append(f"{kind} selector does not match the pod labels")
    for sm in by_kind.get("ServiceMonitor", []):
        if not subset(sm["spec"]["selector"]["matchLabels"], svc["metadata"].get("labels", {})):
            problems.append("ServiceMonitor selector does not match the Service labels")
        for ep in sm["spec"].get("endpoints", []):
            if ep.get("port") not in svc_ports or ep.get("path") != "/metrics":
                problems.append(f"ServiceMonitor endpoint {ep} does not scrape a Service port at /metrics")
    problems += redis_problems(redis, gateway, env, svc, pod_labels, objs)
    groups = []
    for pr in by_kind.get("PrometheusRule", []):
        for g in pr["spec"].get("groups", []):
            groups.append(g)
    if groups:
        with open(f"{out}/rules.yaml", "w") as f:
            yaml.safe_dump({"groups": groups}, f, sort_keys=False)
    n = 0
    for cm in by_kind.get("ConfigMap", []):
        if cm["metadata"].get("labels", {}).get("grafana_dashboard") is None:
            continue
        for key, text in cm.get("data", {}).items():
            try:
                json.loads(text)
            except ValueError as e:
                problems.append(f"dashboard {cm['metadata']['name']}/{key} is not JSON: {e}")
                continue
            n += 1
            open(f"{out}/dashboard-{n}.json", "w").write(text)
            problems += dashboard_problems(json.loads(text), f"{cm['metadata']['name']}/{key}")
    print("\n".join(problems))
    return 1 if problems else 0


# --- metric use -----------------------------------------------------------------

# Labels Prometheus adds at scrape time (target labels), and histogram `le`.
TARGET_LABELS = {"namespace", "job", "pod", "instance", "service", "container", "endpoint", "le"}
PROMQL_WORDS = {"by", "without", "on", "ignoring", "group_left", "group_right", "bool", "offset", "and", "or", "unless"}
FUNCTIONS = {"sum", "min", "max", "avg", "count", "rate", "irate", "increase", "histogram_quantile",
             "label_values", "abs", "clamp_min", "clamp_max", "topk", "bottomk", "absent", "delta", "deriv",
             "quantile", "stddev", "vector", "scalar", "time", "changes", "resets", "sort", "sort_desc"}


def uses_from(rules_files, dashboards):
    """(where, expr, legend) for every alert/record expression and dashboard query."""
    out = []
    for path in rules_files:
        for g in yaml.safe_load(open(path))["groups"]:
            for r in g["rules"]:
                out.append((f"{path}: {r.get('alert') or r.get('record')}", r["expr"], ""))
    for path in dashboards:
        d = json.load(open(path))

        def walk(panels):
            for p in panels:
                for t in p.get("targets", []):
                    if t.get("expr"):
                        out.append((f"{path}: panel {p.get('title')!r}", t["expr"], t.get("legendFormat", "")))
                walk(p.get("panels", []))
        walk(d.get("panels", []))
        for v in d.get("templating", {}).get("list", []):
            q = v.get("query")
            q = q.get("query") if isinstance(q, dict) else q
            if v.get("type") == "query" and q:
                out.append((f"{path}: variable {v['name']}", q, ""))
    return out


def parse_scrape(text):
    """family -> (type, label set) from a Prometheus text scrape."""
    fams, types = {}, {}
    for line in text.splitlines():
        if line.startswith("# TYPE "):
            _, _, name, typ = line.split(None, 3)
            types[name] = typ
            fams.setdefault(name, set())
        elif line and not line.startswith("#"):
            m = re.match(r"([a-zA-Z_:][a-zA-Z0-9_:]*)(\{([^}]*)\})?", line)
            name, labels = m.group(1), m.group(3) or ""
            base = name
            for suffix in ("_bucket", "_sum", "_count"):
                if name.endswith(suffix) and types.get(name[: -len(suffix)]) in ("histogram", "summary"):
                    base = name[: -len(suffix)]
            fams.setdefault(base, set()).update(re.findall(r'([a-zA-Z_][a-zA-Z0-9_]*)="', labels))
    return {n: (types.get(n, "untyped"), ls) for n, ls in fams.items()}


def registered_in_source(src):
    """family -> (type, labels) declared in crates/telemetry/src/lib.rs, for families a
    short run cannot make appear (a labelled family shows up once a child exists)."""
    text = open(src).read()
    out = {}
    hits = list(re.finditer(r'"(junction_[a-z0-9_]+)"', text))
    for i, m in enumerate(hits):
        end = hits[i + 1].start() if i + 1 < len(hits) else len(text)
        chunk = text[m.end():end]
        lab = re.search(r"&\[([^\]]*)\]", chunk)
        labels = set(re.findall(r'"([a-z_]+)"', lab.group(1))) if lab else set()
        before = text[max(0, m.start() - 60):m.start()]
        typ = "histogram" if ("histogram(" in before or "HistogramOpts::new(" in before) else "other"
        out.setdefault(m.group(1), (typ, labels))
    return out


def metrics(scrape_path, src, rules_files, dashboards):
    scraped = parse_scrape(open(scrape_path).read())
    source = registered_in_source(src)
    problems, notes = [], []
    seen_names = set()
    for where, expr, legend in uses_from(rules_files, dashboards):
        # Drop string literals, then find identifiers that are metric names.
        bare = re.sub(r'"(?:[^"\\]|\\.)*"', '""', expr)
        bare = re.sub(r"\[[^\]]*\]", "", bare)
        names = set()
        for tok in re.finditer(r"\b([a-zA-Z_:][a-zA-Z0-9_:]*)\b\s*(\{|\(|)", bare):
            t, nxt = tok.group(1), tok.group(2)
            if t.startswith(("junction_", "process_")):
                names.add(t)
        if not names:
            problems.append(f"{where}: uses no Junction metric: {expr}")
            continue
        label_sets = []
        for n in sorted(names):
            base, typ_needed = n, None
            for suffix in ("_bucket", "_sum", "_count"):
                if n.endswith(suffix):
                    cand = n[: -len(suffix)]
                    if cand in scraped or cand in source:
                        base, typ_needed = cand, suffix
            seen_names.add(base)
            if base in scraped:
                typ, labels = scraped[base]
            elif base in source:
                typ, labels = source[base]
                notes.append(f"{base}: registered, not in this scrape (no child yet)")
            else:
                problems.append(f"{where}: {n} is not a metric Junction exports")
                continue
            if typ_needed and typ not in ("histogram", "summary"):
                problems.append(f"{where}: {n}: {base} is not a histogram")
            if n.endswith("_total") is False and base == n and typ == "histogram":
                problems.append(f"{where}: {n} is a histogram: use {n}_bucket/_sum/_count")
            label_sets.append(labels)
        if not label_sets:
            continue
        allowed = set().union(*label_sets) | TARGET_LABELS
        used = set()
        for grp in re.findall(r"\b(?:by|without|on|ignoring)\s*\(([^)]*)\)", bare):
            used |= {x.strip() for x in grp.split(",") if x.strip()}
        for sel in re.findall(r"\{([^}]*)\}", re.sub(r'"(?:[^"\\]|\\.)*"', '""', expr)):
            used |= set(re.findall(r"([a-zA-Z_][a-zA-Z0-9_]*)\s*(?:=~|!~|!=|=)", sel))
        m = re.match(r"\s*label_values\((.*),\s*([a-zA-Z_][a-zA-Z0-9_]*)\s*\)\s*$", expr)
        if m:
            used.add(m.group(2))
        used |= set(re.findall(r"\{\{\s*([a-zA-Z_][a-zA-Z0-9_]*)\s*\}\}", legend))
        unknown = used - allowed
        if unknown:
            problems.append(f"{where}: labels {sorted(unknown)} are on none of {sorted(names)}")
    for n in sorted(set(notes)):
        print("note: " + n)
    print(f"{len(seen_names)} metric families used, all exported" if not problems else "\n".join(problems))
    return 1 if problems else 0


def dockerfile(path, rendered):
    """The image and the chart must agree: uid, entrypoint, config path."""
    text = open(path).read()
    problems = []
    stages = re.findall(r"^FROM\s+(\S+)", text, re.M)
    if len(stages) < 2:
        problems.append("want a multi-stage build (builder + runtime)")
    if not re.search(r"cargo build --release --locked", text):
        problems.append("the builder must run cargo build --release --locked")
    user = re.findall(r"^USER\s+(\S+)", text, re.M)
    dep = [o for o in docs(rendered) if o["kind"] == "Deployment"][0]
    spec = dep["spec"]["template"]["spec"]
    uid = spec["containers"][0].get("securityContext", {}).get("runAsUser", spec.get("securityContext", {}).get("runAsUser"))
    if not user or user[-1].split(":")[0] != str(uid):
        problems.append(f"final USER {user[-1:] or 'none'} is not the chart's runAsUser {uid}")
    ep = re.findall(r"^ENTRYPOINT\s+(.*)$", text, re.M)
    cmd = re.findall(r"^CMD\s+(.*)$", text, re.M)
    if not ep or json.loads(ep[-1]) != ["junction"]:
        problems.append(f"ENTRYPOINT must be [\"junction\"], got {ep[-1:]}")
    args = spec["containers"][0].get("args")
    if not cmd or json.loads(cmd[-1]) != args:
        problems.append(f"CMD {cmd[-1:]} differs from the chart's args {args}")
    print("\n".join(problems))
    return 1 if problems else 0


if __name__ == "__main__":
    if sys.argv[1] == "dockerfile":
        sys.exit(dockerfile(sys.argv[2], sys.argv[3]))
    cmd = sys.argv[1]
    if cmd == "split":
        sys.exit(split(sys.argv[2], sys.argv[3]))
    if cmd == "redis-auth":
        sys.exit(redis_auth(*sys.argv[2:]))
    if cmd == "password-hidden":
        sys.exit(password_hidden(*sys.argv[2:]))
    if cmd == "metrics":
        rules = [a for a in sys.argv[4:] if a.endswith(".yaml")]
        dashes = [a for a in sys.argv[4:] if a.endswith(".json")]
        sys.exit(metrics(sys.argv[2], sys.argv[3], rules, dashes))
    sys.exit(f"unknown command {cmd}")
PY

# --- every values set: lint, render, validate ------------------------------------
sets=("defaults")
for f in "$chart"/ci/*.yaml; do sets+=("$f"); done
# Rules with default thresholds, for the alert unit tests below.
sets+=("rules-default")

stand_in="chart-check-stand-in-secret-0123456789abcdef" # >= 32 bytes, like a real state key
rules_files=()
dashboards=()
for s in "${sets[@]}"; do
  case "$s" in
    defaults) name="defaults"; vals=() ;;
    rules-default) name="rules-default"; vals=(--set prometheusRule.enabled=true) ;;
    *) name="$(basename "$s" .yaml)"; vals=(-f "$s") ;;
  esac
  dir="$work/$name"
  mkdir -p "$dir"
  if [ "$name" != "rules-default" ]; then
    check "helm lint --strict ($name)" "$helm" lint --strict "$chart" "${vals[@]}"
  fi
  if out="$("$helm" template "$release" "$chart" --namespace "$namespace" "${vals[@]}" 2>&1 >"$dir/rendered.yaml")"; then
    ok "helm template ($name)"
  else
    bad "helm template ($name)" "$out"
    continue
  fi
  check "structure of the rendering ($name)" "$py" "$work/check.py" split "$dir/rendered.yaml" "$dir"
  for k in 1.25.0 1.37.0; do
    check "kubernetes-validate --strict -k $k ($name)" "$kv" --strict --quiet --no-warn -k "$k" "$dir/core.yaml"
  done
  if [ -f "$dir/gateway.yaml" ]; then
    # The pod's environment: every env var it gets, with stand-in values.
    envs=(PATH="$PATH")
    while read -r n; do
      case "$n" in
        "") ;;
        # A Redis URL from a Secret (redis.existingSecret), or the chart's Redis URL
        # with its password spliced in by Kubernetes, must look like one.
        JUNCTION_RATE_LIMITS__REDIS_URL | JUNCTION_FLEET__REDIS_URL) envs+=("$n=redis://:chartcheckstandin@chart-check-stand-in:6379") ;;
        # The chart's Redis password (redis.deploy.auth): not config (no JUNCTION_ prefix),
        # alphanumeric like the one the chart generates.
        REDIS_PASSWORD) envs+=("$n=chartcheckstandin") ;;
        # http://$(POD_IP):<port>, as Kubernetes expands it.
        JUNCTION_FLEET__ADVERTISE_URL) envs+=("$n=http://10.0.0.7:8080") ;;
        POD_IP) envs+=("$n=10.0.0.7") ;;
        *) envs+=("$n=$stand_in") ;;
      esac
    done <"$dir/env-names"
    check "junction validate on the rendered gateway.yaml ($name)" \
      env -i "${envs[@]}" "$junction" validate --config "$dir/gateway.yaml"
  fi
  if [ -f "$dir/rules.yaml" ]; then
    check "promtool check rules ($name)" "$promtool" check rules "$dir/rules.yaml"
    rules_files+=("$dir/rules.yaml")
  fi
  for d in "$dir"/dashboard-*.json; do [ -f "$d" ] && dashboards+=("$d"); done
done

if [ -f "$work/defaults/rendered.yaml" ]; then
  check "Dockerfile agrees with the chart (multi-stage, --locked, uid, entrypoint, config path)" \
    "$py" "$work/check.py" dockerfile Dockerfile "$work/defaults/rendered.yaml"
fi

# --- values the chart must refuse --------------------------------------------------
refuse() {
  local what="$1" want="$2"
  shift 2
  local out
  if out="$("$helm" template "$release" "$chart" --namespace "$namespace" "$@" 2>&1)"; then
    bad "refuses $what" "rendered without error"
  elif ! grep -q -- "$want" <<<"$out"; then
    bad "refuses $what" "error does not say \"$want\": $out"
  else
    ok "refuses $what"
  fi
}
refuse "several replicas without a shared state key" "stateKey" --set replicaCount=2
refuse "autoscaling without a shared state key" "stateKey" --set autoscaling.enabled=true
refuse "a short state key" "32 bytes" --set replicaCount=2 --set stateKey.value=short
refuse "a bearer_token_env no secret provides" "secretEnv" \
  --set 'config.upstreams[0].id=crm' --set 'config.upstreams[0].url=http://crm/mcp' \
  --set 'config.upstreams[0].bearer_token_env=CRM_TOKEN'
refuse "an unknown top-level value (schema)" "additional properties .replicas. not allowed" --set replicas=2
refuse "a root container (schema)" "runAsNonRoot.: value must be true" --set securityContext.runAsNonRoot=false
refuse "tls without a Secret" "tls.secretName" --set tls.enabled=true
refuse "two sources of Redis" "set one of redis" \
  --set redis.deploy.enabled=true --set redis.url=redis://redis.platform:6379
refuse "a Redis URL that is not redis:// (schema)" "redis.url" --set redis.url=http://redis:6379
refuse "config.rate_limits.redis_url beside redis.*" "leave it out" \
  --set redis.url=redis://a:6379 --set config.rate_limits.redis_url=redis://b:6379
refuse "backend local beside redis.*" "backend is local" \
  --set redis.existingSecret=junction-redis --set config.rate_limits.backend=local

# --- values the chart must wire ------------------------------------------------------
# (redis.deploy.enabled and redis.existingSecret are ci/ values sets above.)
wired="$("$helm" template "$release" "$chart" --namespace "$namespace" \
  --set redis.url=redis://redis.platform.svc:6379 2>&1)"
check "redis.url becomes rate_limits.redis_url (backend redis) and fleet.redis_url" bash -c '
  grep -qzE "rate_limits:\s+backend: redis\s+redis_url: redis://redis.platform.svc:6379" <<<"$1" &&
  grep -qzE "fleet:\s+redis_url: redis://redis.platform.svc:6379" <<<"$1"' _ "$wired"

# The chart's own Redis asks for a password unless told not to, and only the Secret holds it.
# redis_auth OUT ARGS...: renders the chart's Redis with ARGS into OUT.
redis_auth() {
  local out="$1"
  shift
  "$helm" template "$release" "$chart" --namespace "$namespace" --set redis.deploy.enabled=true "$@" >"$out" 2>&1
}
redis_auth "$work/redis-auth-default.yaml"
check "the chart's Redis asks for a password by default (--requirepass; both pods read Secret junction-redis, key redis-password)" \
  "$py" "$work/check.py" redis-auth "$work/redis-auth-default.yaml" chart junction-redis redis-password
check "the chart's Redis password is only in its Secret (not in the ConfigMap or a pod spec)" \
  "$py" "$work/check.py" password-hidden "$work/redis-auth-default.yaml" junction-redis redis-password
redis_auth "$work/redis-auth-off.yaml" --set redis.deploy.auth.enabled=false
check "redis.deploy.auth.enabled=false renders no password and no Secret" \
  "$py" "$work/check.py" redis-auth "$work/redis-auth-off.yaml" off
redis_auth "$work/redis-auth-existing.yaml" --set redis.deploy.auth.existingSecret=my-secret \
  --set redis.deploy.auth.existingSecretKey=pw
check "redis.deploy.auth.existingSecret=my-secret: no Secret of the chart's; both pods read my-secret (key pw)" \
  "$py" "$work/check.py" redis-auth "$work/redis-auth-existing.yaml" existing my-secret pw
# (Default auth is ci/fleet-values.yaml, auth off ci/redis-noauth-values.yaml.)
mkdir -p "$work/redis-auth-existing"
check "structure of the rendering (redis.deploy.auth.existingSecret)" \
  "$py" "$work/check.py" split "$work/redis-auth-existing.yaml" "$work/redis-auth-existing"

fleet_pods="$("$helm" template "$release" "$chart" --namespace "$namespace" -f "$chart/ci/fleet-values.yaml" 2>&1)"
check "a fleet's pods advertise http://\$(POD_IP):<port> and may reach each other" bash -c '
  grep -qzE "name: POD_IP\s+valueFrom:\s+fieldRef:\s+fieldPath: status.podIP" <<<"$1" &&
  grep -q "value: \"http://\$(POD_IP):8080\"" <<<"$1"' _ "$fleet_pods"
tls_pods="$("$helm" template "$release" "$chart" --namespace "$namespace" -f "$chart/ci/multi-replica-values.yaml" 2>&1)"
check "pods that terminate TLS advertise nothing (they cannot relay over plain HTTP)" bash -c '
  ! grep -q "JUNCTION_FLEET__ADVERTISE_URL" <<<"$1"' _ "$tls_pods"

# threads_env ARGS...: the TOKIO_WORKER_THREADS values the rendering gives the pod, one per line.
threads_env() {
  "$helm" template "$release" "$chart" --namespace "$namespace" "$@" 2>&1 |
    grep -A1 -- "- name: TOKIO_WORKER_THREADS" | sed -n 's/^ *value: //p'
}
check "without a CPU limit the pod gets threads for its CPU request (100m: 2), not one per node CPU" \
  test "$(threads_env)" = '"2"'
check "a CPU request of 3500m gets 4 connection threads" \
  test "$(threads_env --set resources.requests.cpu=3500m)" = '"4"'
check "with a CPU limit the chart leaves the thread count to Junction (it reads the quota)" \
  test -z "$(threads_env --set resources.limits.cpu=4)"
check "threads set explicitly is used as it is" test "$(threads_env --set threads=6)" = '"6"'
check "TOKIO_WORKER_THREADS in env is the pod's only one" \
  test "$(threads_env --set 'env[0].name=TOKIO_WORKER_THREADS' --set-string 'env[0].value=3')" = '"3"'
refuse "a negative thread count (schema)" "threads" --set threads=-1

# --- what NOTES.txt tells a multi-replica install ------------------------------------
# dry_install ARGS...: what `helm install --dry-run=client` prints (manifests, then NOTES).
dry_install() {
  "$helm" install --dry-run=client "$release" "$chart" --namespace "$namespace" "$@" 2>&1
}
# notes ARGS...: the NOTES of such an install.
notes() {
  dry_install "$@" | sed -n '/^NOTES:/,$p'
}
fleet_install="$(dry_install -f "$chart/ci/fleet-values.yaml")"
fleet_notes="$(sed -n '/^NOTES:/,$p' <<<"$fleet_install")"
# The password the chart generated in this very install, which NOTES must not show.
fleet_password="$(sed -n 's/^  redis-password: "\(.*\)"$/\1/p' <<<"$fleet_install" | base64 -d)"
check "NOTES of a fleet name its state key, its Redis (where its password is, not the password) and what binds to one pod" bash -c '
  grep -q "Secret junction-state" <<<"$1" &&
  grep -q "One Redis: redis://junction-redis.junction-ci.svc.cluster.local:6379" <<<"$1" &&
  grep -q "its password from Secret junction-redis (key redis-password)" <<<"$1" &&
  [ -n "$2" ] && ! grep -qF -- "$2" <<<"$1" &&
  grep -q "Still bound to the pod" <<<"$1" && grep -q "sessionAffinity is ClientIP" <<<"$1"' _ "$fleet_notes" "$fleet_password"
local_notes="$(notes --set replicaCount=2 --set stateKey.existingSecret=junction-state \
  --set 'config.rate_limits.rules[0].name=r' --set 'config.rate_limits.rules[0].rate=1' \
  --set 'config.rate_limits.rules[0].per=1s')"
check "NOTES warn that without Redis rate limits and sessions stay per pod" bash -c '
  grep -q "WARNING: no Redis" <<<"$1" && grep -q "rate limits are counted per" <<<"$1" &&
  grep -q "DELETE, logging/setLevel and resources/subscribe stay on the" <<<"$1"' _ "$local_notes"

# --- alert unit tests ----------------------------------------------------------------
if [ -f "$work/rules-default/rules.yaml" ]; then
  sel="job=\"$release\",namespace=\"$namespace\""
  cat >"$work/rules-default/tests.yaml" <<EOF
rule_files: [rules.yaml]
evaluation_interval: 1m
tests:
  - interval: 1m
    input_series:
      # crm: down on both replicas; search: down on one only (not an outage).
      - {series: 'junction_upstream_up{$sel,pod="a",upstream="crm"}', values: '0x20'}
      - {series: 'junction_upstream_up{$sel,pod="b",upstream="crm"}', values: '0x20'}
      - {series: 'junction_upstream_up{$sel,pod="a",upstream="search"}', values: '1x20'}
      - {series: 'junction_upstream_up{$sel,pod="b",upstream="search"}', values: '0x20'}
      # /mcp: 10 errors per 100 ok; /quiet: 1 per 100 (below 5%).
      - {series: 'junction_requests_total{$sel,pod="a",route="/mcp",method="tools/call",outcome="ok"}', values: '0+100x20'}
      - {series: 'junction_requests_total{$sel,pod="a",route="/mcp",method="tools/call",outcome="error"}', values: '0+10x20'}
      - {series: 'junction_requests_total{$sel,pod="a",route="/quiet",method="tools/call",outcome="ok"}', values: '0+100x20'}
      - {series: 'junction_requests_total{$sel,pod="a",route="/quiet",method="tools/call",outcome="error"}', values: '0+1x20'}
      # /impatient: clients leave before the answer 20 times per 100 answered;
      # /quiet: once per 100 (below 5%).
      - {series: 'junction_requests_total{$sel,pod="a",route="/impatient",method="tools/call",outcome="ok"}', values: '0+100x20'}
      - {series: 'junction_requests_total{$sel,pod="a",route="/impatient",method="tools/call",outcome="aborted"}', values: '0+20x20'}
      - {series: 'junction_requests_total{$sel,pod="a",route="/quiet",method="tools/call",outcome="aborted"}', values: '0+1x20'}
      # /mcp: most requests take 2.5-10 s.
      - {series: 'junction_request_duration_seconds_bucket{$sel,pod="a",route="/mcp",method="tools/call",le="2.5"}', values: '0+10x20'}
      - {series: 'junction_request_duration_seconds_bucket{$sel,pod="a",route="/mcp",method="tools/call",le="10"}', values: '0+110x20'}
      - {series: 'junction_request_duration_seconds_bucket{$sel,pod="a",route="/mcp",method="tools/call",le="+Inf"}', values: '0+110x20'}
      - {series: 'junction_request_duration_seconds_bucket{$sel,pod="a",route="/quiet",method="tools/call",le="2.5"}', values: '0+101x20'}
      - {series: 'junction_request_duration_seconds_bucket{$sel,pod="a",route="/quiet",method="tools/call",le="+Inf"}', values: '0+101x20'}
      # crm tool calls fail half the time.
      - {series: 'junction_tool_calls_total{$sel,pod="a",upstream="crm",tool="crm__get",outcome="ok"}', values: '0+30x20'}
      - {series: 'junction_tool_calls_total{$sel,pod="a",upstream="crm",tool="crm__get",outcome="upstream_error"}', values: '0+30x20'}
      # search: half its calls are given up by their clients; none fails.
      - {series: 'junction_tool_calls_total{$sel,pod="a",upstream="search",tool="search__q",outcome="ok"}', values: '0+30x20'}
      - {series: 'junction_tool_calls_total{$sel,pod="a",upstream="search",tool="search__q",outcome="cancelled"}', values: '0+30x20'}
      # 10 rejections/s on one rule, 0.1/s on another.
      - {series: 'junction_rate_limited_total{$sel,pod="a",rule="per-user"}', values: '0+600x20'}
      - {series: 'junction_rate_limited_total{$sel,pod="a",rule="per-ip"}', values: '0+6x20'}
      # Pod a rejects a config edit at minute 2; pod b and other releases are fine.
      - {series: 'junction_config_last_reload_success{$sel,pod="a"}', values: '1 1 0x18'}
      - {series: 'junction_config_last_reload_success{$sel,pod="b"}', values: '1x20'}
      - {series: 'junction_config_last_reload_success{job="other",namespace="$namespace",pod="c"}', values: '0x20'}
      # Pod a holds 1000 of 1024 calls for client input; its ended sessions
      # table is nearly empty.
      - {series: 'junction_table_entries{$sel,pod="a",table="held_calls"}', values: '1000x20'}
      - {series: 'junction_table_capacity{$sel,pod="a",table="held_calls"}', values: '1024x20'}
      - {series: 'junction_table_entries{$sel,pod="a",table="ended_sessions"}', values: '10x20'}
      - {series: 'junction_table_capacity{$sel,pod="a",table="ended_sessions"}', values: '100000x20'}
      # Pod a starts dropping log lines at minute 4; pod b never does.
      - {series: 'junction_log_lines_dropped_total{$sel,pod="a"}', values: '0 0 0 0 50+50x16'}
      - {series: 'junction_log_lines_dropped_total{$sel,pod="b"}', values: '0x20'}
      # Upstream crm's tools drift from their pins at minute 5 on both pods.
      - {series: 'junction_tools_quarantined{$sel,pod="a",upstream="crm"}', values: '0x4 2x15'}
      - {series: 'junction_tools_quarantined{$sel,pod="b",upstream="crm"}', values: '0x4 2x15'}
    alert_rule_test:
      - {eval_time: 3m, alertname: JunctionUpstreamDown, exp_alerts: []}
      - eval_time: 10m
        alertname: JunctionUpstreamDown
        exp_alerts:
          - exp_labels: {severity: warning, namespace: $namespace, upstream: crm}
            exp_annotations:
              summary: Upstream crm is down
              description: No Junction replica in $namespace has reached upstream crm; its tools are missing from the catalog or failing.
      - eval_time: 15m
        alertname: JunctionHighErrorRatio
        exp_alerts:
          - exp_labels: {severity: warning, namespace: $namespace, route: /mcp}
            exp_annotations:
              summary: Junction route /mcp answers errors
              description: 9.091% of MCP requests on route /mcp failed over 5m.
      - {eval_time: 5m, alertname: JunctionRequestsAborted, exp_alerts: []}
      - eval_time: 15m
        alertname: JunctionRequestsAborted
        exp_alerts:
          - exp_labels: {severity: info, namespace: $namespace, route: /impatient}
            exp_annotations:
              summary: Clients give up on Junction route /impatient
              description: 'Clients closed 16.67% of MCP requests on route /impatient before their answer over 5m: a client timeout shorter than a slow tool, or an upstream that stalls.'
      - eval_time: 15m
        alertname: JunctionHighLatencyP99
        exp_alerts:
          - exp_labels: {severity: warning, namespace: $namespace, route: /mcp}
            exp_annotations:
              summary: Junction route /mcp is slow
              description: p99 request latency on route /mcp is 9.918s.
      - eval_time: 15m
        alertname: JunctionToolCallErrors
        exp_alerts:
          - exp_labels: {severity: warning, namespace: $namespace, upstream: crm}
            exp_annotations:
              summary: Tool calls to upstream crm fail
              description: 50% of tools/call requests to crm failed over 5m.
      - eval_time: 15m
        alertname: JunctionRateLimiting
        exp_alerts:
          - exp_labels: {severity: info, namespace: $namespace, rule: per-user}
            exp_annotations:
              summary: Rate-limit rule per-user rejects requests
              description: Rule per-user rejected 10 requests/s over 5m.
      - {eval_time: 5m, alertname: JunctionConfigReloadFailed, exp_alerts: []}
      - eval_time: 8m
        alertname: JunctionConfigReloadFailed
        exp_alerts:
          - exp_labels: {severity: warning, job: $release, namespace: $namespace, pod: a}
            exp_annotations:
              summary: Junction a rejected its new config
              description: 'The last config reload on a failed; it keeps serving the previous config. See its logs ("config reload failed") or run junction validate on the ConfigMap.'
      - {eval_time: 3m, alertname: JunctionTableNearlyFull, exp_alerts: []}
      - eval_time: 10m
        alertname: JunctionTableNearlyFull
        exp_alerts:
          - exp_labels: {severity: warning, job: $release, namespace: $namespace, pod: a, table: held_calls}
            exp_annotations:
              summary: 'Junction a: table held_calls is nearly full'
              description: 'The held_calls table on a is 97.66% full. Past its capacity it refuses new entries (calls needing client input, subscriptions, log levels, session DELETEs). Add replicas, or look for clients that never finish.'
      - {eval_time: 3m, alertname: JunctionLogLinesDropped, exp_alerts: []}
      - eval_time: 10m
        alertname: JunctionLogLinesDropped
        exp_alerts:
          - exp_labels: {severity: warning, job: $release, namespace: $namespace, pod: a}
            exp_annotations:
              summary: Junction a drops log lines
              description: 'Junction a dropped log lines, access lines among them: its stderr is not read fast enough (8 MiB were waiting). Check the node''s log collector.'
      - {eval_time: 3m, alertname: JunctionToolQuarantined, exp_alerts: []}
      - eval_time: 10m
        alertname: JunctionToolQuarantined
        exp_alerts:
          - exp_labels: {severity: warning, namespace: $namespace, upstream: crm}
            exp_annotations:
              summary: Tools of upstream crm are quarantined
              description: 2 tool(s) of upstream crm no longer match their pins (or have none) and are hidden from clients. Review the change with junction catalog --diff, then update the pin file (junction catalog --write-pins) if it is wanted.
EOF
  check "promtool test rules: alerts fire and stay quiet as intended" \
    bash -c "cd '$work/rules-default' && '$promtool' test rules tests.yaml"
fi

# --- a real Junction: scrape, lint, compare with what the chart uses ---------------------
mdir="$work/metrics"
mkdir -p "$mdir"
# The gateway.yaml of the default rendering, as a pod would run it, except
# that it listens on 127.0.0.1 and a free port (the environment overrides
# server.listen, exactly as JUNCTION_SERVER__LISTEN would in a pod).
if [ -f "$work/defaults/gateway.yaml" ]; then
  cp "$work/defaults/gateway.yaml" "$mdir/gateway.yaml"
else
  bad "the default rendering has a gateway.yaml to run"
  finish
fi
: >"$mdir/stdout"
JUNCTION_SERVER__LISTEN=127.0.0.1:0 "$junction" run --config "$mdir/gateway.yaml" >"$mdir/stdout" 2>"$mdir/stderr" &
gw_pid=$!
port=""
for _ in $(seq 1 100); do
  port="$(sed -n 's/^junction listening on 127\.0\.0\.1:\([0-9]*\)$/\1/p' "$mdir/stdout")"
  [ -n "$port" ] && break
  kill -0 "$gw_pid" 2>/dev/null || break
  sleep 0.1
done
if [ -z "$port" ]; then
  bad "junction runs the default rendering's gateway.yaml" "$(cat "$mdir/stderr")"
else
  ok "junction runs the default rendering's gateway.yaml (on 127.0.0.1:$port)"
  cat >"$mdir/drive.py" <<'PY'
"""Drives traffic so the labelled families get children, and reloads the config."""
import json, os, signal, subprocess, sys, time, urllib.request, urllib.error

base, pid, cfg = sys.argv[1], int(sys.argv[2]), sys.argv[3]
problems = []

def http(method, path, body=None, headers=None):
    req = urllib.request.Request(base + path, method=method, data=body, headers=headers or {})
    try:
        with urllib.request.urlopen(req, timeout=20) as r:
            return r.status, r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode()

def until(what, f):
    for _ in range(150):
        if f():
            return True
        time.sleep(0.1)
    problems.append("timed out waiting for " + what)
    return False

def mcp(path, method, params, headers=None, n=[0]):
    n[0] += 1
    params = dict(params)
    params["_meta"] = {"io.modelcontextprotocol/protocolVersion": "2026-07-28",
                       "io.modelcontextprotocol/clientCapabilities": {},
                       "io.modelcontextprotocol/clientInfo": {"name": "chart-check", "version": "1"}}
    h = {"content-type": "application/json", "accept": "application/json, text/event-stream",
         "mcp-protocol-version": "2026-07-28", "mcp-method": method}
    if "name" in params:
        h["mcp-name"] = params["name"]
    h.update(headers or {})
    body = json.dumps({"jsonrpc": "2.0", "id": n[0], "method": method, "params": params}).encode()
    return http("POST", path, body, h)

def scrape():
    return http("GET", "/metrics")[1]

until("/readyz 200", lambda: http("GET", "/readyz")[0] == 200)
if http("GET", "/healthz")[0] != 200:
    problems.append("/healthz is not 200")
status, text = mcp("/mcp", "tools/list", {})
if status != 200 or "weather__add" not in text or "notes__add_note" not in text:
    problems.append(f"tools/list on /mcp: {status} {text[:300]}")
status, text = mcp("/mcp", "tools/call", {"name": "weather__add", "arguments": {"a": 1, "b": 2}})
if status != 200 or '"3"' not in text and "3" not in text:
    problems.append(f"tools/call weather__add: {status} {text[:300]}")
mcp("/mcp", "tools/call", {"name": "notes__add_note", "arguments": {"text": "chart-check"}})
mcp("/mcp", "tools/call", {"name": "weather__no_such_tool", "arguments": {}})
# A header that contradicts the body: rejected with HTTP 400 (outcome="error").
status, _ = mcp("/mcp", "tools/list", {}, {"mcp-method": "tools/call"})
if status != 400:
    problems.append(f"mismatched Mcp-Method header: want 400, got {status}")

# A good edit, then a bad one (SIGHUP makes the reload immediate).
original = open(cfg).read()
good = original + "# edited by chart-check\n"
open(cfg, "w").write(good)
os.kill(pid, signal.SIGHUP)
until("a successful reload", lambda: 'junction_config_reloads_total{result="success"}' in scrape())
open(cfg, "w").write(good + "bogus_section: 1\n")
os.kill(pid, signal.SIGHUP)
until("a failed reload", lambda: "junction_config_last_reload_success 0" in scrape())
open(cfg, "w").write(good)
os.kill(pid, signal.SIGHUP)
until("recovery after the bad edit", lambda: "junction_config_last_reload_success 1" in scrape())
status, text = mcp("/mcp", "tools/call", {"name": "weather__add", "arguments": {"a": 2, "b": 2}})
if status != 200:
    problems.append(f"tools/call after the reloads: {status} {text[:300]}")
open(sys.argv[4], "w").write(scrape())
print("\n".join(problems))
sys.exit(1 if problems else 0)
PY
  check "drive it: ready, tools/list, tools/call, an error, a good and a bad reload" \
    "$py" "$mdir/drive.py" "http://127.0.0.1:$port" "$gw_pid" "$mdir/gateway.yaml" "$mdir/scrape.txt"
  if [ -s "$mdir/scrape.txt" ]; then
    check "promtool check metrics on the scrape" bash -c "'$promtool' check metrics <'$mdir/scrape.txt'"
    check "dashboard and alerts use only metrics and labels Junction exports" \
      "$py" "$work/check.py" metrics "$mdir/scrape.txt" crates/telemetry/src/lib.rs \
      "${rules_files[@]}" "${dashboards[@]}"
  else
    bad "scrape /metrics" "$(tail -20 "$mdir/stderr")"
  fi
  kill "$gw_pid" 2>/dev/null
  wait "$gw_pid" 2>/dev/null
  gw_pid=""
fi

finish
