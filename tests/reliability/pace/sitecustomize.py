"""Paces the training steps of the processes a requeue test starts.

On an idle machine the debug run finishes in a few seconds, so most kill moments never
come. ``FLOWKIT_TEST_STEP_PAUSE`` (seconds) sleeps before each training step: the kill
moments land on a fast machine as on a slow one, and the bits are unaffected (only time
passes; nothing random is drawn). Put this folder on PYTHONPATH to use it.
"""

import os
import time

_pause = float(os.environ.get("FLOWKIT_TEST_STEP_PAUSE", "0") or 0)
if _pause > 0:
    from flowkit.train import loop

    _train_step = loop.TrainingLoop.train_step

    def _paced(self, *args, **kwargs):
        time.sleep(_pause)
        return _train_step(self, *args, **kwargs)

    loop.TrainingLoop.train_step = _paced
