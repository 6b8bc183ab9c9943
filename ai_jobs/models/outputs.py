"""What a job's result becomes: its outputs.

Every output carries its user, the job that produced it and the job's target, so
the user API lists it newest first and filters it by ``targetType``/``targetId``/
``jobId`` from one index (the user's notices, ``ai_jobs.models.notifications``, too). Quiz and flashcard jobs first store their candidates as
the model wrote them, then publish them into the knowledge base: a published
question (card) stores its normalised stem (front) and a unique SHA-256 of it per
knowledge base, so the same question can never be published twice there, not
even by two results committing at once. (The digest, not the text, is unique:
a btree entry of 2,000 CJK characters would pass PostgreSQL's size limit.)
"""

from __future__ import annotations

from functools import partial

from django.conf import settings
from django.db import models
from django.utils import timezone

from ai_jobs.models.jobs import TargetType
from config.ids import new_id


def prefixed_id(prefix: str) -> models.CharField:
    return models.CharField(primary_key=True, max_length=40, default=partial(new_id, prefix), editable=False)


def _user() -> models.ForeignKey:
    return models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="+")


def _knowledge_point() -> models.ForeignKey:
    # Only ever one of the job's user's points; whatever else the model named is null.
    return models.ForeignKey(
        "learning.KnowledgePoint", null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )


def _knowledge_base(*, published: bool) -> models.ForeignKey:
    # A published question or card goes with its knowledge base; a candidate outlives it
    # (its status says what became of it).
    if published:
        return models.ForeignKey("learning.KnowledgeBase", on_delete=models.CASCADE, related_name="+")
    return models.ForeignKey(
        "learning.KnowledgeBase", null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )


def _position() -> models.PositiveIntegerField:
    return models.PositiveIntegerField(help_text="Index in the output")


def list_indexes(prefix: str) -> list[models.Index]:
    """The user API's reads: the user's newest first, optionally of one target."""
    return [
        models.Index(fields=["user", "-created_at", "-id"], name=f"{prefix}_user_created"),
        models.Index(fields=["user", "target_type", "target_id", "-created_at"], name=f"{prefix}_user_target"),
    ]


class Level(models.TextChoices):
    BEGINNER = "beginner"
    DEVELOPING = "developing"
    PROFICIENT = "proficient"
    ADVANCED = "advanced"


class Severity(models.TextChoices):
    LOW = "low"
    MEDIUM = "medium"
    HIGH = "high"


class ActionType(models.TextChoices):
    REVIEW = "review"
    PRACTICE = "practice"
    LEARN_NEW = "learn_new"
    QUIZ = "quiz"
    REST = "rest"


class QuestionType(models.TextChoices):
    SINGLE_CHOICE = "single_choice"
    MULTIPLE_CHOICE = "multiple_choice"
    TRUE_FALSE = "true_false"
    SHORT_ANSWER = "short_answer"


class Difficulty(models.TextChoices):
    EASY = "easy"
    MEDIUM = "medium"
    HARD = "hard"


class CandidateStatus(models.TextChoices):
    PUBLISHED = "published"  # became a new question/card of the knowledge base
    DUPLICATE = "duplicate"  # the knowledge base (or an earlier candidate of the output) had it
    NO_KNOWLEDGE_BASE = "no_knowledge_base"  # the job's knowledge base is gone: nothing to publish into


class JobLinked(models.Model):
    """A row of a job's user that names the job and its target. The job is named by
     its id as a plain value, not a foreign key: the row is the user's and outlives
     the job, which retention deletes ``AI_JOB_RETENTION_DAYS`` after it finished
    ; ``jobId`` still filters the user's lists."""

    user = _user()
    job_id = models.CharField(max_length=40, db_index=True)
    target_type = models.CharField(max_length=32, choices=TargetType.choices)
    target_id = models.CharField(max_length=64)
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        abstract = True


class AiLearningAnalysis(JobLinked):
    """``learning_state_analysis``: one per job."""

    id = prefixed_id("ana")
    summary = models.TextField()
    mastery_score = models.FloatField()
    level = models.CharField(max_length=16, choices=Level.choices)
    strengths = models.JSONField(default=list)
    weaknesses = models.JSONField(default=list)
    confidence = models.FloatField()

    class Meta:
        db_table = "ai_learning_analysis"
        verbose_name_plural = "AI learning analyses"
        indexes = list_indexes("ai_ana")
        constraints = [models.UniqueConstraint(fields=["job_id"], name="ai_analysis_one_per_job")]

    def __str__(self) -> str:
        return f"{self.id} {self.level} {self.mastery_score}"


class WeakPointCandidate(JobLinked):
    """``weak_point_analysis``: one per entry of ``weakPoints``."""

    id = prefixed_id("weak")
    position = _position()
    knowledge_point = _knowledge_point()
    title = models.CharField(max_length=200)
    reason = models.TextField(blank=True, default="")
    severity = models.CharField(max_length=8, choices=Severity.choices)
    evidence = models.JSONField(default=list)
    confidence = models.FloatField()

    class Meta:
        db_table = "ai_weak_point_candidate"
        indexes = list_indexes("ai_weak")

    def __str__(self) -> str:
        return f"{self.id} {self.title} [{self.severity}]"


class NextActionRecommendation(JobLinked):
    """``next_action_planning``: one per entry of ``recommendations``. The entry's
    own ``targetType``/``targetId`` (what to act on) are ``action_target_*``; they
    are kept only when they name the user or one of the user's objects."""

    id = prefixed_id("rcm")
    position = _position()
    action_type = models.CharField(max_length=16, choices=ActionType.choices)
    title = models.CharField(max_length=200)
    description = models.TextField(blank=True, default="")
    priority = models.PositiveSmallIntegerField()
    estimated_minutes = models.PositiveIntegerField()
    action_target_type = models.CharField(max_length=32, null=True, blank=True)
    action_target_id = models.CharField(max_length=64, null=True, blank=True)

    class Meta:
        db_table = "ai_next_action_recommendation"
        indexes = list_indexes("ai_rcm")

    def __str__(self) -> str:
        return f"{self.id} {self.action_type} {self.title}"


class QuizQuestion(JobLinked):
    """A published question of a knowledge base; ``job`` is the job that published it."""

    id = prefixed_id("qq")
    knowledge_base = _knowledge_base(published=True)
    knowledge_point = _knowledge_point()
    question_type = models.CharField(max_length=16, choices=QuestionType.choices)
    stem = models.TextField()
    normalized_stem = models.TextField(help_text="ai_jobs.outputs.normalize_text(stem)")
    stem_key = models.CharField(max_length=64, help_text="SHA-256 of normalized_stem; unique per knowledge base")
    options = models.JSONField(default=list)
    answer = models.JSONField(help_text="A string, or a list of strings")
    explanation = models.TextField(blank=True, default="")
    difficulty = models.CharField(max_length=8, choices=Difficulty.choices)

    class Meta:
        db_table = "ai_quiz_question"
        indexes = list_indexes("ai_qq")
        constraints = [models.UniqueConstraint(fields=["knowledge_base", "stem_key"], name="ai_quiz_question_unique")]

    def __str__(self) -> str:
        return f"{self.id} {self.stem[:60]}"


class QuizQuestionCandidate(JobLinked):
    """``quiz_generation``: one per entry of ``questions``, with what became of it."""

    id = prefixed_id("qqc")
    position = _position()
    knowledge_base = _knowledge_base(published=False)
    knowledge_point = _knowledge_point()
    question_type = models.CharField(max_length=16, choices=QuestionType.choices)
    stem = models.TextField()
    normalized_stem = models.TextField()
    options = models.JSONField(default=list)
    answer = models.JSONField()
    explanation = models.TextField(blank=True, default="")
    difficulty = models.CharField(max_length=8, choices=Difficulty.choices)
    status = models.CharField(max_length=20, choices=CandidateStatus.choices)
    question = models.ForeignKey(
        QuizQuestion,
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="candidates",
        help_text="The question it published, or the existing one it duplicates",
    )

    class Meta:
        db_table = "ai_quiz_question_candidate"
        indexes = list_indexes("ai_qqc")

    def __str__(self) -> str:
        return f"{self.id} {self.status} {self.stem[:60]}"


class Flashcard(JobLinked):
    """A published flashcard of a knowledge base; ``job`` is the job that published it."""

    id = prefixed_id("fc")
    knowledge_base = _knowledge_base(published=True)
    knowledge_point = _knowledge_point()
    front = models.TextField()
    normalized_front = models.TextField(help_text="ai_jobs.outputs.normalize_text(front)")
    front_key = models.CharField(max_length=64, help_text="SHA-256 of normalized_front; unique per knowledge base")
    back = models.TextField()
    hint = models.TextField(null=True, blank=True)
    tags = models.JSONField(default=list)

    class Meta:
        db_table = "ai_flashcard"
        indexes = list_indexes("ai_fc")
        constraints = [models.UniqueConstraint(fields=["knowledge_base", "front_key"], name="ai_flashcard_unique")]

    def __str__(self) -> str:
        return f"{self.id} {self.front[:60]}"


class FlashcardCandidate(JobLinked):
    """``flashcard_generation``: one per entry of ``flashcards``, with what became of it."""

    id = prefixed_id("fcc")
    position = _position()
    knowledge_base = _knowledge_base(published=False)
    knowledge_point = _knowledge_point()
    front = models.TextField()
    normalized_front = models.TextField()
    back = models.TextField()
    hint = models.TextField(null=True, blank=True)
    tags = models.JSONField(default=list)
    status = models.CharField(max_length=20, choices=CandidateStatus.choices)
    flashcard = models.ForeignKey(
        Flashcard,
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="candidates",
        help_text="The card it published, or the existing one it duplicates",
    )

    class Meta:
        db_table = "ai_flashcard_candidate"
        indexes = list_indexes("ai_fcc")

    def __str__(self) -> str:
        return f"{self.id} {self.status} {self.front[:60]}"
