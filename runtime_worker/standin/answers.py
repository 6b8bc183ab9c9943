"""The stand-in's answers: for each job type, a schema-valid output derived from the
snapshot in the prompt (the named things in it, knowledge points first, with the
learner's record on each), one function per type in ``ANSWERS``."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from runtime_worker.prompts import count


@dataclass
class _Topic:
    name: str
    knowledge_point_id: str | None
    correct: int = 0
    attempts: int = 0

    @property
    def accuracy(self) -> float | None:
        return self.correct / self.attempts if self.attempts else None


def _clip(text: Any, most: int = 150) -> str:
    text = str(text).strip() or "untitled"
    return text if len(text) <= most else text[: most - 1] + "…"


def _walk(value: Any, path: str = "") -> list[tuple[str, dict[str, Any]]]:
    found: list[tuple[str, dict[str, Any]]] = []
    if isinstance(value, dict):
        found.append((path, value))
        for key, child in value.items():
            found.extend(_walk(child, f"{path}/{key}"))
    elif isinstance(value, list):
        for child in value:
            found.extend(_walk(child, path))
    return found


def _topics(snapshot: dict[str, Any]) -> tuple[list[_Topic], int, int]:
    """Named things in the snapshot (knowledge points first) with the learner's
    record on each (a point's ``mastery`` counts, else its study records), plus
    the overall correct and attempt counts."""
    nodes = _walk(snapshot)
    topics: dict[str, _Topic] = {}
    measured: set[str] = set()
    for path, node in nodes:
        name = node.get("name") or node.get("title")
        node_id = node.get("id")
        if not (name and node_id) or path in ("", "/learner", "/target"):
            continue
        is_point = ("knowledge" in path.lower() and "point" in path.lower()) or str(node_id).startswith("kp")
        topic = topics.setdefault(str(node_id), _Topic(_clip(name), str(node_id)[:64] if is_point else None))
        mastery = node.get("mastery")
        if isinstance(mastery, dict) and mastery.get("attemptCount") is not None:
            topic.attempts = _int(mastery.get("attemptCount"))
            topic.correct = _int(mastery.get("correctCount"))
            measured.add(str(node_id))
    correct = attempts = 0
    for _path, node in nodes:
        if "isCorrect" not in node:
            continue
        attempts += 1
        correct += bool(node.get("isCorrect"))
        point = node.get("knowledgePointId")
        if point is not None and str(point) not in measured:
            name = node.get("knowledgePointName") or f"knowledge point {point}"
            topic = topics.setdefault(str(point), _Topic(_clip(name), str(point)[:64]))
            topic.attempts += 1
            topic.correct += bool(node.get("isCorrect"))
    if measured:
        attempts = sum(t.attempts for t in topics.values())
        correct = sum(t.correct for t in topics.values())
    ordered = sorted(topics.values(), key=lambda t: (t.knowledge_point_id is None, t.name))
    if not ordered:
        target = snapshot.get("target") or {}
        ordered = [_Topic(_clip(f"{target.get('type', 'target')} {target.get('id', '')}".strip()), None)]
    return ordered, correct, attempts


def _int(value: Any) -> int:
    try:
        return max(0, int(value or 0))
    except (TypeError, ValueError):
        return 0


def _level(score: float) -> str:
    return "beginner" if score < 40 else "developing" if score < 60 else "proficient" if score < 80 else "advanced"


@dataclass(frozen=True)
class Learner:
    """What the answers are derived from."""

    name: str
    topics: list[_Topic]
    correct: int
    attempts: int

    @property
    def by_weakness(self) -> list[_Topic]:
        return sorted(self.topics, key=lambda t: (t.accuracy if t.accuracy is not None else 0.5, t.name))


def analysis(learner: Learner, params: dict[str, Any]) -> dict[str, Any]:
    topics, correct, attempts = learner.topics, learner.correct, learner.attempts
    score = round(100 * correct / attempts, 1) if attempts else 50.0
    strong = [t.name for t in topics if (t.accuracy or 0) >= 0.7]
    weak = [t.name for t in topics if t.accuracy is not None and t.accuracy < 0.7]
    summary = (
        f"{learner.name} answered {correct} of {attempts} attempts correctly across {len(topics)} topic(s)."
        if attempts
        else f"{learner.name} has no study records for this target yet; the estimate is a neutral starting point."
    )
    return {
        "summary": summary,
        "masteryScore": score,
        "level": _level(score),
        "strengths": strong[:10],
        "weaknesses": weak[:10],
        "confidence": round(min(0.95, 0.3 + attempts / 50), 2),
    }


def weak_points(learner: Learner, params: dict[str, Any]) -> dict[str, Any]:
    points = []
    for topic in learner.by_weakness[:5]:
        accuracy = topic.accuracy
        severity = (
            "high"
            if accuracy is not None and accuracy < 0.4
            else "medium"
            if accuracy is not None and accuracy < 0.7
            else "low"
        )
        evidence = [f"{topic.correct} of {topic.attempts} correct"] if topic.attempts else ["no attempts recorded"]
        points.append(
            {
                "knowledgePointId": topic.knowledge_point_id,
                "title": topic.name,
                "reason": f"Accuracy on {topic.name} is {accuracy:.0%}."
                if accuracy is not None
                else f"{topic.name} has not been practised yet.",
                "severity": severity,
                "evidence": evidence,
                "confidence": round(min(0.9, 0.3 + topic.attempts / 20), 2),
            }
        )
    return {"weakPoints": points}


def recommendations(learner: Learner, params: dict[str, Any]) -> dict[str, Any]:
    plans = [("review", 15), ("practice", 20), ("quiz", 10)]
    found = []
    for index, (topic, (action, minutes)) in enumerate(zip(learner.by_weakness * 3, plans, strict=False)):
        recommendation: dict[str, Any] = {
            "actionType": action,
            "title": _clip(f"{action.replace('_', ' ').capitalize()}: {topic.name}", 200),
            "description": f"Spend {minutes} minutes to {action} {topic.name}.",
            "priority": index + 1,
            "estimatedMinutes": minutes,
        }
        if topic.knowledge_point_id:
            recommendation.update(targetType="knowledge_point", targetId=topic.knowledge_point_id)
        found.append(recommendation)
    return {"recommendations": found}


def quiz(learner: Learner, params: dict[str, Any]) -> dict[str, Any]:
    topics = learner.topics
    questions = []
    for index in range(count(params, "questionCount", 10, 50)):
        topic = topics[index % len(topics)]
        kind = ("single_choice", "true_false", "multiple_choice", "short_answer")[index % 4]
        question: dict[str, Any] = {
            "questionType": kind,
            "stem": f"Question {index + 1}: what is the key idea of {topic.name}?",
            "options": [],
            "answer": f"The key idea of {topic.name}",
            "explanation": f"Derived from the study material on {topic.name}.",
            "difficulty": ("easy", "medium", "hard")[index % 3],
            "knowledgePointId": topic.knowledge_point_id,
        }
        if kind == "single_choice":
            question.update(options=[f"The key idea of {topic.name}", "Something unrelated"])
        elif kind == "true_false":
            question.update(
                stem=f"Question {index + 1}: {topic.name} is part of this knowledge base. True or false?",
                options=["True", "False"],
                answer="True",
            )
        elif kind == "multiple_choice":
            question.update(
                options=[f"A fact about {topic.name}", f"Another fact about {topic.name}", "An unrelated claim"],
                answer=[f"A fact about {topic.name}", f"Another fact about {topic.name}"],
            )
        questions.append(question)
    return {"questions": questions}


def flashcards(learner: Learner, params: dict[str, Any]) -> dict[str, Any]:
    topics = learner.topics
    cards = []
    for index in range(count(params, "cardCount", 20, 100)):
        topic = topics[index % len(topics)]
        cards.append(
            {
                "front": f"{topic.name} (card {index + 1})",
                "back": f"The essentials of {topic.name}, as the material explains them.",
                "hint": f"Think of {topic.name}.",
                "knowledgePointId": topic.knowledge_point_id,
                "tags": ["standin"],
            }
        )
    return {"flashcards": cards}


ANSWERS: dict[str, Callable[[Learner, dict[str, Any]], dict[str, Any]]] = {
    "learning_state_analysis": analysis,
    "weak_point_analysis": weak_points,
    "next_action_planning": recommendations,
    "quiz_generation": quiz,
    "flashcard_generation": flashcards,
}


def build_output(job_type: str, snapshot: dict[str, Any], params: dict[str, Any]) -> dict[str, Any]:
    answer = ANSWERS.get(job_type)
    if answer is None:
        return {"answer": f"The stand-in has no output for job type {job_type!r}."}
    topics, correct, attempts = _topics(snapshot)
    # Snapshots are pseudonymous (no username or email): the learner is "the learner".
    return answer(Learner(name="The learner", topics=topics, correct=correct, attempts=attempts), params)
