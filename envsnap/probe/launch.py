"""`envsnap run` observes the Python processes it starts as the probe would, without `probe install`.

The command runs with a private directory first on PYTHONPATH. It holds a `sitecustomize.py` (SITECUSTOMIZE
below), a copy of the probe's runtime and of redact.py (as `probe install` writes them). Python's `site`
imports `sitecustomize` once the site directories and their `.pth` files are done; ours then

  1. takes its directory off sys.path (and the importer cache), so `sys.path` is what it would have been;
  2. starts the probe's runtime (unless an installed probe's `.pth` hook already did: one probe a process),
     with ENVSNAP_PROBE_DIR pointing at this run's records;
  3. imports the `sitecustomize` it shadowed, found on the rest of sys.path (a venv's, the system's, one
     on the user's PYTHONPATH), so it runs as it would have; with none, it raises the ImportError that
     `site` takes for "there is none" (site.py's execsitecustomize ignores an ImportError naming
     sitecustomize), and sys.modules ends without one, as before.

`.pth` hooks run before sitecustomize and `usercustomize` after it, untouched; the probe's start record
waits for both (runtime._after_sitecustomize). The process's children inherit PYTHONPATH and are observed
too. What is not seen: a process started with -I, -E or -S (no PYTHONPATH or no site), and native programs
(/proc observation covers those). The command's environment shows the two additions (PYTHONPATH,
ENVSNAP_PROBE_DIR); `restore_pythonpath` gives a record back the value the user had.
"""
from __future__ import annotations

import os
import shutil
import tempfile
from typing import Any, Dict, List, Mapping, Optional

from envsnap.probe import install

SITE_PREFIX = "envsnap-run-site-"
PROBE_PREFIX = "envsnap-run-probe-"
MARKER = "# envsnap run"

# Plain Python 3: it runs in whatever interpreter the command uses (3.8+ for the audit
# hook; older ones are observed without opens). Everything inside a function: nothing leaks into the module.
SITECUSTOMIZE = f'''{MARKER}: observes this process for `envsnap run` (envsnap/probe/launch.py), then runs the
# sitecustomize this file shadows. Written into a private directory for one `envsnap run`, removed after it.
def _envsnap_run_observe():
    import os
    import sys

    here = os.path.dirname(os.path.abspath(__file__))

    def ours(entry):
        try:
            return isinstance(entry, str) and bool(entry) and os.path.abspath(entry) == here
        except Exception:
            return False

    sys.path[:] = [entry for entry in sys.path if not ours(entry)]
    sys.path_importer_cache.pop(here, None)
    # Off sys.modules before the probe starts: it then waits for the real sitecustomize (and usercustomize)
    # to run before it takes the start record.
    sys.modules.pop("sitecustomize", None)
    if os.environ.get("ENVSNAP_PROBE_DIR"):
        # The loader `probe install`'s .pth line runs (install._loader_body): the copy beside this file,
        # compiled once into the records directory's cache; nothing if an installed probe already started.
        exec(__LOADER__, {{"__name__": "_envsnap_probe_pth", "os": os}})


_envsnap_run_observe()
del _envsnap_run_observe
import sitecustomize  # noqa: E402,F401  the one this file shadowed, or the ImportError site expects without one
'''


def write_site(directory: str) -> None:
    """The private directory's files: sitecustomize.py, the runtime and redact copies."""
    copies = install.expected_files(directory)
    loader = install._loader_body(os.path.join(os.path.abspath(directory), install.MODULE_NAME))
    files = {"sitecustomize.py": SITECUSTOMIZE.replace("__LOADER__", repr(loader)),
             install.MODULE_NAME: copies[install.MODULE_NAME],
             install.REDACT_NAME: copies[install.REDACT_NAME]}
    for name, text in files.items():
        with open(os.path.join(directory, name), "w", encoding="utf-8") as handle:
            handle.write(text)


def launch_env(env: Mapping[str, str], site_dir: str, probe_dir: str) -> Dict[str, str]:
    """`env` with the private directory first on PYTHONPATH and ENVSNAP_PROBE_DIR set.

    An unset or empty PYTHONPATH becomes the directory alone: joining it to an empty one would add an
    empty entry, which Python reads as the working directory, and change sys.path."""
    out = dict(env)
    original = out.get("PYTHONPATH")
    out["PYTHONPATH"] = site_dir + os.pathsep + original if original else site_dir
    out["ENVSNAP_PROBE_DIR"] = probe_dir
    return out


def restore_pythonpath(env: Dict[str, str], launched: str, site_dir: str, original: Optional[str]) -> None:
    """Give a recorded environment back the PYTHONPATH the user had (in place): the launch's value becomes
    the original (unset when it was unset), and another value (a process changed it) loses the directory."""
    value = env.get("PYTHONPATH")
    if not isinstance(value, str):
        return
    if value == launched:
        if original is None:
            del env["PYTHONPATH"]
        else:
            env["PYTHONPATH"] = original
        return
    entries = [entry for entry in value.split(os.pathsep) if entry != site_dir]
    if entries:
        env["PYTHONPATH"] = os.pathsep.join(entries)
    else:
        del env["PYTHONPATH"]


class ObservedLaunch:
    """One `envsnap run`'s observation: the private site directory, and where the records go (the user's
    --probe-dir, else a private directory of its own). `close` removes what it created.

    With `observe` false (`run --no-observe`) nothing is added to the command's environment but
    ENVSNAP_PROBE_DIR when --probe-dir is given (an installed probe then writes there), as before."""

    def __init__(self, probe_dir: Optional[str] = None, observe: bool = True) -> None:
        self.site_dir: Optional[str] = None
        self.own_probe_dir = observe and probe_dir is None
        self.probe_dir: Optional[str] = os.path.abspath(probe_dir) if probe_dir is not None else None
        self.original_pythonpath: Optional[str] = None
        self.launched_pythonpath = ""
        if not observe:
            return
        self.site_dir = tempfile.mkdtemp(prefix=SITE_PREFIX)
        try:
            if self.probe_dir is None:
                self.probe_dir = tempfile.mkdtemp(prefix=PROBE_PREFIX)
            write_site(self.site_dir)
        except BaseException:
            self.close()
            raise

    @property
    def own_dirs(self) -> List[str]:
        """envsnap's own directories (the private site directory, the records directory): files there are not
        the program's."""
        return [d for d in (self.site_dir, self.probe_dir) if d]

    def env(self, base: Mapping[str, str]) -> Dict[str, str]:
        self.original_pythonpath = base.get("PYTHONPATH")
        if self.site_dir is None:
            return dict(base, ENVSNAP_PROBE_DIR=self.probe_dir) if self.probe_dir else dict(base)
        out = launch_env(base, self.site_dir, self.probe_dir or "")
        self.launched_pythonpath = out["PYTHONPATH"]
        return out

    def restore(self, record: Dict[str, Any]) -> None:
        """A probe record as the process would show without this launch (in place): the environments' PYTHONPATH
        as the user had it, and the probe's own modules (loaded from the private directory) off its list."""
        if self.site_dir is None:
            return
        for field_name in ("env_at_start", "env_at_init", "env_at_exit"):
            env = record.get(field_name)
            if isinstance(env, dict):
                restore_pythonpath(env, self.launched_pythonpath, self.site_dir, self.original_pythonpath)
        modules = record.get("modules")
        if isinstance(modules, dict):
            inside = os.path.join(self.site_dir, "")
            for name, path in list(modules.items()):
                if isinstance(path, str) and path.startswith(inside):
                    del modules[name]

    def close(self) -> None:
        if self.site_dir is not None:
            shutil.rmtree(self.site_dir, ignore_errors=True)
        if self.own_probe_dir and self.probe_dir is not None:
            shutil.rmtree(self.probe_dir, ignore_errors=True)
