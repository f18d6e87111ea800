#!/usr/bin/env python3
"""Validates the Kubernetes and KServe manifests in deploy/ offline, against the API schemas of a Kubernetes release.

  .venv/bin/python deploy/validate_manifests.py          # every manifest in deploy/kubernetes and deploy/kserve
  .venv/bin/python deploy/validate_manifests.py --kubernetes-version 1.30.0 FILE...

Built-in kinds (Deployment, Service, ConfigMap, HorizontalPodAutoscaler, ...) are checked against the OpenAPI schemas
of the Kubernetes release that the kubernetes-validate package ships (its strict variant: an unknown field is an
error, as `kubectl apply --validate=strict` makes it). KServe's InferenceService and ServingRuntime are checked
against a schema derived from KServe's Python SDK (its generated API models, kserve/models/*.py, read as source, not
imported), with every embedded Kubernetes type (Container, Probe, ResourceRequirements, Volume, ObjectMeta, ...)
checked against the same Kubernetes schemas. Kinds with no schema package (the Prometheus Operator's ServiceMonitor,
kustomize's Kustomization) are listed as unchecked with the reason.

Prints one line per document: `ok`, `INVALID` (one line per error, with the field's path) or `unchecked`; exits 1 when
any document is invalid, 2 when the schemas cannot be found.
"""

import argparse
import ast
import pathlib
import re
import sys

import yaml

DEPLOY_DIR = pathlib.Path(__file__).resolve().parent
REPO_ROOT = DEPLOY_DIR.parent
DEFAULT_KSERVE_SDK = pathlib.Path(sys.prefix) / "kserve-sdk"  # the virtualenv running this script (tools/setup.sh)
KSERVE_GROUP = "serving.kserve.io"
# Kinds no PyPI or Debian package carries a schema for: what is checked instead.
UNCHECKED_KINDS = {
    "ServiceMonitor": "no schema package for the Prometheus Operator's CRDs (its fields are covered by "
                      "tests/python/test_deploy_files.py)",
    "Kustomization": "kustomize's file, not an API object (tests/python/test_deploy_files.py checks that it lists "
                     "every manifest)",
}
DEFINITIONS_URI = "/api/_definitions.json"
# Types KServe's SDK names without generating a model for them, and the Kubernetes definition each stands for.
KSERVE_SDK_ALIASES = {
    "V1beta1MetricQuantity": "io.k8s.apimachinery.pkg.api.resource.Quantity",  # a quantity: "500m", 2, "1Gi"
    "ResourceQuantity": "io.k8s.apimachinery.pkg.api.resource.Quantity",
}


def manifests_in_deploy():
    return sorted(list((DEPLOY_DIR / "kubernetes").glob("*.yaml")) + list((DEPLOY_DIR / "kserve").glob("*.yaml")))


class KubernetesSchemas:
    """The strict JSON schemas of one Kubernetes release, as kubernetes-validate ships them."""

    def __init__(self, version):
        from kubernetes_validate import utils

        self._utils = utils
        wanted = version.lstrip("v")
        versions = [v for v in utils.all_versions() if utils.major_minor(v) <= utils.major_minor(wanted)]
        if not versions:
            raise LookupError(f"kubernetes-validate has no schemas for Kubernetes {version} "
                              f"(it has {utils.all_versions()[0]} to {utils.latest_version()})")
        self.version = versions[-1]
        self._dir = f"kubernetes-json-schema/v{self.version}-local-strict"
        self.definitions = utils.schema_contents(f"{self._dir}/_definitions.json", self.version)

    def for_kind(self, kind, api_version):
        group_version = re.sub(r"^([^./]*)(?:\.[^/]*)?/", r"\1-", api_version)
        try:
            return self._utils.schema_contents(f"{self._dir}/{kind.lower()}-{group_version}.json", self.version)
        except FileNotFoundError:
            return None

    def definition_for_client_type(self, type_name):
        """The definition of a Kubernetes Python client type name (V1Container -> io.k8s.api.core.v1.Container)."""
        if type_name.startswith("K8sIo"):  # K8sIoApiAutoscalingV2Foo -> io.k8s.api.autoscaling.v2.Foo
            for key in self.definitions["$defs"]:
                parts = key.split(".")
                if parts[:2] == ["io", "k8s"] and "".join(p[:1].upper() + p[1:] for p in ["k8s", "io"] + parts[2:]) == type_name:
                    return key
            return None
        match = re.fullmatch(r"V(\d+)((?:alpha|beta)\d+)?([A-Z]\w*)", type_name)
        if not match:
            return None
        suffix = f".v{match.group(1)}{match.group(2) or ''}.{match.group(3)}"
        candidates = [k for k in self.definitions["$defs"] if k.endswith(suffix)]
        for preferred in ("io.k8s.api.core.", "io.k8s.apimachinery.", "io.k8s.api."):
            for candidate in candidates:
                if candidate.startswith(preferred):
                    return candidate
        return candidates[0] if candidates else None

    def validator(self, schema):
        import jsonschema
        import referencing
        import referencing.jsonschema

        registry = referencing.Registry().with_resources([
            ("https://kubernetes.io" + DEFINITIONS_URI,
             referencing.Resource.from_contents(self.definitions, default_specification=referencing.jsonschema.DRAFT202012)),
        ])
        return jsonschema.validators.Draft202012Validator(schema, registry=registry)


class KServeSchemas:
    """JSON schemas for KServe's kinds, derived from the SDK's generated models (openapi_types + attribute_map)."""

    def __init__(self, sdk_dir, kubernetes):
        models_dir = pathlib.Path(sdk_dir) / "kserve" / "models"
        if not models_dir.is_dir():
            raise LookupError(f"KServe's SDK is not at {sdk_dir} (tools/setup.sh installs it there)")
        self._kubernetes = kubernetes
        self.unresolved = set()  # SDK type names no schema here describes
        self._models = {}  # class name -> {json field: type string}
        for source in models_dir.glob("*.py"):
            self._read_models(source)
        version_file = pathlib.Path(sdk_dir).glob("kserve-*.dist-info")
        self.sdk_version = next((p.name[len("kserve-"):-len(".dist-info")] for p in version_file), "unknown")

    def _read_models(self, source):
        for node in ast.parse(source.read_text()).body:
            if not isinstance(node, ast.ClassDef):
                continue
            tables = {}
            for statement in node.body:
                if (isinstance(statement, ast.Assign) and len(statement.targets) == 1
                        and isinstance(statement.targets[0], ast.Name)
                        and statement.targets[0].id in ("openapi_types", "attribute_map")):
                    tables[statement.targets[0].id] = ast.literal_eval(statement.value)
            if len(tables) == 2:
                self._models[node.name] = {tables["attribute_map"][field]: type_name
                                           for field, type_name in tables["openapi_types"].items()}

    def schema_for_kind(self, kind, api_version):
        version = api_version.split("/")[-1]
        root = f"V{version[1:]}{kind}" if version.startswith("v") else None  # serving.kserve.io/v1beta1 -> V1beta1...
        if root not in self._models:
            return None
        defs = {}
        self._add_model(root, defs)
        return {"$schema": "https://json-schema.org/draft/2020-12/schema",
                "$id": f"https://kubernetes.io/api/kserve-{kind.lower()}.json",
                "$defs": defs, "$ref": f"#/$defs/{root}"}

    def _add_model(self, name, defs):
        if name in defs:
            return
        defs[name] = {}  # placeholder first: models refer to themselves
        properties = {field: self._type_schema(type_name, defs) for field, type_name in self._models[name].items()}
        defs[name] = {"type": "object", "properties": properties, "additionalProperties": False}

    def _type_schema(self, type_name, defs):
        type_name = type_name.strip()
        primitive = {"str": {"type": "string"}, "int": {"type": "integer"}, "bool": {"type": "boolean"},
                     "float": {"type": "number"}, "object": {}, "datetime": {"type": "string"},
                     "date": {"type": "string"}}
        if type_name in primitive:
            return primitive[type_name]
        match = re.fullmatch(r"list\[(.*)\]", type_name)
        if match:
            return {"type": "array", "items": self._type_schema(match.group(1), defs)}
        match = re.fullmatch(r"dict\(str,\s*(.*)\)", type_name)
        if match:
            return {"type": "object", "additionalProperties": self._type_schema(match.group(1), defs)}
        if type_name in self._models:
            self._add_model(type_name, defs)
            return {"$ref": f"#/$defs/{type_name}"}
        definition = KSERVE_SDK_ALIASES.get(type_name) or self._kubernetes.definition_for_client_type(type_name)
        if definition is None:
            # Another project's type (Knative's TrafficTarget, KEDA's ScaleTriggers: status and KEDA-only fields):
            # taken as any value, and listed.
            self.unresolved.add(type_name)
            return {}
        return {"$ref": f"{DEFINITIONS_URI}#/$defs/{definition}"}


def error_path(error):
    return ".".join(str(part) for part in error.absolute_path) or "(document)"


def validate_document(document, kubernetes, kserve):
    """('ok' | 'invalid' | 'unchecked', [messages], schema description) for one YAML document."""
    kind, api_version = document.get("kind"), document.get("apiVersion")
    if not kind or not api_version:
        return "invalid", ["(document): has no kind or apiVersion"], ""
    if kind in UNCHECKED_KINDS:
        return "unchecked", [UNCHECKED_KINDS[kind]], ""
    if api_version.split("/")[0] == KSERVE_GROUP:
        schema = kserve.schema_for_kind(kind, api_version)
        source = f"KServe SDK {kserve.sdk_version} + Kubernetes {kubernetes.version}"
    else:
        schema = kubernetes.for_kind(kind, api_version)
        source = f"Kubernetes {kubernetes.version}"
    if schema is None:
        return "invalid", [f"(document): no schema for kind {kind} of apiVersion {api_version} in {source}"], source
    errors = sorted(kubernetes.validator(schema).iter_errors(document), key=lambda e: list(map(str, e.absolute_path)))
    messages = [f"{error_path(e)}: {e.message}" for e in errors]
    return ("invalid" if messages else "ok"), messages, source


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("files", nargs="*", type=pathlib.Path, help="manifests (default: deploy/kubernetes, deploy/kserve)")
    parser.add_argument("--kubernetes-version", default="1.37.0", help="the release whose API schemas to use")
    parser.add_argument("--kserve-sdk", default=str(DEFAULT_KSERVE_SDK),
                        help="folder holding KServe's Python SDK (pip install --no-deps --target)")
    args = parser.parse_args(argv)
    try:
        kubernetes = KubernetesSchemas(args.kubernetes_version)
        kserve = KServeSchemas(args.kserve_sdk, kubernetes)
    except (ImportError, LookupError) as error:
        print(f"validate_manifests: {error}", file=sys.stderr)
        return 2
    invalid = 0
    for path in args.files or manifests_in_deploy():
        for index, document in enumerate(yaml.safe_load_all(path.read_text())):
            if document is None:
                continue
            name = (document.get("metadata") or {}).get("name", f"#{index}")
            where = f"{path.relative_to(REPO_ROOT) if path.is_relative_to(REPO_ROOT) else path} " \
                    f"{document.get('kind')}/{name}"
            try:
                outcome, messages, source = validate_document(document, kubernetes, kserve)
            except LookupError as error:
                print(f"validate_manifests: {where}: {error}", file=sys.stderr)
                return 2
            if outcome == "ok":
                print(f"ok         {where} ({source})")
            elif outcome == "unchecked":
                print(f"unchecked  {where}: {messages[0]}")
            else:
                invalid += 1
                for message in messages:
                    print(f"INVALID    {where}: {message}")
    if kserve.unresolved:
        print(f"note: fields of these KServe SDK types are not checked (no schema here): {', '.join(sorted(kserve.unresolved))}")
    return 1 if invalid else 0


if __name__ == "__main__":
    sys.exit(main())
