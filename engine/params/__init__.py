"""Request parameters: one table of sampling parameters and one builder for them and for the output
constraint, called by every face (gateway/openai, gateway/kserve, gateway/grpc through the tensor contract)."""
from conch.engine.params.constraint import OutputConstraint, build_constraint, constraint_fields
from conch.engine.params.sampling import build_sampling, checked_sampling
from conch.engine.params.table import PARAMS, TENSOR_NAMES, Param

__all__ = ["PARAMS", "TENSOR_NAMES", "OutputConstraint", "Param", "build_constraint", "build_sampling",
           "checked_sampling", "constraint_fields"]
