"""Put first on PYTHONPATH by `stallwatch run` (or an operator's prolog): with STALLWATCH_AUTO=1,
every torch DataLoader of the process reports to the stallwatch agent (stallwatch/auto.py).
Then runs the sitecustomize this one shadows, if any, so that the site's own still runs."""
import os
import sys


def _start():
    here = os.path.dirname(os.path.abspath(__file__))
    package_parent = os.path.dirname(os.path.dirname(here))
    try:
        if os.environ.get("STALLWATCH_AUTO", "") not in ("", "0", "false", "no"):
            if package_parent not in sys.path:
                sys.path.append(package_parent)
            from stallwatch import auto

            auto.install()
    except Exception as e:  # the monitor must never stop the job from starting
        sys.stderr.write(f"stallwatch: auto-instrumentation off: {e}\n")
    try:
        import importlib.machinery
        import importlib.util

        rest = [p for p in sys.path if os.path.abspath(p or ".") != here]
        spec = importlib.machinery.PathFinder.find_spec("sitecustomize", rest)
        if spec is not None and spec.loader is not None:
            module = importlib.util.module_from_spec(spec)
            spec.loader.exec_module(module)
    except Exception as e:
        sys.stderr.write(f"stallwatch: the site's sitecustomize failed: {e}\n")


_start()
