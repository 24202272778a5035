"""Model aliases: names a client asks for that a served model answers, such as Claude Code's `claude-haiku-*`
background calls. Rules come from `conch serve --model-alias 'PATTERN=MODEL'` (repeatable; PATTERN is a glob,
`fnmatch`'s, matched case-sensitively); the first rule whose pattern matches wins, and a name no rule matches
is itself. /v1/models lists only real models: an alias is a way to ask, not a model."""
from __future__ import annotations

from dataclasses import dataclass
from fnmatch import fnmatchcase

from starlette.requests import HTTPConnection


@dataclass(frozen=True)
class ModelAliases:
    rules: tuple[tuple[str, str], ...] = ()     # (glob pattern, served model), in the order given

    @classmethod
    def parse(cls, specs: list[str]) -> "ModelAliases":
        """`specs` as the CLI takes them ('claude-*=smollm2-135m-instruct'); ValueError naming a bad one."""
        rules = []
        for spec in specs:
            pattern, sep, model = spec.partition("=")
            if not sep or not pattern.strip() or not model.strip():
                raise ValueError(f"a model alias is PATTERN=MODEL, not {spec!r}")
            rules.append((pattern.strip(), model.strip()))
        return cls(tuple(rules))

    def resolve(self, name: str) -> str:
        for pattern, model in self.rules:
            if fnmatchcase(name, pattern):
                return model
        return name


def resolve_model(request: HTTPConnection, name: str) -> str:
    """`name` as the served model it stands for on this server (itself when no alias matches)."""
    conch = getattr(request.app.state, "conch", None)
    aliases = getattr(getattr(conch, "settings", None), "aliases", None)
    return aliases.resolve(name) if aliases is not None else name
