"""eventsourcing's own recorder conformance suites, run against the OwlClaw recorders."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from eventsourcing.persistence import ApplicationRecorder, ProcessRecorder, TrackingRecorder
from eventsourcing.postgres import (
    PostgresAggregateRecorder,
    PostgresDatastore,
    PostgresTrackingRecorder,
)
from eventsourcing.tests.persistence import (
    AggregateRecorderTestCase,
    ApplicationRecorderTestCase,
    NonInterleavingNotificationIDsBaseCase,
    ProcessRecorderTestCase,
    TrackingRecorderTestCase,
)

from events.postgres import datastore_from_url
from events.recorder import OwlClawApplicationRecorder, OwlClawProcessRecorder
from owlclaw.database import Database

pytestmark = pytest.mark.integration


class _FreshDatabase:
    datastore: PostgresDatastore

    @pytest.fixture(autouse=True)
    def _database(self, fresh_db: Database) -> Iterator[None]:
        self.datastore = datastore_from_url(fresh_db.url)
        yield
        self.datastore.close()


class TestAggregateRecorder(_FreshDatabase, AggregateRecorderTestCase):
    def create_recorder(self) -> PostgresAggregateRecorder:
        recorder = PostgresAggregateRecorder(self.datastore, events_table_name="snapshots")
        recorder.create_table()
        return recorder


class TestApplicationRecorder(_FreshDatabase, ApplicationRecorderTestCase[ApplicationRecorder]):
    def create_recorder(self) -> OwlClawApplicationRecorder:
        recorder = OwlClawApplicationRecorder(self.datastore, events_table_name="events")
        recorder.create_table()
        return recorder

    def test_insert_subscribe(self) -> None:
        self.optional_test_insert_subscribe()


class TestTrackingRecorder(_FreshDatabase, TrackingRecorderTestCase):
    def create_recorder(self) -> TrackingRecorder:
        recorder = PostgresTrackingRecorder(self.datastore, tracking_table_name="tracking")
        recorder.create_table()
        return recorder


class TestProcessRecorder(_FreshDatabase, ProcessRecorderTestCase):
    def create_recorder(self) -> ProcessRecorder:
        recorder = OwlClawProcessRecorder(
            self.datastore, events_table_name="events", tracking_table_name="tracking"
        )
        recorder.create_table()
        return recorder


class TestNonInterleavingNotificationIDs(_FreshDatabase, NonInterleavingNotificationIDsBaseCase):
    def create_recorder(self) -> ApplicationRecorder:
        recorder = OwlClawApplicationRecorder(self.datastore, events_table_name="events")
        recorder.create_table()
        return recorder
