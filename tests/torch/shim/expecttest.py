"""What torch.testing._internal.common_utils needs of the expecttest package
(on PyPI, not in Debian), for machines without it: a TestCase base and the
--accept flag. torch's distributed suite asserts no expected-output text, so
assertExpectedInline is never called there; were it called, it fails."""

import unittest

ACCEPT = False


class TestCase(unittest.TestCase):
    def assertExpectedInline(self, actual, expect, skip=0):  # noqa: N802 - expecttest's name
        raise AssertionError("expecttest is not installed: this test's expected-output check cannot run")
