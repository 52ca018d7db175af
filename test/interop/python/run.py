"""Runs the interop suite (or the tests named as arguments) and prints one JSON line per test:
{"test", "outcome", "seconds", "message"}. The vitest wrapper (test/interop-python.test.ts) reads
these lines, so that each Python test is a test of its own in the run's report."""

import json
import sys
import time
import unittest

import test_interop


class JsonResult(unittest.TestResult):
    def startTest(self, test):
        super().startTest(test)
        self._began = time.monotonic()

    def _emit(self, test, outcome, message=""):
        line = {
            "test": test._testMethodName,
            "outcome": outcome,
            "seconds": round(time.monotonic() - self._began, 3),
            "message": message,
        }
        print(json.dumps(line), flush=True)

    def addSuccess(self, test):
        super().addSuccess(test)
        self._emit(test, "passed")

    def addFailure(self, test, err):
        super().addFailure(test, err)
        self._emit(test, "failed", self._exc_info_to_string(err, test))

    def addError(self, test, err):
        super().addError(test, err)
        self._emit(test, "failed", self._exc_info_to_string(err, test))


names = sys.argv[1:]
if names:
    suite = unittest.TestSuite(unittest.defaultTestLoader.loadTestsFromName(f"Interop.{n}", test_interop) for n in names)
else:
    suite = unittest.defaultTestLoader.loadTestsFromModule(test_interop)
suite.run(JsonResult())
