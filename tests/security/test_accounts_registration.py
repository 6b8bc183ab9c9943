"""Registration, as a stranger who wants a hundred accounts tries it on gunicorn
off unless ``ALLOW_REGISTRATION`` turns it on (``403 FORBIDDEN``), and
where it is on, limited per client address by ``REGISTRATION_THROTTLE_RATE`` besides
``AUTH_THROTTLE_RATE``."""

from __future__ import annotations

import time

import pytest
from django.contrib.auth import get_user_model

from tests.support.security.accounts import Client, error_of, module_server, start_of_a_window

pytestmark = pytest.mark.django_db(transaction=True)

closed = module_server(ALLOW_REGISTRATION="<unset>", REGISTRATION_THROTTLE_RATE="<unset>")


def test_registration_is_off_unless_turned_on(closed):
    response = Client(closed).register("newcomer")
    assert response.status_code == 403 and error_of(response)["code"] == "FORBIDDEN", response.text
    assert not get_user_model().objects.exists()


open_to_three = module_server(ALLOW_REGISTRATION="true", REGISTRATION_THROTTLE_RATE="3/hour", NUM_PROXIES="1")


def test_one_address_makes_only_so_many_accounts_an_hour(open_to_three):
    # Over a minute left in the hour's window, so its Retry-After cannot be taken for a minute's.
    start_of_a_window(3600, margin=90)
    stranger = Client(open_to_three, address="203.0.113.66")
    made = [stranger.register(f"sock-puppet-{n}") for n in range(3)]
    assert [r.status_code for r in made] == [201, 201, 201], [r.text for r in made]
    fourth = stranger.register("sock-puppet-3")
    assert fourth.status_code == 429 and error_of(fourth)["code"] == "RATE_LIMITED", fourth.text
    # The hour's window, not AUTH_THROTTLE_RATE's minute.
    retry_after, left_in_hour = int(fourth.headers["Retry-After"]), 3600 - time.time() % 3600
    assert retry_after > 60 and abs(retry_after - left_in_hour) <= 5, (retry_after, left_in_hour)
    # Logging in is not registering: the same address still logs in.
    assert stranger.login("sock-puppet-0").status_code == 200
    # Another address registers.
    assert Client(open_to_three, address="198.51.100.66").register("neighbour").status_code == 201
    assert get_user_model().objects.count() == 4
