"""The viewer answers its own page only: a request a browser marks as sent by another site
(Sec-Fetch-Site: cross-site) or by another port of this machine (same-site) is refused, so a
page elsewhere cannot read the run through the user's browser. Its own page (same-origin), an
address typed in (none) and clients that send no such header (curl, older browsers) are
answered."""

from __future__ import annotations

import json
import urllib.error
import urllib.request

import pytest

from tests.test_viewer_api import Served, _make

PATHS = ("", "api/overview", "api/answers", "static/app.js")


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    s = Served(_make(tmp_path_factory.mktemp("fetch-site"), "r1"))
    yield s
    s.close()


def _status(served: Served, path: str, site: str | None) -> tuple[int, bytes, str]:
    headers = {"Sec-Fetch-Site": site} if site is not None else {}
    request = urllib.request.Request(served.viewer.url + path, headers=headers)
    try:
        with urllib.request.urlopen(request, timeout=60) as resp:
            return resp.status, resp.read(), resp.headers["Content-Type"]
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read(), exc.headers["Content-Type"]


@pytest.mark.parametrize("site", ["cross-site", "same-site", "Cross-Site", " same-site "])
@pytest.mark.parametrize("path", PATHS)
def test_another_sites_request_is_refused(served, path, site):
    status, body, kind = _status(served, path, site)
    assert status == 403
    assert kind.startswith("application/json")
    said = json.loads(body)
    assert "another site" in said["error"] and said["fix"]


@pytest.mark.parametrize("site", ["same-origin", "none", None])
@pytest.mark.parametrize("path", PATHS)
def test_its_own_page_an_address_typed_in_and_curl_are_answered(served, path, site):
    status, _, _ = _status(served, path, site)
    assert status == 200
