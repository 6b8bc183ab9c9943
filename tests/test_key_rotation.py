"""One keyring, one rotation (config.keyring): ``rotate_encryption_keys`` re-encrypts
every encrypted column (users' model keys, model configs' apiKey headers, tasks'
forwarded headers) under the newest key, in batches with progress, and only then
says the old key may go. After it, with the old key removed and the keyring loaded
afresh as a restarted process would, every secret still opens and a queued
model-asynch task reaches its model service, and its OSS upload, with the right
headers."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from django.core.management import CommandError, call_command

from asynch import crypto as asynch_crypto
from asynch import services as asynch_services
from asynch.models import AsynchModel, AsynchTask
from config import keyring
from credentials import services as credential_services
from credentials.models import Credential
from tests.support.asynch_fixtures import make_model, model_server_fixture, run_queue, tenant_client  # noqa: F401
from tests.support.credentials import KEY_1, KEY_2
from tests.support.factories import UserFactory

pytestmark = pytest.mark.django_db

OLD, NEW = f"k1:{KEY_1}", f"k2:{KEY_2}"
MODEL_KEY = "API_KEY:model-key,API_STATE:true"


@pytest.fixture(autouse=True)
def _old_key_and_oss(settings, tmp_path: Path, model_server) -> None:
    settings.CREDENTIAL_ENCRYPTION_KEYS = [OLD]
    settings.MEDIA_ROOT = tmp_path
    settings.VAR_DIR = tmp_path
    settings.ASYNCH_SEMAPHORE_REDIS_URL = ""
    # The OSS backend: the one that keeps a task's forwarded headers until it uploads.
    settings.ASYNCH_RESULT_STORAGE = "oss_service"
    settings.OSS_UPLOAD_URL = model_server.url + "/oss/file/uploadFile"

    def behaviour(call, index):
        if call.path == "/oss/file/uploadFile":
            return 200, {"url": "https://oss.example/result.json"}, 0
        return 200, {"answer": 42}, 0

    model_server.behaviour = behaviour


def _restart() -> None:
    """What a new process does: parse CREDENTIAL_ENCRYPTION_KEYS afresh."""
    keyring._build_keyring.cache_clear()


def _secrets_under_the_old_key(model_server):
    user = UserFactory()
    credential = credential_services.credential_create(user=user, name="mine", api_key="sk-user-key-0000000000000001")
    make_model(base_url=model_server.url, api_key=MODEL_KEY)
    make_model("no-key-model", base_url=model_server.url, api_key="")
    biz = tenant_client("biz")
    task_id = biz.create_task(
        "model-service", {"q": 1}, HTTP_AUTHORIZATION="Bearer user-token-123", HTTP_X_USER_INFO="bob"
    ).json()["taskId"]
    assert AsynchTask.objects.get(id=task_id).forward_headers_encrypted.startswith("v1:k1:")
    return credential, task_id


def test_rotation_then_retiring_the_old_key_leaves_every_secret_readable_and_tasks_running(
    settings, model_server, capsys
):
    credential, task_id = _secrets_under_the_old_key(model_server)
    settings.CREDENTIAL_ENCRYPTION_KEYS = [NEW, OLD]

    call_command("rotate_encryption_keys", batch_size=1)
    out = capsys.readouterr().out
    assert "1 credential(s) re-encrypted under key k2." in out
    assert "1 model config(s) re-encrypted under key k2." in out  # the one with no apiKey has nothing to rotate
    assert "1 task(s) re-encrypted under key k2." in out
    assert "users' model keys: batch 1, 1 re-encrypted" in out  # progress, batch by batch
    assert out.rstrip().endswith("Every encrypted value uses key k2: older keys can be retired.")
    assert not Credential.objects.filter(key_id="k1").exists()
    assert AsynchModel.objects.get(model_name="model-service").api_key_encrypted.startswith("v1:k2:")
    assert AsynchModel.objects.get(model_name="no-key-model").api_key_encrypted == ""
    assert AsynchTask.objects.get(id=task_id).forward_headers_encrypted.startswith("v1:k2:")

    settings.CREDENTIAL_ENCRYPTION_KEYS = [NEW]  # the old key is retired
    _restart()
    resolved = credential_services.credential_resolve(user_id=credential.user_id, credential_id=credential.id)
    assert resolved.api_key == "sk-user-key-0000000000000001"
    assert asynch_services.model_api_key(AsynchModel.objects.get(model_name="model-service")) == MODEL_KEY
    assert run_queue() == ["succeeded"]
    model_call, upload = model_server.calls
    assert model_call.headers["API_KEY"] == "model-key" and model_call.headers["API_STATE"] == "true"
    assert upload.headers["Authorization"] == "Bearer user-token-123" and upload.headers["X-User-Info"] == "bob"
    assert AsynchTask.objects.get(id=task_id).oss_file == "https://oss.example/result.json"


def test_without_the_rotation_a_retired_key_leaves_the_model_config_unreadable_and_its_task_waiting(
    settings, model_server
):
    _credential, task_id = _secrets_under_the_old_key(model_server)
    settings.CREDENTIAL_ENCRYPTION_KEYS = [NEW]
    _restart()
    with pytest.raises(keyring.DecryptError, match="not in CREDENTIAL_ENCRYPTION_KEYS"):
        asynch_crypto.decrypt(AsynchModel.objects.get(model_name="model-service").api_key_encrypted)
    assert run_queue() == [] and model_server.calls == []
    assert AsynchTask.objects.get(id=task_id).state == 0


def test_a_value_that_does_not_open_is_reported_and_the_old_key_is_not_declared_free(settings, model_server, capsys):
    _credential, task_id = _secrets_under_the_old_key(model_server)
    token = AsynchTask.objects.get(id=task_id).forward_headers_encrypted
    AsynchTask.objects.filter(id=task_id).update(forward_headers_encrypted=token[:-8] + "AAAAAAA=")
    settings.CREDENTIAL_ENCRYPTION_KEYS = [NEW, OLD]
    with pytest.raises(
        CommandError, match=f"1 task\\(s\\) could not be decrypted and still use an older key: {task_id}"
    ):
        call_command("rotate_credential_keys")  # the former name does the same
    out = capsys.readouterr().out
    assert "1 credential(s) re-encrypted" in out and "1 model config(s) re-encrypted" in out
    assert "can be retired" not in out
    assert AsynchTask.objects.get(id=task_id).forward_headers_encrypted.startswith("v1:k1:")


def test_every_app_with_an_encrypted_column_registers_it():
    columns = {column.name: column.noun for column in keyring.registered_columns()}
    assert columns == {
        "users' model keys": "credential",
        "model configs' apiKey headers": "model config",
        "tasks' forwarded headers": "task",
        "webhook endpoints' secrets": "webhook endpoint",
        "webhook endpoints' previous secrets": "webhook endpoint",
    }


def test_a_text_secret_is_bound_to_its_context_and_key_id(settings):
    token = keyring.seal_text(json.dumps({"Authorization": "Bearer x"}), context=b"asynch")
    assert json.loads(asynch_crypto.decrypt(token)) == {"Authorization": "Bearer x"}
    with pytest.raises(keyring.DecryptError, match="authentication failed"):
        keyring.open_text(token, context=b"another-app")
    settings.CREDENTIAL_ENCRYPTION_KEYS = [OLD, f"k3:{KEY_2}"]
    relabelled = token.replace("v1:k1:", "v1:k3:")
    with pytest.raises(keyring.DecryptError, match="authentication failed"):
        asynch_crypto.decrypt(relabelled)
