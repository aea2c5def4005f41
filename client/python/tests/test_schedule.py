"""Schedules against real instances: make one, trigger and backfill runs, read them back,
pause, list and delete it; bad input and a name in use raise."""

from __future__ import annotations

import datetime as dt
import unittest

import opsq

from support import consumer, producer, tag


class ScheduleTest(unittest.TestCase):
    def test_schedule_lifecycle(self) -> None:
        p, name = producer(), f"{tag()}-nightly"
        sc = p.create_schedule(name, "0 2 * * *", {"chunks": ["x"], "metadata": "import of {{.Date}}"},
                               timezone="Europe/Amsterdam", overlap="allow")
        self.assertEqual(len(sc["next_runs"]), 3)
        self.assertEqual(sc["overlap"], "allow")
        with self.assertRaises(opsq.Conflict):
            p.create_schedule(name, "@hourly", {"chunks": ["x"]})
        run = p.trigger_schedule(name)
        self.assertEqual(run["outcome"], "submitted")
        st = p.status(run["submission_id"])
        self.assertTrue(st.metadata.startswith("import of 20"), st.metadata)
        now = dt.datetime.now(dt.timezone.utc)
        runs = p.backfill_schedule(name, now - dt.timedelta(days=2), now)
        self.assertIn(len(runs), (1, 2))
        self.assertEqual(p.backfill_schedule(name, now - dt.timedelta(days=2), now), [])
        shown = p.schedule(name)
        self.assertEqual(len(shown["last_runs"]), 1 + len(runs))
        self.assertTrue(p.pause_schedule(name)["paused"])
        self.assertFalse(p.resume_schedule(name)["paused"])
        self.assertIn(name, [s["name"] for s in p.schedules()])
        self.assertIsNone(p.delete_schedule(name))
        with self.assertRaises(opsq.NotFound):
            p.schedule(name)

    def test_schedule_bad_input(self) -> None:
        p = producer()
        with self.assertRaises(opsq.BadRequest) as e:
            p.create_schedule(f"{tag()}-bad", "@every 500ms", {"chunks": ["x"]})
        self.assertIn("cron", str(e.exception))
        with self.assertRaises(opsq.BadRequest) as e:
            p.create_schedule(f"{tag()}-bad", "@hourly", {"metadata": "{{.Time"})
        self.assertIn("submission.metadata", str(e.exception))
        with self.assertRaises(opsq.Forbidden):
            consumer().schedules()


if __name__ == "__main__":
    unittest.main()
