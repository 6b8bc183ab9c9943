"""No lockout by a stranger, and no guessing of tokens and keys (contract sections 2 and
10), tried against gunicorn behind the one proxy the production setup describes
(``NUM_PROXIES=1``: the client address is what the proxy puts in ``X-Forwarded-For``).

- Login is throttled per pair of username and address (``AUTH_THROTTLE_RATE``) and per
  address (``AUTH_ADDRESS_THROTTLE_RATE``): ten wrong passwords for alice from one
  address leave alice's login from another address working.
- A wrong runtime token, or a wrong ``X-Api-Key``, counts per address
  (``AUTH_FAILURE_THROTTLE_RATE``): the 31st in a minute is ``429``, and so is the right
  credential from that address, while another address is served.
- The credential test is limited per user (``CREDENTIAL_TEST_THROTTLE_RATE``).
- With ``DEBUG`` false, a short runtime token stops the web process from starting."""

from __future__ import annotations

import secrets

import pytest
import requests

from asynch import services as asynch_services
from tests.support.ops import gunicorn
from tests.support.security.accounts import Client, error_of, module_server, pair, start_of_a_window, user_with_password

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]

RUNTIME_TOKEN = "guessing-tests-runtime-token-" + secrets.token_urlsafe(16)

server = module_server(
    NUM_PROXIES="1",
    AUTH_THROTTLE_RATE="10/min",
    AUTH_ADDRESS_THROTTLE_RATE="60/min",
    AUTH_FAILURE_THROTTLE_RATE="30/min",
    CREDENTIAL_TEST_THROTTLE_RATE="10/hour",
    RUNTIME_SERVICE_TOKENS=RUNTIME_TOKEN,
    DEEPSEEK_BASE_URL="http://127.0.0.1:9",  # nothing listens: a test is a quick failure
)


def _limited(response: requests.Response) -> bool:
    return response.status_code == 429 and error_of(response)["code"] == "RATE_LIMITED"


def test_ten_wrong_passwords_from_one_address_leave_alices_login_from_another_working(server):
    user_with_password("alice")
    start_of_a_window(60)
    guesser = Client(server, address="203.0.113.66")
    for _ in range(10):
        wrong = guesser.login("alice", "not-her-password")
        assert wrong.status_code == 401, wrong.text
    held = guesser.login("alice")  # the eleventh try from there, right password and all
    assert _limited(held), held.text
    # alice, from her own address: the guesser's failures are not hers.
    at_home = Client(server, address="198.51.100.23").login("alice")
    assert at_home.status_code == 200, at_home.text
    # The guesser's address may still try other names (its own limit is per address).
    assert guesser.login("nobody-by-this-name", "x").status_code == 401


def test_one_address_is_limited_across_usernames(server):
    start_of_a_window(60)
    sprayer = Client(server, address="203.0.113.77")
    # Sixty calls with sixty names from one address (a refresh token that is no token:
    # every /auth/* call counts, and these cost the server no password hashing).
    answers = [sprayer.post("/auth/token/refresh", {"refresh": f"junk-{n}"}) for n in range(61)]
    assert [a.status_code for a in answers[:60]] == [401] * 60
    assert _limited(answers[60]), answers[60].text
    assert Client(server, address="203.0.113.78").refresh("junk").status_code == 401


def _poll(server: str, token: str, address: str, **headers: str) -> requests.Response:
    return requests.post(
        f"{server}/internal/runtime/jobs/poll",
        json={"capabilities": ["quiz_generation"], "limit": 1},
        headers={"X-Forwarded-For": address, **({"Authorization": f"Bearer {token}"} if token else {}), **headers},
        timeout=30,
    )


def test_the_31st_wrong_runtime_token_in_a_minute_from_one_address_gets_429(server):
    start_of_a_window(60)
    guesser = "203.0.113.90"
    # Requests without a credential are no guesses: they never count.
    for _ in range(40):
        assert _poll(server, "", guesser).status_code == 401
    for attempt in range(30):
        wrong = _poll(server, f"guess-{attempt}-" + "x" * 32, guesser)
        assert wrong.status_code == 401, (attempt, wrong.text)
    held = _poll(server, "guess-31-" + "x" * 32, guesser)
    assert _limited(held) and 1 <= int(held.headers["Retry-After"]) <= 61, held.text
    # The right token from that address is refused for a while too; elsewhere it works.
    assert _limited(_poll(server, RUNTIME_TOKEN, guesser))
    assert _limited(_poll(server, "", guesser, **{"x-internal-api-key": RUNTIME_TOKEN}))
    assert _poll(server, RUNTIME_TOKEN, "198.51.100.90").status_code == 200


def test_the_31st_wrong_tenant_key_in_a_minute_from_one_address_gets_429(server):
    tenant = asynch_services.tenant_create(name="biz")
    key = asynch_services.tenant_key_create(tenant=tenant).key
    start_of_a_window(60)

    def models(api_key: str, address: str) -> requests.Response:
        return requests.get(
            f"{server}/model/listModels", headers={"X-Api-Key": api_key, "X-Forwarded-For": address}, timeout=30
        )

    guesser = "203.0.113.91"
    for attempt in range(30):
        assert models(f"ak_guess_{attempt}", guesser).status_code == 401
    assert _limited(models("ak_guess_31", guesser))
    assert _limited(models(key, guesser))
    assert models(key, "198.51.100.91").status_code == 200


def test_the_eleventh_credential_test_in_an_hour_gets_429(server):
    user_with_password("tester")
    access = pair(Client(server), "tester")["access"]
    headers = {"Authorization": f"Bearer {access}"}
    made = requests.post(
        f"{server}/ai/model-credentials", json={"apiKey": "sk-" + "a" * 40}, headers=headers, timeout=30
    )
    assert made.status_code == 201, made.text
    test_url = f"{server}/ai/model-credentials/{made.json()['id']}/test"
    start_of_a_window(3600, margin=60)
    for n in range(10):
        answer = requests.post(test_url, headers={**headers, "X-Forwarded-For": f"203.0.113.{n + 1}"}, timeout=30)
        assert answer.status_code == 200, (n, answer.text)
    # Per user, whatever the address.
    held = requests.post(test_url, headers={**headers, "X-Forwarded-For": "198.51.100.1"}, timeout=30)
    assert _limited(held), held.text


def test_a_short_runtime_token_stops_the_web_process_from_starting(tmp_path):
    log = tmp_path / "gunicorn.log"
    env = {"DEBUG": "false", "RUNTIME_SERVICE_TOKENS": "x" * 40 + ",short-token"}
    with pytest.raises(AssertionError, match="gunicorn exited"), gunicorn(log, workers=1, env=env):
        pass
    assert "RUNTIME_SERVICE_TOKENS entry 2 is shorter than 32 characters" in log.read_text()
    assert "short-token" not in log.read_text()  # the token itself is never written down
