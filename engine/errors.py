"""Engine errors. The gateway maps each class to a status code; the engine knows none."""
from __future__ import annotations


class EngineError(Exception):
    """Base class. `param` names the offending request field, where there is one; `code` is a machine-readable
    reason finer than the class (OpenAI's `code`: "invalid_schema"...), where one helps."""

    def __init__(self, message: str, param: str | None = None, code: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.param = param
        self.code = code


class InvalidRequest(EngineError):
    """The request cannot be served as asked (bad parameter, prompt too long...)."""


class ContextLengthExceeded(InvalidRequest):
    """The prompt, or the prompt with max_tokens, does not fit the model's context."""


class ModelNotFound(EngineError):
    """No such model or version in the repository."""


class ModelNotReady(EngineError):
    """The model exists but is loading, unloading or failed to load."""


class Overloaded(EngineError):
    """Admission refused: the model's queue is full. `retry_after` in seconds."""

    def __init__(self, message: str, retry_after: float = 1.0) -> None:
        super().__init__(message)
        self.retry_after = retry_after


class InferenceError(EngineError):
    """A model failed while running a request (the request was valid)."""


class BackendUnavailable(EngineError):
    """A backend named by a config is not installed or failed to start."""


class ModelCodeFailed(BackendUnavailable):
    """A model's own code or files failed at load (a python model that does not import or initialize): the
    model's fault, not the server's; a load asked for over /v2 answers 400, as Triton's."""


class UpstreamError(EngineError):
    """An upstream server (the openai backend) failed: a 5xx, a refused or broken connection, a bad answer."""


class UpstreamTimeout(UpstreamError):
    """An upstream server did not answer in time."""


class UpstreamRateLimited(Overloaded):
    """An upstream server refused with 429; `retry_after` is its Retry-After."""
