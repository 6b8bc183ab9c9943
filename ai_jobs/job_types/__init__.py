"""The job types: one declaration each (a module of this package, or anywhere else
that calls ``register``), in the registry that every other part reads. How to add
one: ``ai_jobs/JOB_TYPES.md``."""

from ai_jobs.job_types import (
    flashcard_generation,
    learning_state_analysis,
    next_action_planning,
    quiz_generation,
    weak_point_analysis,
)
from ai_jobs.job_types.registry import (
    CountParam,
    JobType,
    all_types,
    choices,
    count_params,
    get,
    names,
    output_lists,
    output_models,
    register,
)

__all__ = [
    "CountParam",
    "JobType",
    "all_types",
    "choices",
    "count_params",
    "get",
    "names",
    "output_lists",
    "output_models",
    "register",
]

for _module in (
    learning_state_analysis,
    weak_point_analysis,
    next_action_planning,
    quiz_generation,
    flashcard_generation,
):
    register(_module.JOB_TYPE)
