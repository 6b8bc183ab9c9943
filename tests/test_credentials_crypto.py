"""AES-256-GCM at rest: a fresh nonce per encryption, the owner, row and key id
bound as associated data, any altered byte an error and never a wrong key; key ids,
rotation to the newest key, and the development key derived from SECRET_KEY."""

from __future__ import annotations

import base64
import logging

import pytest
from django.core.checks import run_checks
from django.core.exceptions import ImproperlyConfigured
from django.core.management import CommandError, call_command

from config import keyring
from config.errors import DomainError
from credentials import crypto, services
from credentials.models import Credential
from tests.support.api import RuntimeClient, error_code
from tests.support.credentials import (  # noqa: F401  (fixtures)
    API_KEY,
    KEY_1,
    KEY_2,
    client_for,
    encryption_keys_fixture,
    make_credential,
)
from tests.support.factories import JobFactory, UserFactory

pytestmark = [pytest.mark.django_db, pytest.mark.embedded, pytest.mark.usefixtures("encryption_keys")]


def _flip(data: bytes, index: int) -> bytes:
    return data[:index] + bytes([data[index] ^ 0x01]) + data[index + 1 :]


def _row(credential: Credential) -> Credential:
    return Credential.objects.get(id=credential.id)


# --- sealing ----------------------------------------------------------------------------------


def test_each_encryption_takes_a_fresh_96_bit_nonce_and_round_trips():
    first = crypto.seal(API_KEY, owner_id="1", credential_id="cred_a")
    second = crypto.seal(API_KEY, owner_id="1", credential_id="cred_a")
    assert len(first.nonce) == len(second.nonce) == 12 and first.nonce != second.nonce
    assert first.ciphertext != second.ciphertext and first.key_id == "k1"
    assert len(first.ciphertext) == len(API_KEY) + 16  # the GCM tag travels with it
    assert crypto.unseal(first, owner_id="1", credential_id="cred_a") == API_KEY


def test_flipping_any_byte_of_ciphertext_nonce_or_key_id_fails_with_a_clear_error():
    sealed = crypto.seal(API_KEY, owner_id="1", credential_id="cred_a")
    variants = [
        crypto.Sealed(sealed.key_id, sealed.nonce, _flip(sealed.ciphertext, i)) for i in range(len(sealed.ciphertext))
    ]
    variants += [
        crypto.Sealed(sealed.key_id, _flip(sealed.nonce, i), sealed.ciphertext) for i in range(len(sealed.nonce))
    ]
    variants += [
        crypto.Sealed("k2", sealed.nonce, sealed.ciphertext),
        crypto.Sealed("k1x", sealed.nonce, sealed.ciphertext),
    ]
    variants += [crypto.Sealed(sealed.key_id, sealed.nonce[:11], sealed.ciphertext)]
    for variant in variants:
        with pytest.raises(crypto.CredentialDecryptError, match="Cannot decrypt credential cred_a") as caught:
            crypto.unseal(variant, owner_id="1", credential_id="cred_a")
        assert API_KEY not in str(caught.value)


def test_a_ciphertext_does_not_decrypt_for_another_owner_or_row():
    sealed = crypto.seal(API_KEY, owner_id="1", credential_id="cred_a")
    for owner, row in (("2", "cred_a"), ("1", "cred_b")):
        with pytest.raises(crypto.CredentialDecryptError, match="authentication failed"):
            crypto.unseal(sealed, owner_id=owner, credential_id=row)


def test_a_key_id_naming_another_configured_key_fails_and_an_unknown_one_says_so(settings):
    settings.CREDENTIAL_ENCRYPTION_KEYS = [f"k1:{KEY_1}", f"k2:{KEY_2}"]
    sealed = crypto.seal(API_KEY, owner_id="1", credential_id="cred_a")
    with pytest.raises(crypto.CredentialDecryptError, match="authentication failed"):
        crypto.unseal(crypto.Sealed("k2", sealed.nonce, sealed.ciphertext), owner_id="1", credential_id="cred_a")
    with pytest.raises(
        crypto.CredentialDecryptError, match=r"\(key id k9\): that key id is not in CREDENTIAL_ENCRYPTION_KEYS"
    ):
        crypto.unseal(crypto.Sealed("k9", sealed.nonce, sealed.ciphertext), owner_id="1", credential_id="cred_a")


# --- stored rows ------------------------------------------------------------------------------


@pytest.mark.parametrize("field", ["ciphertext", "nonce", "key_id"])
def test_an_altered_stored_row_never_resolves_to_a_key(user, field):
    credential = make_credential(user)
    row = _row(credential)
    if field == "key_id":
        altered = {"key_id": "k1" + "x"}
    else:
        value = bytes(getattr(row, field))
        altered = {field: _flip(value, len(value) // 2)}
    Credential.objects.filter(id=credential.id).update(**altered)
    with pytest.raises(DomainError, match="Cannot decrypt") as caught:
        services.credential_resolve(user_id=user.pk, credential_id=credential.id)
    assert caught.value.code.code == "CREDENTIAL_RESOLVE_FAILED" and API_KEY not in caught.value.message


def test_a_ciphertext_moved_to_another_row_fails_even_for_the_same_user(user):
    source = _row(make_credential(user))
    for target in (make_credential(user, api_key="sk-other00000000000000000000000zz"), make_credential(UserFactory())):
        Credential.objects.filter(id=target.id).update(
            key_id=source.key_id, nonce=bytes(source.nonce), ciphertext=bytes(source.ciphertext)
        )
        with pytest.raises(DomainError, match="authentication failed"):
            services.credential_resolve(user_id=target.user_id, credential_id=target.id)


def test_the_runtime_gets_a_clear_error_not_a_key_when_decryption_fails(runtime: RuntimeClient, user, caplog):
    credential = make_credential(user)
    row = _row(credential)
    Credential.objects.filter(id=credential.id).update(ciphertext=_flip(bytes(row.ciphertext), 0))
    job = JobFactory(user=user, api_key_mode="user_deepseek_key", credential_id=credential.id)
    assert runtime.lock(job.id).status_code == 200
    response = runtime.post(f"jobs/{job.id}/credential")
    assert (
        response.status_code == 500
        and error_code(response) == "CREDENTIAL_RESOLVE_FAILED"
        and response.json()["error"]["retryable"] is False
    )
    assert "Cannot decrypt credential" in response.json()["error"]["message"]
    assert "apiKey" not in response.content.decode() and API_KEY not in response.content.decode()
    assert any("credential resolve failed" in r.getMessage() and r.levelno == logging.ERROR for r in caplog.records)
    # The runtime reports it with its failure code.
    failed = runtime.fail(job.id, 1, "CREDENTIAL_RESOLVE_FAILED", "cannot decrypt")
    assert failed.status_code == 200 and failed.json()["status"] == "failed"


def test_the_provider_test_of_an_undecryptable_key_answers_ok_false_and_calls_nobody(user):
    credential = make_credential(user)
    Credential.objects.filter(id=credential.id).update(key_id="k7")
    response = client_for(user).post(f"/ai/model-credentials/{credential.id}/test")
    assert response.status_code == 200
    assert response.json() == {
        "ok": False,
        "httpStatus": None,
        "message": "The stored key cannot be decrypted; enter the key again.",
    }


# --- rotation ---------------------------------------------------------------------------------


def test_after_rotation_every_row_decrypts_under_the_new_key_and_none_names_the_old(settings, capsys):
    users = [UserFactory(), UserFactory()]
    keys = {make_credential(users[i % 2], api_key=f"sk-rotate{i:024d}").id: f"sk-rotate{i:024d}" for i in range(5)}
    gone = make_credential(users[0])
    services.credential_delete(credential=gone)
    settings.CREDENTIAL_ENCRYPTION_KEYS = [f"k2:{KEY_2}", f"k1:{KEY_1}"]
    already_new = make_credential(users[1], api_key="sk-written-after-the-new-key00001")
    keys[already_new.id] = "sk-written-after-the-new-key00001"
    before = {row.id: bytes(row.nonce) for row in Credential.objects.all()}

    call_command("rotate_credential_keys", batch_size=2)
    assert "5 credential(s) re-encrypted under key k2" in capsys.readouterr().out

    settings.CREDENTIAL_ENCRYPTION_KEYS = [f"k2:{KEY_2}"]  # the old key is retired
    assert not Credential.objects.filter(key_id="k1").exists()
    for credential_id, api_key in keys.items():
        row = Credential.objects.get(id=credential_id)
        assert row.key_id == "k2"
        assert services.credential_resolve(user_id=row.user_id, credential_id=row.id).api_key == api_key
    assert bytes(Credential.objects.get(id=already_new.id).nonce) == before[already_new.id]
    assert Credential.objects.get(id=gone.id).key_id == ""
    call_command("rotate_credential_keys")
    assert "0 credential(s) re-encrypted" in capsys.readouterr().out


def test_rotation_reports_rows_it_cannot_decrypt_and_rotates_the_rest(user, settings):
    good, bad = make_credential(user), make_credential(user)
    Credential.objects.filter(id=bad.id).update(ciphertext=_flip(bytes(_row(bad).ciphertext), 3))
    settings.CREDENTIAL_ENCRYPTION_KEYS = [f"k2:{KEY_2}", f"k1:{KEY_1}"]
    with pytest.raises(CommandError, match=f"1 credential\\(s\\) could not be decrypted .*{bad.id}"):
        call_command("rotate_credential_keys")
    assert _row(good).key_id == "k2" and _row(bad).key_id == "k1"


def test_rotation_never_overwrites_a_key_the_user_replaced_meanwhile(user, settings, monkeypatch):
    credential = make_credential(user)
    settings.CREDENTIAL_ENCRYPTION_KEYS = [f"k2:{KEY_2}", f"k1:{KEY_1}"]
    real_seal = crypto.seal

    def seal_after_the_user_replaced_the_key(plaintext: str, **kwargs):
        sealed = real_seal(plaintext, **kwargs)
        monkeypatch.setattr(crypto, "seal", real_seal)
        services.credential_update(credential=_row(credential), api_key="sk-replaced-meanwhile0000000000001")
        return sealed

    monkeypatch.setattr(crypto, "seal", seal_after_the_user_replaced_the_key)
    report = services.credentials_rotate_keys()
    assert report.rotated == 0 and report.failed == []
    resolved = services.credential_resolve(user_id=user.pk, credential_id=credential.id)
    assert resolved.api_key == "sk-replaced-meanwhile0000000000001"


# --- key configuration ------------------------------------------------------------------------


def test_key_ids_come_from_the_prefix_or_are_derived_from_the_key(settings):
    settings.CREDENTIAL_ENCRYPTION_KEYS = [KEY_2, f"old-2024:{KEY_1}"]
    ring = keyring.keyring()
    derived = keyring.derived_key_id(base64.b64decode(KEY_2))
    assert [key.key_id for key in ring.keys] == [derived, "old-2024"] and ring.current.key_id == derived
    assert derived.startswith("k") and len(derived) == 12 and KEY_2 not in repr(ring)
    assert crypto.seal(API_KEY, owner_id="1", credential_id="c").key_id == derived


@pytest.mark.parametrize(
    ("entries", "message"),
    [
        (["not-base64!"], "not valid base64"),
        ([base64.b64encode(b"short").decode()], "must decode to 32 bytes, not 5"),
        ([f"a:{KEY_1}", f"a:{KEY_2}"], "key id a repeats"),
        ([f"bad id:{KEY_1}"], "key id must be"),
    ],
)
def test_a_bad_key_configuration_is_refused_without_quoting_the_key(settings, entries, message):
    settings.CREDENTIAL_ENCRYPTION_KEYS = entries
    with pytest.raises(ImproperlyConfigured, match=message) as caught:
        keyring.keyring()
    assert all(entry.rpartition(":")[2] not in str(caught.value) for entry in entries)
    assert [m.id for m in run_checks() if m.id.startswith("credentials.")] == ["credentials.E001"]


def test_without_keys_a_development_key_is_derived_from_secret_key_with_a_warning(settings, caplog):
    settings.CREDENTIAL_ENCRYPTION_KEYS = []
    keyring._build_keyring.cache_clear()
    ring = keyring.keyring()
    assert ring.development and ring.current.key_id.startswith("dev-")
    assert any("CREDENTIAL_ENCRYPTION_KEYS is not set" in r.getMessage() for r in caplog.records)
    sealed = crypto.seal(API_KEY, owner_id="1", credential_id="c")
    assert crypto.unseal(sealed, owner_id="1", credential_id="c") == API_KEY
    settings.SECRET_KEY = "another-secret-key-" + "x" * 40
    assert keyring.keyring().current.key_id != ring.current.key_id
    with pytest.raises(crypto.CredentialDecryptError, match="not in CREDENTIAL_ENCRYPTION_KEYS"):
        crypto.unseal(sealed, owner_id="1", credential_id="c")


def test_check_deploy_flags_the_development_key_and_is_quiet_with_real_keys(settings):
    settings.CREDENTIAL_ENCRYPTION_KEYS = []
    assert "credentials.W001" in [m.id for m in run_checks(include_deployment_checks=True)]
    assert "credentials.W001" not in [m.id for m in run_checks(include_deployment_checks=False)]
    settings.CREDENTIAL_ENCRYPTION_KEYS = [f"k1:{KEY_1}"]
    assert not [m for m in run_checks(include_deployment_checks=True) if m.id.startswith("credentials.")]
