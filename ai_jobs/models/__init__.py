"""The job and what hangs off it (``jobs``), what results become (``outputs``), the
user's notices (``notifications``), and what operators watch (``operations``)."""

from ai_jobs.models.jobs import (
    ACTIVE_STATUSES,
    FINAL_STATUSES,
    AiInvocationLog,
    AiJobSnapshot,
    AiRuntimeJob,
    AiRuntimeResult,
    ApiKeyMode,
    JobStatus,
    TargetType,
)
from ai_jobs.models.notifications import Notification, NotificationKind
from ai_jobs.models.operations import BulkOperation, BulkOperationKind, JobTypePause, QueueSample, RuntimeInstance
from ai_jobs.models.outputs import (
    ActionType,
    AiLearningAnalysis,
    CandidateStatus,
    Difficulty,
    Flashcard,
    FlashcardCandidate,
    Level,
    NextActionRecommendation,
    QuestionType,
    QuizQuestion,
    QuizQuestionCandidate,
    Severity,
    WeakPointCandidate,
)

__all__ = [
    "ACTIVE_STATUSES",
    "FINAL_STATUSES",
    "ActionType",
    "AiInvocationLog",
    "AiJobSnapshot",
    "AiLearningAnalysis",
    "AiRuntimeJob",
    "AiRuntimeResult",
    "ApiKeyMode",
    "BulkOperation",
    "BulkOperationKind",
    "CandidateStatus",
    "Difficulty",
    "Flashcard",
    "FlashcardCandidate",
    "JobStatus",
    "JobTypePause",
    "Level",
    "NextActionRecommendation",
    "Notification",
    "NotificationKind",
    "QuestionType",
    "QueueSample",
    "QuizQuestion",
    "QuizQuestionCandidate",
    "RuntimeInstance",
    "Severity",
    "TargetType",
    "WeakPointCandidate",
]
