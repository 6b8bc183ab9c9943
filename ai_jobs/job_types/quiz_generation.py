"""``quiz_generation``: quiz questions for a knowledge base, ``questionCount`` of them
(1 to 50, default 10), stored as candidates and published once per knowledge base."""

from ai_jobs import outputs
from ai_jobs.job_types.common import KNOWLEDGE_BASE, published
from ai_jobs.job_types.registry import CountParam, JobType
from ai_jobs.models import QuizQuestion, QuizQuestionCandidate
from ai_jobs.outputs.publishing import store_quiz

JOB_TYPE = JobType(
    name="quiz_generation",
    label="Quiz",
    target_types=KNOWLEDGE_BASE,
    count=CountParam(name="questionCount", low=1, high=50, default=10),
    store=store_quiz,
    outputs=(QuizQuestionCandidate, QuizQuestion),
    lists=(outputs.QUIZZES,),
    notice=published(QuizQuestionCandidate, "question"),
)
