"""Behind a proxy: the production setup the docs (``docs/operations/production.md``)
and the systemd units describe (gunicorn on 127.0.0.1 behind one reverse proxy or load
balancer) sets ``NUM_PROXIES`` to 1, and with it, on gunicorn, one client's failed logins are
throttled while another client behind the same proxy (the same ``REMOTE_ADDR``, another
``X-Forwarded-For``) still logs in; a client that writes its own ``X-Forwarded-For``
(the proxy appends the address it saw) dodges nothing."""

from __future__ import annotations

import re

import pytest

from tests.support.security.accounts import (
    ROOT,
    Client,
    error_of,
    module_server,
    start_of_a_window,
    user_with_password,
)

pytestmark = pytest.mark.django_db(transaction=True)


def production_num_proxies() -> str:
    """``NUM_PROXIES`` as the production settings of the docs and the web unit set it
    (they must agree); ``""`` when either leaves it out."""
    page = (ROOT / "docs" / "operations" / "production.md").read_text()
    production = page.split("```", 2)[1]  # the page's first block: the production settings
    in_docs = re.findall(r"^NUM_PROXIES=(\d+)", production, re.M)
    unit = (ROOT / "deploy" / "systemd" / "aijobs-web.service").read_text()
    in_unit = re.findall(r"^Environment=NUM_PROXIES=(\d+)$", unit, re.M)
    return in_docs[0] if in_docs and in_docs == in_unit else ""


def test_the_production_setup_trusts_the_one_proxy_it_describes():
    assert production_num_proxies() == "1"


server = module_server(
    ALLOW_REGISTRATION="true", AUTH_ADDRESS_THROTTLE_RATE="5/min", NUM_PROXIES=production_num_proxies() or "<unset>"
)


def test_one_clients_failed_logins_never_lock_out_another_behind_the_same_proxy(server):
    for name in ("wendy", "xavier", "yvonne"):
        user_with_password(name)
    start_of_a_window(60)
    guesser = Client(server, address="203.0.113.50")
    for attempt in range(5):  # wrong passwords for several accounts, from one client
        wrong = guesser.login(["wendy", "xavier"][attempt % 2], "not-the-password")
        assert wrong.status_code == 401, wrong.text
    held = guesser.login("yvonne")
    assert held.status_code == 429 and error_of(held)["code"] == "RATE_LIMITED", held.text
    # Its own X-Forwarded-For in front of what the proxy appends changes nothing.
    forged = Client(server, address="198.51.100.77, 203.0.113.50").login("yvonne")
    assert forged.status_code == 429, forged.text
    # Another client of the same proxy (gunicorn sees the proxy's address for both).
    other = Client(server, address="198.51.100.8").login("yvonne")
    assert other.status_code == 200, other.text
