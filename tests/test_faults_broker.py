"""The broker lost for 30 s (issue 9), on Redis and on RabbitMQ: the Celery workers
and beat live through it and resume by themselves, so the reaper and model-asynch's
worker and cleaner run again within ``AI_JOB_REAPER_INTERVAL_SECONDS`` + 30 s.

Redis is a private ``redis-server`` killed with SIGKILL (broker, cache and semaphore
all gone, as in a crash); RabbitMQ is the machine's, reached through a ``TcpProxy``
that is cut (every connection reset, new ones refused), in a vhost of the test's own.
A model-asynch drain is running when the broker goes (an unacknowledged message: the
case that made celery 5.7.0's workers exit on Redis, see docs/operations/production.md, Why celery 5.6.3)."""

from __future__ import annotations

import os
import signal
import subprocess
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from runtime_worker.standin import StandinServer
from tests.support.asynch_fixtures import model_server_fixture
from tests.support.fault_fixtures import PrivatePostgres, PrivateRedis, TcpProxy
from tests.support.fault_stack import Stack, create_job, create_model, create_task, wait_until

pytestmark = pytest.mark.slow

model_server = model_server_fixture
OUTAGE_SECONDS = 30.0
REAPER_INTERVAL = 5


@pytest.fixture(scope="module")
def postgres() -> Iterator[PrivatePostgres]:
    cluster = PrivatePostgres()
    cluster.start()
    yield cluster
    cluster.destroy()


def _rabbitmqctl(*args: str) -> None:
    done = subprocess.run(["rabbitmqctl", "-q", *args], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr


class RabbitBroker:
    """A vhost of its own on the machine's RabbitMQ, reached through a proxy to cut."""

    def __init__(self) -> None:
        self.vhost = f"aijobs-faults-{uuid.uuid4().hex[:8]}"
        _rabbitmqctl("add_vhost", self.vhost)
        _rabbitmqctl("set_permissions", "-p", self.vhost, "guest", ".*", ".*", ".*")
        self.proxy = TcpProxy(("127.0.0.1", 5672))
        self.url = f"amqp://guest:guest@127.0.0.1:{self.proxy.port}/{self.vhost}"

    def down(self) -> None:
        self.proxy.cut()

    def up(self) -> None:
        self.proxy.restore()

    def close(self) -> None:
        self.proxy.close()
        _rabbitmqctl("delete_vhost", self.vhost)


def _unfinished(stack: Stack, jobs: list[str], tasks: list[str]) -> str:
    """What a timeout leaves behind: the rows not done and the tails of the Celery logs."""
    rows = stack.sql("SELECT id, status, attempt_no, locked_by, lease_until FROM ai_runtime_job "
                     "WHERE id = ANY(%s) AND status <> 'succeeded'", jobs)  # fmt: skip
    rows += stack.sql("SELECT id, state, attempt_no, retry_count, locked_by, lease_until FROM asynch_task "
                      "WHERE id = ANY(%s) AND state <> 2", tasks)  # fmt: skip
    logs = "\n".join(f"--- {name} ---\n{stack.log(name)[-4000:]}" for name in ("w1", "w2", "beat"))
    return f"not done: {rows}\n{logs}"


@pytest.mark.parametrize("broker", ["redis", "rabbitmq"])
def test_workers_and_beat_outlive_30s_without_the_broker_and_the_reaper_and_asynch_resume(
    broker, postgres, tmp_path: Path, model_server
):
    database = f"aijobs_broker_{broker}"
    postgres.psql(f"CREATE DATABASE {database}")
    redis = PrivateRedis(tmp_path)
    redis.start()
    rabbit = RabbitBroker() if broker == "rabbitmq" else None
    standin = StandinServer().start()
    stack = Stack(tmp_path, database_url=postgres.url(database), redis_url=redis.url(0),
                  broker_url=rabbit.url if rabbit else redis.url(1), model_url=standin.base_url,
                  AI_JOB_LOCK_SECONDS="4", AI_JOB_REAPER_INTERVAL_SECONDS=str(REAPER_INTERVAL),
                  ASYNCH_LEASE_SECONDS="6", ASYNCH_CLEANER_INTERVAL="5")  # fmt: skip
    try:
        stack.migrate()
        [(token, user_id)] = stack.seed_users(1)
        tenant_key = stack.tenant_key("biz")
        pids = stack.start_all(runtimes={"rt1": 8})

        # model-asynch: calls that take 3 s each, so drains are running when the broker goes.
        model_server.behaviour = lambda call, i: (200, {"n": call.json["n"]}, 3.0 if i < 2 else 0.05)
        create_model(stack, tenant_key, model_server.url, maxConcurrency=2)
        tasks = [create_task(stack, tenant_key, n).json()["taskId"] for n in range(4)]
        # AI jobs held by a runtime whose model hangs: it dies in the outage, so only the reaper frees them.
        standin.model.add_faults([{"delay": 120, "times": None}])
        jobs = [create_job(stack, token, user_id, f"before-{n}").json()["jobId"] for n in range(3)]
        wait_until(lambda: len(model_server.calls) >= 2, timeout=30, what="two model calls in flight")
        wait_until(
            lambda: stack.sql("SELECT count(*) FROM ai_runtime_job WHERE status = 'running'") == [(3,)],
            timeout=30,
            what="the jobs to run",
        )

        if rabbit:
            rabbit.down()
        else:
            redis.kill()
        down_at = time.monotonic()
        os.kill(stack.processes["rt1"].pid, signal.SIGKILL)  # its leases lapse during the outage
        standin.model.clear_faults()
        stack.start_runtime("rt2")
        time.sleep(2)
        # Work accepted while the broker is gone: the database has it, the broker does not.
        tasks += [create_task(stack, tenant_key, n).json()["taskId"] for n in range(4, 8)]
        jobs += [create_job(stack, token, user_id, f"during-{n}").json()["jobId"] for n in range(2)]
        # A task whose worker died holding it, its lease lapsed: only the cleaner frees it.
        orphan = create_task(stack, tenant_key, 8).json()["taskId"]
        stack.sql("UPDATE asynch_task SET state = 1, attempt_no = attempt_no + 1, locked_by = 'a-dead-worker', "
                  "started_at = now(), lease_until = now() - interval '1 second' WHERE id = %s", orphan)  # fmt: skip
        tasks.append(orphan)
        time.sleep(max(0.0, OUTAGE_SECONDS - (time.monotonic() - down_at)))
        assert stack.sql("SELECT count(*) FROM ai_runtime_job WHERE id = ANY(%s) AND status = 'running'",
                         jobs[:3]) == [(3,)]  # fmt: skip  # nothing reaped them without the broker
        if rabbit:
            rabbit.up()
        else:
            redis.start()
        back_at = time.monotonic()

        deadline = REAPER_INTERVAL + 30
        try:
            done_at = wait_until(
                lambda: (
                    stack.sql("SELECT count(*) FROM ai_runtime_job WHERE id = ANY(%s) AND status = 'succeeded'", jobs)
                    == [(len(jobs),)]
                    and stack.sql("SELECT count(*) FROM asynch_task WHERE id = ANY(%s) AND state = 2", tasks)
                    == [(len(tasks),)]
                ),
                timeout=deadline,
                what=f"every job and task to succeed within {deadline} s of the broker's return",
            )
        except AssertionError as timeout:
            raise AssertionError(_unfinished(stack, jobs, tasks)) from timeout
        exited = {name: code for name, code in stack.exited().items() if name != "rt1"}
        assert exited == {}, {name: stack.log(name)[-3000:] for name in exited}
        assert {name: pid for name, pid in stack.pids().items() if name != "rt2"} == {
            name: pid for name, pid in pids.items()
        }
        for name in ("w1", "w2", "beat"):
            assert "Unrecoverable error" not in stack.log(name), stack.log(name)[-3000:]
        reaped = stack.sql("SELECT count(*) FROM ai_runtime_job WHERE id = ANY(%s) AND attempt_no >= 2", jobs[:3])
        assert reaped == [(3,)]  # the reaper expired the dead runtime's attempts, another runtime ran them
        assert stack.sql("SELECT retry_count FROM asynch_task WHERE id = %s", orphan) == [(1,)]  # the cleaner's
        print(f"\n{broker}: down {back_at - down_at:.1f} s; workers and beat the same processes; "
              f"{len(jobs)} jobs and {len(tasks)} asynch tasks done {done_at - back_at:.1f} s after it was back")  # fmt: skip
    finally:
        stack.stop()
        standin.stop()
        redis.kill()
        if rabbit:
            rabbit.close()
