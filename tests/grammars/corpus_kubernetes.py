"""Hand-written Kubernetes-style schemas: OpenAPI v2/v3 shapes with vendor extensions, as kubectl and CRDs send them.

They carry what real Kubernetes schemas carry: `x-kubernetes-*` extensions, OpenAPI's `nullable`,
`format: int32`/`int64`/`int-or-string`, draft-04 `$schema` and `id`, `definitions` with `$ref`s.
All of them must be accepted by the default library. `bounded` ones finish quickly from any model.
"""

from __future__ import annotations

from typing import Any

_GVK = "x-kubernetes-group-version-kind"


def _name() -> dict[str, Any]:
    return {"type": "string", "maxLength": 20, "pattern": "^[a-z0-9]([-a-z0-9]*[a-z0-9])?$",
            "description": "DNS-1123 label.", "x-kubernetes-validations": [{"rule": "self.size() <= 63"}]}


CONFIG_MAP = {
    "$schema": "http://json-schema.org/draft-04/schema#",
    "id": "https://kubernetes.example/configmap.json",
    "description": "ConfigMap holds configuration data for pods to consume.",
    _GVK: [{"group": "", "kind": "ConfigMap", "version": "v1"}],
    "type": "object",
    "required": ["apiVersion", "kind", "metadata"],
    "properties": {
        "apiVersion": {"type": "string", "enum": ["v1"]},
        "kind": {"type": "string", "enum": ["ConfigMap"]},
        "metadata": {"$ref": "#/definitions/io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"},
        "immutable": {"type": "boolean", "x-kubernetes-immutable": True},
    },
    "additionalProperties": False,
    "definitions": {
        "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta": {
            "type": "object",
            "properties": {"name": _name(), "namespace": _name()},
            "required": ["name"],
            "additionalProperties": False,
            "x-kubernetes-map-type": "atomic",
        },
    },
}

DEPLOYMENT_SCALE = {
    "$schema": "http://json-schema.org/draft-04/schema#",
    _GVK: [{"group": "apps", "kind": "Deployment", "version": "v1"}],
    "type": "object",
    "required": ["replicas", "strategy"],
    "properties": {
        "replicas": {"type": "integer", "format": "int32", "minimum": 0, "maximum": 10, "default": 1},
        "paused": {"type": "boolean", "nullable": True},
        "strategy": {
            "type": "object",
            "properties": {"type": {"type": "string", "enum": ["Recreate", "RollingUpdate"],
                                    "x-kubernetes-enum-descriptions": {"Recreate": "kill all first"}},
                           "maxSurge": {"type": "integer", "format": "int-or-string", "minimum": 0, "maximum": 5,
                                        "x-kubernetes-int-or-string": True}},
            "required": ["type"],
            "additionalProperties": False,
        },
    },
    "additionalProperties": False,
}

SERVICE_PORTS = {
    "$schema": "http://json-schema.org/draft-07/schema#",
    _GVK: [{"group": "", "kind": "Service", "version": "v1"}],
    "type": "object",
    "properties": {
        "ports": {
            "type": "array", "maxItems": 2, "x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["port"],
            "x-kubernetes-patch-merge-key": "port", "x-kubernetes-patch-strategy": "merge",
            "items": {"type": "object", "additionalProperties": False, "required": ["port", "protocol"],
                      "properties": {"port": {"type": "integer", "format": "int32", "minimum": 1, "maximum": 65535},
                                     "protocol": {"type": "string", "enum": ["TCP", "UDP", "SCTP"],
                                                  "default": "TCP"}}},
        },
        "type": {"type": "string", "enum": ["ClusterIP", "NodePort", "LoadBalancer"]},
    },
    "required": ["ports", "type"],
    "additionalProperties": False,
}

# A CRD's openAPIV3Schema: no $schema (2020-12), objects without additionalProperties, unbounded fields.
CRD_SPEC = {
    "type": "object",
    "x-kubernetes-preserve-unknown-fields": False,
    "properties": {
        "spec": {
            "type": "object",
            "required": ["image"],
            "properties": {
                "image": {"type": "string", "description": "Container image.", "example": "nginx:1.25"},
                "replicas": {"type": "integer", "format": "int64"},
                "cpu": {"type": "number", "format": "double", "x-kubernetes-int-or-string": True},
                "args": {"type": "array", "items": {"type": "string"}, "x-kubernetes-list-type": "atomic"},
                "mode": {"type": "string", "enum": ["fast", "safe"], "x-kubernetes-validations": []},
            },
        },
    },
    "required": ["spec"],
}

KUBERNETES: dict[str, tuple[dict[str, Any], bool]] = {  # name -> (schema, bounded)
    "k8s-configmap": (CONFIG_MAP, True),
    "k8s-deployment-scale": (DEPLOYMENT_SCALE, True),
    "k8s-service-ports": (SERVICE_PORTS, True),
    "k8s-crd-spec": (CRD_SPEC, False),
}
