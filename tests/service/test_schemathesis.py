"""Property tests of the whole API from its OpenAPI schema, on SQLite and on PostgreSQL:
whatever schemathesis sends, the service never answers 5xx, refuses what breaks the
schema, and every response matches the schema. (The schema states every bound a column
has, so that what it accepts the database can hold.)"""

from __future__ import annotations

import tempfile
from pathlib import Path

import pytest
import schemathesis
from hypothesis import HealthCheck, settings
from schemathesis.specs.openapi.checks import positive_data_acceptance

from cpsched.service.app import create_app
from tests.service.conftest import AUTH, settings_for

# Room for bodies over the schema's maxItems, so that they reach validation (→ 422).
LIMIT = 16_000_000
# The document (the same for every database) comes from one app; each test calls its own.
_DB = Path(tempfile.mkdtemp(prefix="cpsched-schemathesis-")) / "cpsched.db"
schema = schemathesis.openapi.from_asgi(
    "/openapi.json", create_app(settings_for(f"sqlite:///{_DB}", max_body_bytes=LIMIT))
)


@pytest.fixture
def app(database_url):
    return create_app(settings_for(database_url, max_body_bytes=LIMIT))


@schema.parametrize()
@settings(max_examples=40, deadline=None, suppress_health_check=list(HealthCheck))
def test_api_conforms_to_its_schema(case, app):
    # Rules the JSON schema cannot state (an allocation holds the job's units, a job asks
    # for some resource, a job ends after it starts) get a 422 on schema-valid bodies, so
    # the "schema-valid is accepted" check does not apply; every other check does.
    case.call_and_validate(app=app, headers=AUTH, excluded_checks=[positive_data_acceptance])
