"""What needs no server: the strategy text form, durations, times, error bodies."""

from __future__ import annotations

import datetime as dt
import unittest

import opsq
from opsq._http import error_from
from opsq.types import parse_time


class StrategyTextTest(unittest.TestCase):
    def test_forms(self) -> None:
        cases = {
            "random": "random",
            " oldest_first ": "oldest_first",
            "select_only(company_id=42, custom_priority)": {"select_only": {"key": "company_id", "value": 42, "then": "custom_priority"}},
            'select_only(company_id="42")': {"select_only": {"key": "company_id", "value": "42", "then": "random"}},
            'select_only("eu west"=x-1.2)': {"select_only": {"key": "eu west", "value": "x-1.2", "then": "random"}},
            "or_else(select_only(mode=preview, random), random)": {
                "or_else": {"first": {"select_only": {"key": "mode", "value": "preview", "then": "random"}}, "fallback": "random"}
            },
            "prefer_distinct(company_id, 1, max_simultaneous(@tenant, 5))": {
                "prefer_distinct": {"key": "company_id", "max": 1, "then": {"max_simultaneous": {"key": "@tenant", "max": 5, "then": "random"}}}
            },
            '{"select_only": {"key": "k", "value": 1}}': {"select_only": {"key": "k", "value": 1}},
            '"newest_first"': "newest_first",
            "fastest_first": "fastest_first",  # unknown leaf: left to the server
            'select_only("@tenant"=acme)': {"select_only": {"key": "@tenant", "value": "acme", "then": "random"}},
        }
        for text, want in cases.items():
            with self.subTest(text=text):
                self.assertEqual(opsq.strategy.to_json(text), want)
        self.assertEqual(opsq.strategy.to_json({"a": 1}), {"a": 1})
        self.assertIsNone(opsq.strategy.to_json(None))

    def test_errors_give_the_column(self) -> None:
        for text, col in [("select_only(mode preview)", 18), ("or_else(random)", 15), ("random(", 7), ("select_only(k=\"x)", 15), ("max_simultaneous(k, x)", 21), ("nope(1)", 1)]:
            with self.subTest(text=text):
                with self.assertRaises(opsq.StrategyError) as cm:
                    opsq.parse_strategy(text)
                self.assertIn(f"column {col}:", str(cm.exception))


class ValuesTest(unittest.TestCase):
    def test_durations(self) -> None:
        self.assertEqual(opsq.go_duration(30), "30s")
        self.assertEqual(opsq.go_duration(1.5), "1500ms")
        self.assertEqual(opsq.go_duration(dt.timedelta(minutes=5)), "300s")
        self.assertEqual(opsq.go_duration("5m"), "5m")
        with self.assertRaises(ValueError):
            opsq.go_duration(-1)

    def test_times(self) -> None:
        t = parse_time("2026-11-26T01:45:38.873123456Z")
        self.assertEqual(t, dt.datetime(2026, 11, 26, 1, 45, 38, 873123, tzinfo=dt.timezone.utc))
        self.assertEqual(parse_time("2026-11-26T01:45:38+02:00").utcoffset(), dt.timedelta(hours=2))
        with self.assertRaises(opsq.ProtocolError):
            parse_time("yesterday")

    def test_error_bodies(self) -> None:
        e = error_from(404, b'{"error": {"code": "not_found", "message": "no submission 7"}}', None)
        self.assertIsInstance(e, opsq.NotFound)
        self.assertEqual((e.status, e.code, e.message, e.transient), (404, "not_found", "no submission 7", False))
        e = error_from(503, b'{"error": {"code": "unavailable", "message": "db"}}', "3")
        self.assertIsInstance(e, opsq.Unavailable)
        self.assertEqual((e.retry_after, e.transient), (3.0, True))
        e = error_from(502, b"<html>bad gateway</html>", None)
        self.assertEqual((type(e), e.code, e.message), (opsq.APIError, "http_502", "<html>bad gateway</html>"))

    def test_env_defaults(self) -> None:
        import os
        from unittest import mock

        with mock.patch.dict(os.environ, {"OPSQ_URL": "http://example.invalid:1234/", "OPSQ_KEY": "k"}):
            c = opsq.Client()
            self.assertEqual(c.url, "http://example.invalid:1234")
            self.assertEqual(c._t.key, "k")
        with mock.patch.dict(os.environ, {}, clear=True):
            c = opsq.Client()
            self.assertEqual((c.url, c._t.key), ("http://localhost:3999", None))
        with self.assertRaises(ValueError):
            opsq.Client("ftp://x")


if __name__ == "__main__":
    unittest.main()
