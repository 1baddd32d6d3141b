"""tools/deploy_check.py: every overlay renders and validates, the committed rendering is current,
and the check catches what it is for."""

import importlib.util
import shutil
from pathlib import Path

import pytest

pytestmark = pytest.mark.unit

ROOT = Path(__file__).resolve().parents[3]
spec = importlib.util.spec_from_file_location("deploy_check", ROOT / "tools" / "deploy_check.py")
deploy_check = importlib.util.module_from_spec(spec)
spec.loader.exec_module(deploy_check)

if shutil.which("kubectl") is None:
    pytest.fail("kubectl (with kustomize) is needed: `make deploy-check` installs it", pytrace=False)


@pytest.fixture(scope="module")
def schema():
    return deploy_check.load_raycluster_schema()


@pytest.mark.parametrize("overlay", deploy_check.OVERLAYS)
def test_each_overlay_renders_and_validates(overlay, schema):
    manifests = deploy_check.render(deploy_check.DEPLOY / "overlays" / overlay)
    assert deploy_check.errors_of(manifests, schema) == []
    kinds = {line.split(":", 1)[1].strip() for line in manifests.splitlines() if line.startswith("kind:")}
    assert {"Deployment", "RayCluster", "NetworkPolicy", "PodDisruptionBudget"} <= kinds
    assert "HorizontalPodAutoscaler" in kinds and "Service" in kinds


def test_the_committed_dev_rendering_is_current():
    current = deploy_check.render(deploy_check.DEPLOY / "overlays" / "dev")
    assert deploy_check.RENDERED.read_text() == deploy_check.RENDERED_HEADER + current, (
        "deploy/rendered/dev.yaml is stale: run python tools/deploy_check.py --write-rendered"
    )


def test_the_models_sidecar_is_a_native_sidecar_with_grpc_probes_in_dev():
    import yaml

    documents = list(yaml.safe_load_all(deploy_check.RENDERED.read_text()))
    deployment = next(d for d in documents if d["kind"] == "Deployment")
    (sidecar,) = deployment["spec"]["template"]["spec"]["initContainers"]
    assert sidecar["restartPolicy"] == "Always"
    assert sidecar["readinessProbe"]["grpc"]["port"] == 50052


def test_the_dev_strategy_workers_read_the_store_on_the_orchestrators_pvc():
    """In dev the store is <data dir>/lancedb on a PVC, and the workers open it at that path."""
    import yaml

    documents = list(yaml.safe_load_all(deploy_check.RENDERED.read_text()))
    (config,) = [d for d in documents if d["metadata"]["name"] == "sounding-config"]
    assert config["data"]["SOUNDING_STORE__URI"] == ""
    ray = next(d for d in documents if d["kind"] == "RayCluster")
    pod = ray["spec"]["workerGroupSpecs"][0]["template"]["spec"]
    (volume,) = [v for v in pod["volumes"] if "persistentVolumeClaim" in v]
    assert volume["persistentVolumeClaim"]["claimName"] == "sounding-data"
    (mount,) = [m for m in pod["containers"][0]["volumeMounts"] if m["name"] == volume["name"]]
    assert mount["mountPath"] == config["data"]["SOUNDING_DATA_DIR"]
    terms = pod["affinity"]["podAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
    assert terms[0]["labelSelector"]["matchLabels"]["app.kubernetes.io/component"] == "orchestrator"


def test_the_images_have_the_projects_python_and_ray():
    import re
    import tomllib

    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert project["requires-python"] == ">=3.11"  # the images run the lowest supported Python
    constraints = (ROOT / "constraints.txt").read_text().splitlines()
    (ray_version,) = [line.split("==")[1] for line in constraints if line.startswith("ray==")]
    docker = deploy_check.DEPLOY / "docker"
    for name in ("Dockerfile", "Dockerfile.cuda"):
        assert re.search(r"^FROM python:3\.11-", (docker / name).read_text(), re.MULTILINE), name
        assert 'pip install -c constraints.txt ".[models,workers]"' in (docker / name).read_text(), name
    raycluster = (deploy_check.DEPLOY / "base" / "raycluster.yaml").read_text()
    assert f'rayVersion: "{ray_version}"' in raycluster


INVALID = """
apiVersion: apps/v1
kind: Deployment
metadata: {name: typo}
spec:
  selector: {}
  template: {spec: {containers: [{name: c, image: i, imagePullPolicyy: Always}]}}
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: wrong-type}
spec: {replicas: two, selector: {}, template: {}}
---
apiVersion: ray.io/v1
kind: RayCluster
metadata: {name: unknown-field}
spec:
  headGroupSpec: {rayStartParams: {}, template: {spec: {containers: [{name: h, image: i, bogus: 1}]}}}
---
apiVersion: ray.io/v1
kind: RayCluster
metadata: {name: wrong-type}
spec:
  headGroupSpec: {rayStartParams: {}, template: {spec: {containers: [{name: h, image: i}]}}}
  workerGroupSpecs: [{groupName: g, replicas: two, minReplicas: 1, maxReplicas: 2, rayStartParams: {},
                      template: {spec: {containers: [{name: w, image: i}]}}}]
---
apiVersion: example.com/v1
kind: Gadget
metadata: {name: unknown-kind}
"""


def test_the_check_reports_every_invalid_object(schema):
    found = deploy_check.errors_of(INVALID, schema)
    assert [line.split(":")[0] for line in found] == [
        "Deployment/typo",
        "Deployment/wrong-type",
        "RayCluster/unknown-field",
        "RayCluster/wrong-type",
        "Gadget/unknown-kind",
    ]
    assert "imagePullPolicyy" in found[0] and "'two'" in found[1] and "bogus" in found[2]


def test_the_command_fails_on_a_stale_rendering_and_refreshes_it(tmp_path, monkeypatch, capsys):
    rendered = tmp_path / "dev.yaml"
    rendered.write_text(deploy_check.RENDERED.read_text() + "# edited by hand\n")
    monkeypatch.setattr(deploy_check, "RENDERED", rendered)
    monkeypatch.setattr(deploy_check, "ROOT", tmp_path)
    assert deploy_check.main([]) == 1
    assert "dev.yaml is stale" in capsys.readouterr().out
    assert deploy_check.main(["--write-rendered"]) == 0
    assert deploy_check.main([]) == 0
    assert rendered.read_text() == deploy_check.RENDERED_HEADER + deploy_check.render(
        deploy_check.DEPLOY / "overlays" / "dev"
    )
