"""Redis killed for 8 s under load (issue 9), from outside: a private ``redis-server``
is the cache, the throttles' counters, model-asynch's semaphore and the Celery broker
of gunicorn, two Celery workers, beat and two runtimes. No answer is a 500 (the
throttles fail open, the database still serves), model-asynch never passes
``maxConcurrency`` nor calls the model twice for one task, the Celery workers are the
same processes afterwards, and every task and job finishes within 45 s of Redis
returning, with nothing restarted by hand."""

from __future__ import annotations

import itertools
import time
import uuid
from collections import Counter
from pathlib import Path

import pytest
import requests

from runtime_worker.standin import StandinServer
from tests.support.asynch_fixtures import model_server_fixture
from tests.support.fault_fixtures import PrivatePostgres, PrivateRedis
from tests.support.fault_stack import RUNTIME_TOKEN, Load, Stack, create_job, create_model, create_task, wait_until

pytestmark = pytest.mark.slow

model_server = model_server_fixture
OUTAGE_SECONDS = 8.0
MAX_CONCURRENCY = 3


def test_redis_killed_8s_under_load_no_500_no_double_call_the_same_workers_and_everything_finishes(
    tmp_path: Path, model_server
):
    postgres = PrivatePostgres()
    redis = PrivateRedis(tmp_path)
    standin = StandinServer().start()
    stack = None
    try:
        postgres.start()
        postgres.psql("CREATE DATABASE aijobs")
        redis.start()
        stack = Stack(tmp_path, database_url=postgres.url("aijobs"), redis_url=redis.url(0), broker_url=redis.url(1),
                      model_url=standin.base_url, ASYNCH_LEASE_SECONDS="10")  # fmt: skip
        stack.migrate()
        learners = stack.seed_users(2)
        tenant_key = stack.tenant_key("biz")
        pids = stack.start_all(runtimes={"rt1": 4, "rt2": 4})
        # Calls of 0.15 to 0.75 s: some are always in flight, and answer after Redis died.
        model_server.behaviour = lambda call, i: (200, {"n": call.json["n"]}, 0.15 + (call.json["n"] % 6) * 0.12)
        create_model(stack, tenant_key, model_server.url, maxConcurrency=MAX_CONCURRENCY)

        tasks: list[str] = []
        jobs: list[str] = []
        numbers = itertools.count()

        def make_task(session: requests.Session, url: str) -> requests.Response:
            answer = create_task(stack, tenant_key, next(numbers), session)
            if answer.status_code == 201:
                tasks.append(answer.json()["taskId"])
            return answer

        def job_maker(token: str, user_id: str):
            def make_job(session: requests.Session, url: str) -> requests.Response:
                answer = create_job(stack, token, user_id, uuid.uuid4().hex, session)
                if answer.status_code in (200, 201):
                    jobs.append(answer.json()["jobId"])
                return answer

            return make_job

        load = Load(stack.url)
        load.add("create task", make_task, pause=0.25)
        for token, user_id in learners:
            load.add("create job", job_maker(token, user_id), pause=0.3)
        user = {"Authorization": f"Bearer {learners[0][0]}"}
        load.add("profile", lambda s, url: s.get(f"{url}/ai/profile", headers=user, timeout=30))
        asynch = {"X-Api-Key": tenant_key}

        def task_result(session: requests.Session, url: str) -> requests.Response:
            if not tasks:
                return session.get(f"{url}/healthz", timeout=30)
            return session.get(f"{url}/task/getTaskResult", params={"taskId": tasks[-1]}, headers=asynch, timeout=30)

        load.add("task result", task_result, pause=0.1)
        runtime = {"Authorization": f"Bearer {RUNTIME_TOKEN}", "x-runtime-instance-id": "prober"}
        load.add("internal", lambda s, url: s.post(f"{url}/internal/runtime/jobs/poll", headers=runtime, timeout=30,
                                                   json={"capabilities": ["quiz_generation"], "limit": 1}))  # fmt: skip

        time.sleep(4)
        in_flight_at_kill = model_server.in_flight
        redis.kill()
        killed_at = time.monotonic()
        time.sleep(OUTAGE_SECONDS)
        redis.start()
        back_at = time.monotonic()
        time.sleep(3)
        load.stop()

        answers = load.answers
        assert not [a for a in answers if a.status not in (200, 201, 503)], Counter(
            (a.what, a.status) for a in answers if a.status not in (200, 201, 503)
        )
        during = load.between(killed_at, back_at)
        assert {a.what for a in during if a.status in (200, 201)} >= {"create task", "create job", "profile"}
        served = stack.served()
        assert served[500] == 0, served

        deadline = 45.0
        done_at = wait_until(
            lambda: (
                stack.sql("SELECT count(*) FROM asynch_task WHERE state <> 2") == [(0,)]
                and stack.sql("SELECT count(*) FROM ai_runtime_job WHERE status <> 'succeeded'") == [(0,)]
            ),
            timeout=deadline - (time.monotonic() - back_at),
            what="every task and job to finish within 45 s of Redis returning",
        )
        assert set(tasks) <= {task_id for (task_id,) in stack.sql("SELECT id FROM asynch_task")}
        assert set(jobs) <= {job_id for (job_id,) in stack.sql("SELECT id FROM ai_runtime_job")}
        calls = Counter(call.json["n"] for call in model_server.calls)
        twice = {n: count for n, count in calls.items() if count > 1}
        assert not twice, twice  # no model call made twice for one task
        assert len(calls) == len(tasks)
        assert model_server.max_in_flight <= MAX_CONCURRENCY
        assert stack.exited() == {} and stack.pids() == pids  # the same processes, nothing restarted
        print(
            f"\nRedis killed {back_at - killed_at:.1f} s ({in_flight_at_kill} model calls in flight): "
            f"{len(answers)} answers, 0 x 500; {len(tasks)} tasks (each called once, at most "
            f"{model_server.max_in_flight} at a time, maxConcurrency {MAX_CONCURRENCY}) and {len(jobs)} jobs done "
            f"{done_at - back_at:.1f} s after Redis was back; workers and beat the same processes"
        )
    finally:
        if stack is not None:
            stack.stop()
        standin.stop()
        redis.kill()
        postgres.destroy()
