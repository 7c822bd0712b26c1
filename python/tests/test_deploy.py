"""The Kubernetes manifests (deploy/*.yaml) against what the built ``kernelgym`` accepts.

No cluster is needed: every container's command line and every probe's must name a real
``kernelgym`` subcommand and only flags that subcommand accepts (read from the binary's own
``--help``), ports must agree between args, containerPorts and Services, the runners must connect
to the Service that publishes the server's runner port, probes must read what the containers
write. Then the cpu runner's and the server's command lines are run for real (addresses and paths
moved into a temporary folder), and their probes are run against them.
"""

from __future__ import annotations

import copy
import json
import os
import re
import shutil
import subprocess
import time
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

import pytest
import yaml  # pyyaml: a test extra (python/pyproject.toml)

from conftest import REPO, server_binary

DEPLOY = REPO / "deploy"


# ---- the binary's command line, as its --help tells it -------------------------------------------


@dataclass
class Usage:
    options: dict[str, bool] = field(default_factory=dict)  # --flag -> takes a value
    subcommands: set[str] = field(default_factory=set)


# CLI11's help: "  --bind TEXT=tcp://...   description", "  --null-backend   description",
# "  --allow-draining Needs: --connect", "  -h,--help   Print ...". One space then an upper-case
# type name (TEXT, INT, FLOAT, UINT: "Needs:" is not one): the option takes a value.
_OPTION = re.compile(r"^\s{2}(?:-\w,)?(--[\w-]+)(?: ([A-Z]+)(?=[\s=:]|$))?")
_SUBCOMMAND = re.compile(r"^\s{2}([a-z][\w-]*)\s{2,}\S")


@cache
def usage(*path: str) -> Usage:
    out = subprocess.run(
        [str(server_binary()), *path, "--help"], capture_output=True, text=True, timeout=30, check=True
    ).stdout
    u = Usage()
    section = ""
    for line in out.splitlines():
        if line.strip().endswith(":") and not line.startswith(" "):
            section = line.strip().lower()
            continue
        if section.startswith("options") and (m := _OPTION.match(line)):
            u.options[m.group(1)] = m.group(2) is not None
        elif section.startswith("subcommands") and (m := _SUBCOMMAND.match(line)):
            u.subcommands.add(m.group(1))
    assert u.options, f"no options read from `kernelgym {' '.join(path)} --help`:\n{out}"
    return u


@dataclass
class Invocation:
    subcommand: str
    flags: dict[str, list[str]]  # --flag -> its values ("" for a switch), in order

    def one(self, flag: str, problems: list[str] | None = None, default: str = "") -> str:
        """The flag's one value (``default``, and a problem when ``problems`` is given, if it does
        not have exactly one)."""
        values = self.flags.get(flag, [])
        if len(values) == 1:
            return values[0]
        if problems is not None:
            problems.append(f"kernelgym {self.subcommand}: want one {flag}, got {values}")
        return default


def parse_command(argv: list[str], where: str, problems: list[str]) -> Invocation | None:
    """``argv`` as the binary would read it; every flag it would refuse goes to ``problems``."""
    if not argv or argv[0] != "kernelgym":
        problems.append(f"{where}: runs {argv[:1]}, not the image's `kernelgym`")
        return None
    top = usage()
    rest = list(argv[1:])
    while rest and rest[0].startswith("--"):  # global options before the subcommand (--suites)
        flag = rest.pop(0).split("=", 1)[0]
        if flag not in top.options:
            problems.append(f"{where}: `kernelgym` has no global option {flag}")
        elif top.options[flag] and "=" not in flag and rest:
            rest.pop(0)
    if not rest or rest[0] not in top.subcommands:
        problems.append(f"{where}: {rest[:1]} is not a kernelgym subcommand ({sorted(top.subcommands)})")
        return None
    sub = rest.pop(0)
    accepted = usage(sub).options
    flags: dict[str, list[str]] = {}
    while rest:
        token = rest.pop(0)
        if not token.startswith("--"):
            problems.append(f"{where}: kernelgym {sub}: unexpected argument {token!r}")
            continue
        flag, _, inline = token.partition("=")
        if flag not in accepted:
            problems.append(f"{where}: kernelgym {sub} has no flag {flag}")
            continue
        if not accepted[flag]:
            flags.setdefault(flag, []).append("")
        elif inline:
            flags.setdefault(flag, []).append(inline)
        elif rest and not rest[0].startswith("--"):
            flags.setdefault(flag, []).append(rest.pop(0))
        else:
            problems.append(f"{where}: kernelgym {sub} {flag} needs a value")
    return Invocation(sub, flags)


# ---- the manifests ---------------------------------------------------------------------------------


def load_manifests() -> list[dict[str, Any]]:
    docs = []
    for path in sorted(DEPLOY.glob("*.yaml")):
        if path.name == "kustomization.yaml":
            continue
        docs.extend(d for d in yaml.safe_load_all(path.read_text()) if d)
    return docs


def port_of(endpoint: str) -> int:
    """tcp://HOST:PORT's port; -1 when there is none."""
    try:
        return urlparse(endpoint).port or -1
    except ValueError:
        return -1


def container_port(container: dict[str, Any], target: int | str) -> int | None:
    for p in container.get("ports", []):
        if target in (p.get("name"), p["containerPort"]):
            return p["containerPort"]
    return None


def selects(selector: dict[str, str], labels: dict[str, str]) -> bool:
    return bool(selector) and all(labels.get(k) == v for k, v in selector.items())


def check_pod(
    name: str, pod: dict[str, Any], claims: set[str], problems: list[str]
) -> list[tuple[dict[str, Any], Invocation, dict[str, Invocation]]]:
    """One Deployment's pod: volumes, probes, resources; returns (container, its invocation, its
    probes' invocations) for the cross-checks."""
    out = []
    volumes = {v["name"]: v for v in pod["spec"].get("volumes", [])}
    guide = (REPO / "docs" / "deploy.md").read_text()
    for v in volumes.values():
        made_by_hand = v.get("secret", {}).get("secretName") or v.get("configMap", {}).get("name")
        if made_by_hand and made_by_hand not in guide:
            problems.append(f"{name}: volume {v['name']} needs {made_by_hand}, which docs/deploy.md does not say how to make")
        claim = v.get("persistentVolumeClaim", {}).get("claimName")
        if claim is not None and claim not in claims:
            problems.append(f"{name}: volume {v['name']} claims {claim}, which no manifest defines")
    for c in pod["spec"]["containers"]:
        where = f"{name}/{c['name']}"
        for m in c.get("volumeMounts", []):
            if m["name"] not in volumes:
                problems.append(f"{where}: mounts volume {m['name']}, which the pod does not have")
        resources = c.get("resources", {})
        requests, limits = resources.get("requests", {}), resources.get("limits", {})
        if not requests or "memory" not in limits:
            problems.append(f"{where}: needs resource requests and a memory limit")
        if requests.get("google.com/tpu") != limits.get("google.com/tpu"):
            problems.append(f"{where}: google.com/tpu request and limit must be equal")
        mounts = [m["mountPath"] for m in c.get("volumeMounts", [])]
        paths = [a for a in c.get("args", []) if a.startswith("/")]
        paths += [e["value"] for e in c.get("env", []) if e.get("value", "").startswith("/")]
        for kind in ("startupProbe", "livenessProbe", "readinessProbe"):
            paths += [a for a in c.get(kind, {}).get("exec", {}).get("command", []) if a.startswith("/")]
        for path in paths:
            if not any(path == m or path.startswith(m.rstrip("/") + "/") for m in mounts):
                problems.append(f"{where}: {path} is in no mounted volume (the image has no such file)")
        inv = parse_command([*c.get("command", []), *c.get("args", [])], where, problems)
        if inv is None:
            continue
        if "livenessProbe" not in c or "readinessProbe" not in c:
            problems.append(f"{where}: needs a liveness and a readiness probe")
        probes: dict[str, Invocation] = {}
        for kind in ("startupProbe", "livenessProbe", "readinessProbe"):
            if kind not in c:
                continue
            p_inv = parse_command(c[kind].get("exec", {}).get("command", []), f"{where} {kind}", problems)
            if p_inv is None:
                continue
            if p_inv.subcommand != "health":
                problems.append(f"{where} {kind}: runs `kernelgym {p_inv.subcommand}`, not `kernelgym health`")
                continue
            probes[kind] = p_inv
            waits = float(p_inv.one("--timeout-s", default="5")) if "--connect" in p_inv.flags else 0
            if c[kind].get("timeoutSeconds", 1) <= waits:
                problems.append(f"{where} {kind}: timeoutSeconds leaves no time after --timeout-s {waits:g}")
        out.append((c, inv, probes))
    return out


def check_server(where: str, pod: dict[str, Any], c: dict[str, Any], inv: Invocation,
                 probes: dict[str, Invocation], problems: list[str]) -> None:  # fmt: skip
    for flag, port_name in (("--bind", "clients"), ("--runner-bind", "runners")):
        port = port_of(inv.one(flag, problems))
        if container_port(c, port_name) != port:
            problems.append(f"{where}: {flag} port {port} is not its containerPort '{port_name}'")
    for kind, p_inv in probes.items():
        endpoint = p_inv.one("--connect", problems)
        if urlparse(endpoint).hostname != "127.0.0.1" or port_of(endpoint) != port_of(inv.one("--bind")):
            problems.append(f"{where} {kind}: probes {endpoint}, not this server's client port on 127.0.0.1")
    loopback = all(urlparse(inv.one(f)).hostname in ("127.0.0.1", "localhost") for f in ("--bind", "--runner-bind"))
    curve = "--server-key" in inv.flags
    if not loopback and not all(f in inv.flags for f in ("--server-key", "--allow-clients", "--allow-runners")):
        problems.append(f"{where}: bound beyond loopback, the server needs CURVE: --server-key, --allow-clients, "
                        "--allow-runners (docs/security.md)")  # fmt: skip
    env = {e["name"] for e in c.get("env", [])}
    if curve and probes and not {"KERNELGYM_SERVER_KEY", "KERNELGYM_CLIENT_KEY"} <= env:
        problems.append(f"{where}: a CURVE server's probes need KERNELGYM_SERVER_KEY and KERNELGYM_CLIENT_KEY")
    if "--allow-draining" not in probes.get("livenessProbe", Invocation("", {})).flags:
        problems.append(f"{where}: the liveness probe must pass while the server drains (--allow-draining)")
    mounts = [m["mountPath"] for m in c.get("volumeMounts", [])]
    record_dir = inv.one("--record-dir")
    if record_dir and record_dir not in mounts:
        problems.append(f"{where}: --record-dir {record_dir} is not a mounted volume")
    grace = pod["spec"].get("terminationGracePeriodSeconds", 30)
    if grace <= float(inv.one("--drain-timeout", default="60")):
        problems.append(f"{where}: terminationGracePeriodSeconds {grace} is not longer than --drain-timeout")


def check_runner(where: str, pod: dict[str, Any], c: dict[str, Any], inv: Invocation,
                 probes: dict[str, Invocation], problems: list[str]) -> None:  # fmt: skip
    selector = pod["spec"].get("nodeSelector", {})
    if not selector:
        problems.append(f"{where}: a runner needs a nodeSelector (timings compare only on like machines)")
    health_file = inv.one("--health-file", problems)
    mounts = [m["mountPath"] for m in c.get("volumeMounts", [])]
    if str(Path(health_file).parent) not in mounts:
        problems.append(f"{where}: --health-file {health_file} is not in a mounted volume")
    for kind, p_inv in probes.items():
        if p_inv.flags.get("--file") != [health_file]:
            problems.append(f"{where} {kind}: reads {p_inv.flags.get('--file')}, not --health-file {health_file}")
    env = {e["name"] for e in c.get("env", [])}
    if not ("--server-key" in inv.flags or "KERNELGYM_SERVER_KEY" in env) or not (
        "--runner-key" in inv.flags or "KERNELGYM_RUNNER_KEY" in env
    ):
        problems.append(f"{where}: a runner of a CURVE server needs --server-key and --runner-key")
    if "pallas" in inv.flags.get("--backend", []):
        for key in ("cloud.google.com/gke-tpu-accelerator", "cloud.google.com/gke-tpu-topology"):
            if key not in selector:
                problems.append(f"{where}: a pallas runner on TPU needs the node selector {key}")
        if "google.com/tpu" not in c.get("resources", {}).get("limits", {}):
            problems.append(f"{where}: a pallas runner on TPU needs the google.com/tpu resource")


def check(docs: list[dict[str, Any]]) -> list[str]:
    """Every problem with the manifests, as readable lines (empty: they are consistent)."""
    problems: list[str] = []
    services = {d["metadata"]["name"]: d for d in docs if d["kind"] == "Service"}
    claims = {d["metadata"]["name"] for d in docs if d["kind"] == "PersistentVolumeClaim"}
    servers, runners, images = [], [], set()
    for d in (d for d in docs if d["kind"] == "Deployment"):
        name, pod = d["metadata"]["name"], d["spec"]["template"]
        labels = pod["metadata"]["labels"]
        if not selects(d["spec"]["selector"]["matchLabels"], labels):
            problems.append(f"{name}: its selector does not match its pods' labels {labels}")
        for c, inv, probes in check_pod(name, pod, claims, problems):
            where = f"{name}/{c['name']}"
            images.add(c["image"])
            if inv.subcommand == "serve":
                check_server(where, pod, c, inv, probes, problems)
                servers.append((labels, c, inv))
                if d["spec"].get("replicas", 1) != 1:
                    problems.append(f"{name}: a server's sessions live in its memory: run 1 replica per Service")
            elif inv.subcommand == "runner":
                check_runner(where, pod, c, inv, probes, problems)
                runners.append((where, inv))
    if len(servers) != 1:
        return [*problems, f"{len(servers)} containers run `kernelgym serve`; these manifests hold one server"]
    if len(images) != 1:
        problems.append(f"the containers run different images: {sorted(images)}")
    labels, server, serve = servers[0]

    # The Services: each selects the server's pods and publishes ports of its container.
    published: dict[tuple[str, int], int | None] = {}  # (service, port) -> the container port reached
    for n, s in services.items():
        if not selects(s["spec"]["selector"], labels):
            problems.append(f"Service {n} selects no server pods")
            continue
        for p in s["spec"]["ports"]:
            published[(n, p["port"])] = container_port(server, p.get("targetPort", p["port"]))
            if published[(n, p["port"])] is None:
                problems.append(f"Service {n}: port {p['port']} targets no port of the server container")
    if port_of(serve.one("--bind")) not in published.values():
        problems.append("no Service publishes the server's client port")

    # Runners reach the server's runner port through a Service, and serve backends it accepts.
    runner_port = port_of(serve.one("--runner-bind"))
    backends = set(serve.one("--backends", default="cpu").split(","))
    readiness = server.get("readinessProbe", {}).get("exec", {}).get("command", [])
    for where, inv in runners:
        connect = inv.one("--connect", problems)
        service, port = urlparse(connect).hostname or "", port_of(connect)
        if (service, port) not in published:
            problems.append(f"{where}: --connect {connect} is no Service's port")
        elif published[(service, port)] != runner_port:
            problems.append(f"{where}: --connect {connect} is not the server's --runner-bind port {runner_port}")
        elif "--require-backend" in readiness and not services[service]["spec"].get("publishNotReadyAddresses"):
            problems.append(
                f"{where}: the server is ready only once a runner joined, so Service {service} must publish "
                "not-ready addresses (publishNotReadyAddresses: true), or no runner could ever reach it"
            )
        for backend in inv.flags.get("--backend", ["cpu"]):
            if backend not in backends:
                problems.append(f"{where}: backend {backend} is not in the server's --backends {sorted(backends)}")
    return problems


# ---- tests -----------------------------------------------------------------------------------------


def test_the_manifests_agree_with_the_binary_and_each_other():
    docs = load_manifests()
    kinds = sorted((d["kind"], d["metadata"]["name"]) for d in docs)
    assert ("Deployment", "kernelgym-server") in kinds
    assert ("Deployment", "kernelgym-runner-cpu") in kinds
    assert ("Deployment", "kernelgym-runner-pallas") in kinds
    assert check(docs) == []


def test_kustomization_lists_every_manifest_and_the_image():
    k = yaml.safe_load((DEPLOY / "kustomization.yaml").read_text())
    assert sorted(k["resources"]) == sorted(p.name for p in DEPLOY.glob("*.yaml") if p.name != "kustomization.yaml")
    images = {c["image"].split(":")[0] for d in load_manifests() if d["kind"] == "Deployment"
              for c in d["spec"]["template"]["spec"]["containers"]}  # fmt: skip
    assert images == {i["name"] for i in k["images"]}
    dockerfile = (DEPLOY / "Dockerfile").read_text()
    assert re.search(r"^FROM debian:12\b", dockerfile, re.M)
    for script in ("scripts/install_deps.sh", "scripts/build.sh"):
        assert script in dockerfile and (REPO / script).is_file()
    assert "/usr/local/bin/kernelgym" in dockerfile  # the manifests run `kernelgym` from PATH


def _server_container(docs: list[dict[str, Any]]) -> dict[str, Any]:
    return next(
        d for d in docs if d["kind"] == "Deployment" and d["metadata"]["name"] == "kernelgym-server"
    )["spec"]["template"]["spec"]["containers"][0]


@pytest.mark.parametrize(
    "change, fragment",
    [
        (lambda c: c["args"].append("--no-such-flag"), "kernelgym serve has no flag --no-such-flag"),
        (lambda c: c["args"].__setitem__(0, "serv"), "'serv'] is not a kernelgym subcommand"),
        (lambda c: c["readinessProbe"]["exec"]["command"].append("--no-such-probe-flag"), "kernelgym health has no flag --no-such-probe-flag"),
        (lambda c: c["livenessProbe"]["exec"]["command"].remove("--allow-draining"), "--allow-draining"),
        (lambda c: c["ports"][1].update(containerPort=6000), "--runner-bind port 5556 is not its containerPort"),
        (lambda c: c["readinessProbe"]["exec"].update(command=["kernelgym", "tasks"]), "not `kernelgym health`"),
        (lambda c: c.update(args=[a for a in c["args"] if "server" not in a]), "bound beyond loopback, the server needs CURVE"),
        (lambda c: c.pop("env"), "probes need KERNELGYM_SERVER_KEY and KERNELGYM_CLIENT_KEY"),
        (lambda c: c["volumeMounts"].pop(2), "/etc/kernelgym/probe/probe.key is in no mounted volume"),
    ],
)  # fmt: skip
def test_a_broken_manifest_is_caught(change, fragment):
    docs = copy.deepcopy(load_manifests())
    change(_server_container(docs))
    problems = check(docs)
    assert any(fragment in p for p in problems), problems


def test_a_runner_pointed_at_the_wrong_port_or_service_is_caught():
    docs = copy.deepcopy(load_manifests())
    runner = next(d for d in docs if d["metadata"]["name"] == "kernelgym-runner-cpu")
    args = runner["spec"]["template"]["spec"]["containers"][0]["args"]
    at = args.index("--connect") + 1
    args[at] = "tcp://kernelgym:5555"  # the clients' Service
    assert any("not the server's --runner-bind port 5556" in p for p in check(docs))
    args[at] = "tcp://kernelgym-nowhere:5556"
    assert any("is no Service's port" in p for p in check(docs))
    service = next(d for d in docs if d["kind"] == "Service" and d["metadata"]["name"] == "kernelgym-runners")
    args[at] = "tcp://kernelgym-runners:5556"
    del service["spec"]["publishNotReadyAddresses"]
    assert any("publishNotReadyAddresses" in p for p in check(docs))


# ---- the command lines, run ------------------------------------------------------------------------

# What each Secret and ConfigMap the manifests mount holds (docs/deploy.md says how to make them):
# key pairs from `kernelgym keys generate`, by file name.
KEY_VOLUMES = {
    "kernelgym-server-key": ["server.key", "server.pub"],
    "kernelgym-probe-key": ["probe.key"],
    "kernelgym-runner-key": ["runner.key", "server.pub"],
    "kernelgym-allow-clients": ["probe.pub"],
    "kernelgym-allow-runners": ["runner.pub"],
}


@dataclass
class Pod:
    """One container of a manifest, laid out under ``root``: each mounted volume a folder at
    root + its mountPath, the Secrets and ConfigMaps filled with keys, paths in args, probes and
    env moved under root."""

    container: dict[str, Any]
    root: Path
    keys: Path
    volumes: dict[str, str] = field(default_factory=dict)  # volume name -> Secret / ConfigMap name

    def __post_init__(self) -> None:
        for m in self.container.get("volumeMounts", []):
            folder = self.path(m["mountPath"])
            folder.mkdir(parents=True, exist_ok=True)
            for name in KEY_VOLUMES.get(self.volumes.get(m["name"], ""), []):
                shutil.copy(self.keys / name, folder / name)

    def path(self, value: str) -> Path:
        return self.root / value.lstrip("/")

    def argv(self, command: list[str], *replacements: tuple[str, str]) -> list[str]:
        out = [str(server_binary())]
        for arg in command[1:]:
            out.append(str(self.path(arg)) if arg.startswith("/") else arg)
        for flag, value in replacements:
            out[out.index(flag) + 1] = value
        return out

    def env(self) -> dict[str, str]:
        env = dict(os.environ)
        for e in self.container.get("env", []):
            env[e["name"]] = str(self.path(e["value"])) if e["value"].startswith("/") else e["value"]
        return env

    def probe(self, kind: str, *replacements: tuple[str, str]) -> subprocess.CompletedProcess[str]:
        argv = self.argv(self.container[kind]["exec"]["command"], *replacements)
        return subprocess.run(argv, capture_output=True, text=True, timeout=60, env=self.env())


def _pod(docs: list[dict[str, Any]], name: str, root: Path, keys: Path) -> Pod:
    spec = next(d for d in docs if d["kind"] == "Deployment" and d["metadata"]["name"] == name)["spec"]["template"]["spec"]
    volumes = {v["name"]: (v.get("secret", {}).get("secretName") or v.get("configMap", {}).get("name") or "")
               for v in spec.get("volumes", [])}  # fmt: skip
    return Pod(spec["containers"][0], root / name, keys, volumes)


def test_the_manifests_commands_and_probes_run(tmp_path: Path):
    """The server's and the cpu runner's command lines, with the manifests' keys, mounts and env
    (each pod's paths moved under a folder here, the bind and connect addresses to loopback),
    start and serve over CURVE, and their probes say so: the server is live at once and ready once
    the runner joined; the runner's probes pass once it heard from the server."""
    keys = tmp_path / "keys"
    for name in ("server", "runner", "probe"):
        subprocess.run([str(server_binary()), "keys", "generate", "--out", str(keys / name)], check=True,
                       capture_output=True, timeout=30)  # fmt: skip
    docs = load_manifests()
    server = _pod(docs, "kernelgym-server", tmp_path, keys)
    runner = _pod(docs, "kernelgym-runner-cpu", tmp_path, keys)
    endpoints = tmp_path / "endpoints.json"
    argv = server.argv(["kernelgym", *server.container["args"]], ("--bind", "tcp://127.0.0.1:*"),
                       ("--runner-bind", "tcp://127.0.0.1:*"))  # fmt: skip
    log = open(tmp_path / "pods.log", "ab")
    processes = [subprocess.Popen([*argv, "--endpoint-file", str(endpoints)], stdout=log, stderr=log, env=server.env())]
    try:
        deadline = time.monotonic() + 60
        while not endpoints.exists():
            assert processes[0].poll() is None and time.monotonic() < deadline, (tmp_path / "pods.log").read_text()
            time.sleep(0.02)
        ends = json.loads(endpoints.read_text())
        connect = ("--connect", ends["clients"])
        live = server.probe("livenessProbe", connect)
        assert live.returncode == 0, live.stdout + live.stderr
        ready = server.probe("readinessProbe", connect)
        assert ready.returncode == 1 and "no runner for backend 'cpu'" in ready.stdout, ready.stdout + ready.stderr
        # Without the probe's key the server is not even asked: CURVE is on.
        plain = subprocess.run([str(server_binary()), "health", "--connect", ends["clients"], "--timeout-s", "2"],
                               capture_output=True, text=True, timeout=60,
                               env={k: v for k, v in os.environ.items() if not k.startswith("KERNELGYM_")})  # fmt: skip
        assert plain.returncode == 1, plain.stdout

        runner_argv = runner.argv(["kernelgym", *runner.container["args"]], ("--connect", ends["runners"]))
        processes.append(subprocess.Popen(runner_argv, stdout=log, stderr=log, env=runner.env()))
        deadline = time.monotonic() + 60
        while (ready := server.probe("readinessProbe", connect)).returncode != 0:  # the runner joins
            assert processes[1].poll() is None and time.monotonic() < deadline, ready.stdout
            time.sleep(0.1)
        assert ready.stdout.startswith("ok: ") and "cpu=1" in ready.stdout, ready.stdout
        for kind in ("startupProbe", "livenessProbe", "readinessProbe"):
            deadline = time.monotonic() + 30
            while (probe := runner.probe(kind)).returncode != 0:
                assert time.monotonic() < deadline, f"{kind}: {probe.stdout}"
                time.sleep(0.1)
            assert probe.stdout.startswith("ok: "), probe.stdout
    finally:
        for p in reversed(processes):
            p.terminate()
        for p in reversed(processes):
            try:
                assert p.wait(90) == 0, (tmp_path / "pods.log").read_text()
            except subprocess.TimeoutExpired:
                p.kill()
        log.close()
