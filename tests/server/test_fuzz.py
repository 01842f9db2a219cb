"""Schemathesis fuzzes every operation of the server's OpenAPI schema (a bounded run): whatever it
sends, the server answers without a 5xx, errors are JSON in the documented shape, and it keeps
serving."""

from __future__ import annotations

import httpx
import pytest
import schemathesis
from hypothesis import HealthCheck, given, settings

from tests.support.processes import tiny_server

pytestmark = pytest.mark.slow  # schemathesis walks every route

EXAMPLES = 25  # per operation


@pytest.fixture(scope="module")
def fuzzed_server():
    with tiny_server("--max-concurrent", "4") as url:
        yield url


def test_no_request_breaks_the_server(fuzzed_server) -> None:
    schema = schemathesis.openapi.from_url(fuzzed_server + "/schema/openapi.json")
    operations = [result.ok() for result in schema.get_all_operations()]
    assert len(operations) >= 7
    seen = {}

    for operation in operations:

        @given(case=operation.as_strategy())
        @settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=list(HealthCheck), database=None)
        def probe(case) -> None:
            response = case.call(timeout=60)
            label = f"{case.method} {case.path}"
            seen[label] = seen.get(label, 0) + 1
            assert response.status_code < 500, (label, response.status_code, response.text[:500])
            if response.status_code >= 400:
                error = response.json()["error"]
                assert error["message"] and error["type"] == "invalid_request_error", error

        probe()
    assert httpx.get(fuzzed_server + "/health").json()["status"] == "ok"
    assert all(count > 0 for count in seen.values()) and len(seen) == len(operations)
