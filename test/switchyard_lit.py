"""Test formats for Switchyard's lit configuration (lit.cfg.py)."""

import lit.formats
import lit.Test


class RoundTripShTest(lit.formats.ShTest):
    """With --param verify_roundtrip=1, a test that runs no switchyard-opt has
    nothing to round-trip: it is reported unsupported, not run again."""

    def execute(self, test, lit_config):
        with open(test.getSourcePath(), encoding="utf-8") as source:
            if "switchyard-opt" not in source.read():
                return lit.Test.Result(
                    lit.Test.UNSUPPORTED,
                    "runs no switchyard-opt: nothing to round-trip")
        return super().execute(test, lit_config)
