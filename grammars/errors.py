"""The one error `grammars` raises for a spec it cannot honour."""

from __future__ import annotations


class GrammarError(ValueError):
    """A spec that Conch cannot turn into a grammar, or cannot enforce exactly.

    `message` is safe to show to the user (the gateway answers 400 with it); `keyword` names the
    JSON Schema keyword at fault, where there is one (`"patternProperties"`, `"format"`, `"$ref"`).
    """

    def __init__(self, message: str, keyword: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.keyword = keyword

    def __reduce__(self):  # keeps `keyword` across pickling (process pools, Ray)
        return (type(self), (self.message, self.keyword))
