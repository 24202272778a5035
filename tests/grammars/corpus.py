"""The real-world schema corpus, and the survey behind its figures in docs/structured-outputs.md.

    .venv/bin/python -m tests.grammars.corpus [library ...]

The corpus: every SchemaStore schema that the registry package `check-jsonschema` vendors (GitHub
workflows, Dependabot, Renovate, Azure Pipelines, ...; a dev dependency), plus the hand-written
Kubernetes-style schemas of corpus_kubernetes.py. For each library and schema the survey runs
`validate` (a refusal is listed with its reason), compiles, and drives seeded random walks (a model
that picks any allowed token); a walk that finishes must validate with jsonschema under the
schema's own dialect. It prints markdown: the table per library, then every refusal.
"""

from __future__ import annotations

import importlib.resources
import json
import sys
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from conch.grammars import GrammarError, JsonSchema, available_libraries, validate

from .checking import validate_output
from .conftest import load_compiler, load_info
from .corpus_kubernetes import KUBERNETES
from .drive import random_walk

SEEDS = (0, 1)
WALK_STEPS = 300


@dataclass(frozen=True)
class CorpusSchema:
    name: str
    schema: dict[str, Any]
    source: str
    bounded: bool = False


@dataclass(frozen=True)
class Outcome:
    refusal: GrammarError | None
    finished: int = 0  # random walks that ended (each validated)


@lru_cache(maxsize=1)
def corpus() -> tuple[CorpusSchema, ...]:
    vendor = importlib.resources.files("check_jsonschema.builtin_schemas.vendor")
    found = [CorpusSchema(path.name.removesuffix(".json"), json.loads(path.read_text()), "SchemaStore")
             for path in sorted(vendor.iterdir(), key=lambda p: p.name) if path.name.endswith(".json")]
    found += [CorpusSchema(name, schema, "hand-written", bounded) for name, (schema, bounded) in KUBERNETES.items()]
    return tuple(found)


def survey(library: str, case: CorpusSchema) -> Outcome:
    """validate, compile and walk one schema; raises if an output that finished is invalid."""
    spec = JsonSchema.from_dict(case.schema)
    try:
        validate(spec, library)
    except GrammarError as exc:
        return Outcome(exc)
    grammar = load_compiler(library).compile(spec)
    finished = 0
    for seed in SEEDS:
        walk = random_walk(grammar, load_info(), seed, WALK_STEPS)
        if walk.finished:
            validate_output(case.schema, walk.text)
            finished += 1
    return Outcome(None, finished)


def main(libraries: list[str]) -> None:
    libraries = libraries or list(available_libraries())
    outcomes = {(lib, case.name): survey(lib, case) for lib in libraries for case in corpus()}
    total = len(corpus())
    print(f"| library | compile | refused | random walks finished (valid) of {len(SEEDS)} per schema |")
    print("| --- | --- | --- | --- |")
    for lib in libraries:
        mine = [outcomes[lib, case.name] for case in corpus()]
        accepted = [o for o in mine if o.refusal is None]
        walks = sum(o.finished for o in accepted)
        print(f"| {lib} | {len(accepted)} / {total} | {total - len(accepted)} | "
              f"{walks} / {len(SEEDS) * len(accepted)} |")
    print()
    print("| schema | " + " | ".join(libraries) + " |")
    print("| --- | " + " | ".join("---" for _ in libraries) + " |")
    for case in corpus():
        cells = [_cell(outcomes[lib, case.name]) for lib in libraries]
        print(f"| {case.name} ({case.source}) | " + " | ".join(cells) + " |")


def _cell(outcome: Outcome) -> str:
    if outcome.refusal is None:
        return f"compiles, {outcome.finished}/{len(SEEDS)} walks valid"
    return outcome.refusal.message.replace("|", "\\|").replace("\n", " ")


if __name__ == "__main__":
    main(sys.argv[1:])
