#!/usr/bin/python3
"""deploy_check.py - offline checks of deploy/ that need no cluster, no
container engine and no network (tests/integration/deploy_files.sh).

  deploy_check.py k8s DEPLOY_DIR           probes, ports, resources, security,
                                           references between the manifests
  deploy_check.py decoded IN.yaml OUT.json every field of IN survived kubectl's
                                           typed decoding into OUT (unknown or
                                           misspelled fields are dropped there)
  deploy_check.py compose DEPLOY_DIR       compose.yaml's services and settings
  deploy_check.py configs DEPLOY_DIR OUT   writes each trainwatch configuration
                                           embedded in the manifests to OUT/
Exit 1 with one line per problem."""
import glob
import json
import os
import sys

import yaml

HTTP_PORT = 9468  # http.port's default; the image's TW_HTTP_PORT
problems = []


def need(cond, what):
    if not cond:
        problems.append(what)


def docs(path):
    with open(path) as f:
        return [d for d in yaml.safe_load_all(f) if d is not None]


def manifests(deploy):
    files = sorted(glob.glob(os.path.join(deploy, "k8s", "*.yaml")) +
                   glob.glob(os.path.join(deploy, "k8s", "examples", "*.yaml")))
    return [(f, d) for f in files for d in docs(f)]


def pod_spec(obj):
    return obj["spec"]["template"]["spec"]


def check_engine_container(where, c, port_name="http"):
    ports = {p["name"]: p["containerPort"] for p in c.get("ports", [])}
    need(ports.get(port_name) == HTTP_PORT, f"{where}: port '{port_name}' is not {HTTP_PORT}")
    env = {e["name"]: e.get("value") for e in c.get("env", [])}
    need(env.get("TW_HTTP_PORT") == str(HTTP_PORT), f"{where}: TW_HTTP_PORT is not {HTTP_PORT}")
    for probe, path in (("livenessProbe", "/healthz"), ("readinessProbe", "/readyz"),
                        ("startupProbe", "/healthz")):
        get = c.get(probe, {}).get("httpGet", {})
        need(get.get("path") == path and get.get("port") == port_name,
             f"{where}: {probe} is not GET {path} on port {port_name}")


def check_container_basics(where, c):
    res = c.get("resources", {})
    need("cpu" in res.get("requests", {}) and "memory" in res.get("requests", {}),
         f"{where}: no cpu and memory requests")
    need("memory" in res.get("limits", {}), f"{where}: no memory limit")
    sc = c.get("securityContext", {})
    need(sc.get("allowPrivilegeEscalation") is False, f"{where}: allowPrivilegeEscalation not false")
    need(sc.get("readOnlyRootFilesystem") is True, f"{where}: root filesystem not read-only")
    need(sc.get("capabilities", {}).get("drop") == ["ALL"], f"{where}: capabilities not dropped")


def check_k8s(deploy):
    objs = manifests(deploy)
    by_kind = {}
    for f, d in objs:
        need(all(k in d for k in ("apiVersion", "kind", "metadata")), f"{f}: not a Kubernetes object")
        by_kind.setdefault(d["kind"], {})[d["metadata"]["name"]] = d
    secrets = {n: set(s.get("stringData", {})) | set(s.get("data", {}))
               for n, s in by_kind.get("Secret", {}).items()}
    configmaps = {n: set(c.get("data", {})) for n, c in by_kind.get("ConfigMap", {}).items()}
    workloads = [d for _, d in objs if d["kind"] in ("Deployment", "DaemonSet", "Job")]
    need(len(workloads) == 3, f"expected the engine Deployment, agent DaemonSet and sidecar Job, found {len(workloads)}")
    for w in workloads:
        name = f"{w['kind']}/{w['metadata']['name']}"
        spec = pod_spec(w)
        labels = w["spec"]["template"]["metadata"].get("labels", {})
        sel = w["spec"].get("selector", {}).get("matchLabels")
        if sel is not None:
            need(all(labels.get(k) == v for k, v in sel.items()), f"{name}: selector does not match the pod labels")
        psc = spec.get("securityContext", {})
        need(psc.get("seccompProfile", {}).get("type") == "RuntimeDefault", f"{name}: no RuntimeDefault seccomp")
        containers = spec.get("containers", []) + spec.get("initContainers", [])
        for c in containers:
            where = f"{name}/{c['name']}"
            args = c.get("args", [])
            for e in c.get("env", []):
                ref = e.get("valueFrom", {})
                if "secretKeyRef" in ref:
                    r = ref["secretKeyRef"]
                    need(r["key"] in secrets.get(r["name"], set()),
                         f"{where}: secret {r['name']} key {r['key']} not in examples/secret.yaml")
                if "configMapKeyRef" in ref:
                    r = ref["configMapKeyRef"]
                    need(r["key"] in configmaps.get(r["name"], set()), f"{where}: configmap {r['name']} has no {r['key']}")
            if not c["image"].startswith("trainwatch:"):
                continue  # the example's trainer
            check_container_basics(where, c)
            need(psc.get("runAsNonRoot") or c.get("securityContext", {}).get("runAsNonRoot"),
                 f"{where}: not runAsNonRoot")
            need(all("password" not in a.lower() for a in args), f"{where}: a secret on the command line")
            if args and args[0] == "run":
                check_engine_container(where, c)
                mounts = {m["name"] for m in c.get("volumeMounts", [])}
                vols = {v["name"]: v for v in spec.get("volumes", [])}
                for m in mounts:
                    need(m in vols, f"{where}: mounts undeclared volume {m}")
                    cm = vols.get(m, {}).get("configMap")
                    if cm:
                        need("trainwatch.yaml" in configmaps.get(cm["name"], set()),
                             f"{where}: configmap {cm['name']} has no trainwatch.yaml")
            else:
                need(args[:1] == ["agent"], f"{where}: neither run nor agent")
        if w["kind"] == "Job":
            for c in spec.get("initContainers", []):
                need(c.get("restartPolicy") == "Always", f"{name}/{c['name']}: not a native sidecar")
    for n, s in by_kind.get("Service", {}).items():
        ports = {p["name"]: p for p in s["spec"]["ports"]}
        need(ports.get("http", {}).get("port") == HTTP_PORT, f"Service/{n}: port http is not {HTTP_PORT}")


def check_decoded(src, out):
    """Every mapping key and scalar of src is in out (kubectl's typed decode
    drops unknown fields silently; `set env` added one variable)."""
    with open(src) as f:
        a = yaml.safe_load(f)
    with open(out) as f:
        b = json.load(f)

    def walk(x, y, path):
        if isinstance(x, dict):
            if not isinstance(y, dict):
                problems.append(f"{src}: {path}: a mapping became {type(y).__name__}")
                return
            for k, v in x.items():
                if k not in y:
                    problems.append(f"{src}: {path}.{k}: dropped by kubectl (unknown field?)")
                else:
                    walk(v, y[k], f"{path}.{k}")
        elif isinstance(x, list):
            if not isinstance(y, list) or len(y) < len(x):
                problems.append(f"{src}: {path}: list changed")
                return
            for i, v in enumerate(x):
                walk(v, y[i], f"{path}[{i}]")
    walk(a, b, "")


def check_compose(deploy):
    path = os.path.join(deploy, "compose.yaml")
    with open(path) as f:
        c = yaml.safe_load(f)
    s = c.get("services", {})
    need({"kafka", "redis", "engine", "agent"} <= set(s), f"{path}: services {sorted(s)}")
    kenv = s.get("kafka", {}).get("environment", {})
    need("controller" in str(kenv.get("KAFKA_PROCESS_ROLES", "")), f"{path}: kafka is not KRaft")
    need(str(kenv.get("KAFKA_CONTROLLER_QUORUM_VOTERS", "")).startswith("1@"), f"{path}: no single-node quorum")
    need(not any("zookeeper" in n for n in s), f"{path}: a ZooKeeper service")
    rcmd = s.get("redis", {}).get("command", [])
    need("--appendonly" in rcmd and rcmd[rcmd.index("--appendonly") + 1] == "yes", f"{path}: redis without AOF")
    eng = s.get("engine", {})
    need(eng.get("command", [])[:1] == ["run"], f"{path}: engine does not run `run`")
    need(s.get("agent", {}).get("command", [])[:1] == ["agent"], f"{path}: agent does not run `agent`")
    build = eng.get("build", {})
    need(os.path.isfile(os.path.join(deploy, build.get("context", "."), build.get("dockerfile", "?"))),
         f"{path}: engine's Dockerfile not found")
    for v in eng.get("volumes", []):
        src = v.split(":")[0]
        if src.startswith("."):
            need(os.path.exists(os.path.join(deploy, src)), f"{path}: mounted {src} not found")
    need(f"127.0.0.1:{HTTP_PORT}:{HTTP_PORT}" in eng.get("ports", []), f"{path}: engine's http port not published on loopback")


def write_configs(deploy, out):
    n = 0
    for f, d in manifests(deploy):
        if d["kind"] == "ConfigMap" and "trainwatch.yaml" in d.get("data", {}):
            name = f"{d['metadata']['name']}.yaml"
            with open(os.path.join(out, name), "w") as w:
                w.write(d["data"]["trainwatch.yaml"])
            print(name)
            n += 1
    need(n >= 2, "expected the engine's and the sidecar's configurations")


def main():
    cmd = sys.argv[1]
    if cmd == "k8s":
        check_k8s(sys.argv[2])
    elif cmd == "decoded":
        check_decoded(sys.argv[2], sys.argv[3])
    elif cmd == "compose":
        check_compose(sys.argv[2])
    elif cmd == "configs":
        write_configs(sys.argv[2], sys.argv[3])
    else:
        sys.exit(f"unknown check {cmd}")
    for p in problems:
        print(f"problem: {p}", file=sys.stderr)
    sys.exit(1 if problems else 0)


main()
