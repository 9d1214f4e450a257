"""Test-only startup hook for the torchrun workers of tests/distributed (via PYTHONPATH).

When ``FLOWKIT_TEST_WATCH_DIR`` is set, every file-system change this process makes under
that directory (open for writing, mkdir, rename/replace, remove, rmtree) is recorded
through Python's audit hooks and written at exit to ``$FLOWKIT_TEST_WRITES_LOG.rank<RANK>``.
It lets a test prove that only rank 0 touches the run directory.
"""

import atexit
import os
import sys

_WATCH = os.environ.get("FLOWKIT_TEST_WATCH_DIR")
_LOG = os.environ.get("FLOWKIT_TEST_WRITES_LOG")
_RANK = os.environ.get("RANK")

if _WATCH and _LOG and _RANK is not None:
    _root = os.path.realpath(_WATCH)
    _seen: list[str] = []
    _busy = [False]
    _WRITE_FLAGS = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_APPEND | os.O_TRUNC
    _CHANGES = {"os.mkdir", "os.rename", "os.replace", "os.remove", "os.rmdir", "shutil.rmtree", "os.truncate"}

    def _under(path: object) -> bool:
        if isinstance(path, bytes):
            path = os.fsdecode(path)
        if not isinstance(path, str):
            return False
        return os.path.realpath(path).startswith(_root)

    def _hook(event: str, args: tuple) -> None:
        if _busy[0]:
            return
        _busy[0] = True
        try:
            if event == "open" and args and _under(args[0]):
                mode, flags = (args[1] if len(args) > 1 else None), (args[2] if len(args) > 2 else 0)
                writes = (isinstance(mode, str) and any(c in mode for c in "wax+")) or (
                    isinstance(flags, int) and flags & _WRITE_FLAGS
                )
                if writes:
                    _seen.append(f"open {args[0]}")
            elif event in _CHANGES and args and _under(args[0]):
                _seen.append(f"{event} {args[0]}")
        finally:
            _busy[0] = False

    def _dump() -> None:
        _busy[0] = True
        with open(f"{_LOG}.rank{_RANK}", "a") as f:
            f.write("".join(line + "\n" for line in _seen))

    sys.addaudithook(_hook)
    atexit.register(_dump)

# ``FLOWKIT_TEST_FAIL_RANK=R``: rank R raises RuntimeError("injected failure") in its second
# training step, or with ``FLOWKIT_TEST_FAIL_MODE=hang`` sleeps there for 10 minutes
# (TrainingLoop.train_step is wrapped when flowkit.train.loop is imported).
if os.environ.get("FLOWKIT_TEST_FAIL_RANK") is not None and os.environ.get("FLOWKIT_TEST_FAIL_RANK") == _RANK:
    import importlib.abc
    import importlib.machinery

    class _Inject(importlib.abc.MetaPathFinder):
        def find_spec(self, name, path, target=None):  # noqa: ANN001, ANN201
            if name != "flowkit.train.loop":
                return None
            spec = importlib.machinery.PathFinder.find_spec(name, path)
            if spec is None or spec.loader is None:
                return spec
            original = spec.loader.exec_module

            def exec_module(module):  # noqa: ANN001, ANN202
                original(module)
                step = module.TrainingLoop.train_step

                def failing(self, lr):  # noqa: ANN001, ANN202
                    if self.counters.step == 1:
                        if os.environ.get("FLOWKIT_TEST_FAIL_MODE") == "hang":
                            import time

                            time.sleep(600)
                        raise RuntimeError("injected failure")
                    return step(self, lr)

                module.TrainingLoop.train_step = failing

            spec.loader.exec_module = exec_module
            return spec

    sys.meta_path.insert(0, _Inject())
