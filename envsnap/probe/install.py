"""Install, remove and inspect the probe's start-up hook in a site-packages directory.

Three files go into the directory (all say in their first line who wrote them):
  envsnap-probe.pth          one `import os; ...` line: Python runs it at every start-up;
                             it reads ENVSNAP_PROBE_DIR and does nothing more when unset
  _envsnap_probe.py          a copy of envsnap/probe/runtime.py (stdlib only)
  _envsnap_probe_redact.py   a copy of envsnap/redact.py (stdlib only), for the probe's redaction
Copies rather than a path into envsnap's own install: the server usually runs in another
venv than envsnap, possibly as another user, and a copy keeps the hook self-contained
(after `pip uninstall envsnap` it still works when switched on and costs nothing when
off). `status` compares the copies with this envsnap's sources and says "stale" when
they differ. Uninstall removes exactly these files; install and uninstall are idempotent.
"""
from __future__ import annotations

import glob
import os
import sysconfig
import tempfile
from typing import Any, Dict, Optional

from envsnap import __version__
from envsnap.errors import EnvsnapError

PTH_NAME = "envsnap-probe.pth"
MODULE_NAME = "_envsnap_probe.py"
REDACT_NAME = "_envsnap_probe_redact.py"
MARKER = "# envsnap probe"
_PACKAGE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # envsnap/


def default_site() -> str:
    """The running interpreter's purelib (site-packages) directory."""
    return sysconfig.get_paths()["purelib"]


def site_of(python: str, timeout: float = 30.0) -> str:
    """The purelib directory of another interpreter (the server's venv), asked from that interpreter."""
    from envsnap.subproc import run_command

    result = run_command([python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"], timeout=timeout)
    if not result.ok or not result.stdout.strip():
        raise EnvsnapError(f"--python {python}: cannot ask it for its site-packages ({result.error or 'no answer'})")
    return result.stdout.strip().splitlines()[-1]


def _source(name: str) -> str:
    with open(os.path.join(_PACKAGE, name), "r", encoding="utf-8") as handle:
        return handle.read()


def _loader_body(module_path: str) -> str:
    """What the .pth line executes when ENVSNAP_PROBE_DIR is set: load the copy, never raise.

    The compiled module is cached (marshal) in <ENVSNAP_PROBE_DIR>/.envsnap-probe-cache,
    keyed by interpreter version and the copy's size and mtime; site-packages gets no
    __pycache__ entry. Cached code is used only from a directory and file owned by this
    user and writable by no one else (a shared /tmp probe directory must not become a
    way to run code in the server). Keep in step with runtime.load_code.
    """
    return (
        "try:\n"
        " import sys\n"
        " if '_envsnap_probe' not in sys.modules:\n"
        "  import types, marshal\n"
        f"  f = {module_path!r}\n"
        "  s = os.stat(f)\n"
        "  d = os.path.join(os.path.abspath(os.environ['ENVSNAP_PROBE_DIR']), '.envsnap-probe-cache')\n"
        "  c = os.path.join(d, '%s-%s-%s-%d-%d.code' % (os.path.basename(f), getattr(sys.implementation, 'cache_tag', 'py'), "
        "sys.version.split()[0], s.st_size, s.st_mtime_ns))\n"
        "  try:\n"
        "   for p in (d, c):\n"
        "    o = os.stat(p)\n"
        "    if o.st_uid != os.getuid() or o.st_mode & 0o022:\n"
        "     raise OSError(p)\n"
        "   with open(c, 'rb') as h:\n"
        "    code = marshal.loads(h.read())\n"
        "  except Exception:\n"
        "   with open(f, 'rb') as h:\n"
        "    code = compile(h.read(), f, 'exec')\n"
        "   try:\n"
        "    os.makedirs(os.path.dirname(d), mode=0o700, exist_ok=True)\n"
        "    os.makedirs(d, mode=0o700, exist_ok=True)\n"
        "    t = '%s.%d.tmp' % (c, os.getpid())\n"
        "    with open(t, 'wb') as h:\n"
        "     h.write(marshal.dumps(code))\n"
        "    os.replace(t, c)\n"
        "   except Exception:\n"
        "    pass\n"
        "  m = types.ModuleType('_envsnap_probe')\n"
        "  m.__file__ = f\n"
        "  sys.modules['_envsnap_probe'] = m\n"
        "  exec(code, m.__dict__)\n"
        "  m.activate()\n"
        "except Exception:\n"
        " pass\n"
    )


def expected_files(site: str) -> Dict[str, str]:
    """{file name: exact content} that an install writes into `site`."""
    module_path = os.path.join(os.path.abspath(site), MODULE_NAME)
    # site.py executes a .pth line only when it starts with "import"; the body runs in a
    # fresh namespace so nothing leaks into site's, and costs one lookup when off.
    line = ("import os; os.environ.get('ENVSNAP_PROBE_DIR') and "
            f"exec({_loader_body(module_path)!r}, {{'__name__': '_envsnap_probe_pth', 'os': os}})")
    header = (f"{MARKER} {__version__}: a start-up hook that is off unless ENVSNAP_PROBE_DIR is set. "
              "Remove with `envsnap probe uninstall`.")
    pth = f"{header}\n{line}\n"
    copy_note = (f"{MARKER} {__version__}: copy of envsnap/%s written by `envsnap probe install`; "
                 "remove with `envsnap probe uninstall`.\n")
    return {
        PTH_NAME: pth,
        MODULE_NAME: copy_note % "probe/runtime.py" + _source(os.path.join("probe", "runtime.py")),
        REDACT_NAME: copy_note % "redact.py" + _source("redact.py"),
    }


def _check_site(site: str) -> str:
    full = os.path.abspath(site)
    if not os.path.isdir(full):
        raise EnvsnapError(f"{site}: no such directory (give a site-packages directory with --site)")
    return full


def _read(path: str) -> Optional[str]:
    try:
        with open(path, "r", encoding="utf-8", errors="surrogateescape") as handle:
            return handle.read()
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise EnvsnapError(f"cannot read {path}: {exc.strerror or exc}") from None


def _is_ours(text: Optional[str]) -> bool:
    return text is not None and text.startswith(MARKER)


def install(site: Optional[str] = None) -> Dict[str, Any]:
    """Write the hook into `site` (default: this interpreter's purelib). Returns what changed."""
    site = _check_site(site or default_site())
    wanted = expected_files(site)
    # Refuse before writing anything if a file of ours would replace someone else's.
    for name in wanted:
        existing = _read(os.path.join(site, name))
        if existing is not None and not _is_ours(existing):
            raise EnvsnapError(f"{os.path.join(site, name)} exists and was not written by envsnap; not replacing it")
    changed = []
    # The .pth last: it must never point at a module copy that is not there yet.
    for name in sorted(wanted, key=lambda n: n == PTH_NAME):
        path = os.path.join(site, name)
        if _read(path) == wanted[name]:
            continue
        _write_file(path, wanted[name])
        changed.append(name)
    return {"site": site, "changed": changed}


def _write_file(path: str, text: str) -> None:
    directory = os.path.dirname(path)
    try:
        fd, tmp = tempfile.mkstemp(prefix=".envsnap-probe-", suffix=".tmp", dir=directory)
    except OSError as exc:
        raise EnvsnapError(f"cannot write in {directory}: {exc.strerror or exc}") from None
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    except OSError as exc:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise EnvsnapError(f"cannot write {path}: {exc.strerror or exc}") from None


def uninstall(site: Optional[str] = None) -> Dict[str, Any]:
    """Remove the hook's files from `site` (only files envsnap wrote). Returns what was removed."""
    site = _check_site(site or default_site())
    removed = []
    skipped = []
    # The .pth first: from then on no new process loads the copies.
    for name in (PTH_NAME, MODULE_NAME, REDACT_NAME):
        path = os.path.join(site, name)
        text = _read(path)
        if text is None:
            continue
        if not _is_ours(text):
            skipped.append(name)
            continue
        try:
            os.unlink(path)
        except FileNotFoundError:
            continue
        except OSError as exc:
            raise EnvsnapError(f"cannot remove {path}: {exc.strerror or exc}") from None
        removed.append(name)
    # Byte-code of the copies exists only if something imported them by name: remove it too.
    for stem in (MODULE_NAME[:-3], REDACT_NAME[:-3]):
        for pyc in glob.glob(os.path.join(site, "__pycache__", f"{stem}.*.pyc")):
            try:
                os.unlink(pyc)
                removed.append(os.path.relpath(pyc, site))
            except OSError:
                pass
    return {"site": site, "removed": removed, "skipped": skipped}


def status(site: Optional[str] = None) -> Dict[str, Any]:
    """Whether the hook is installed in `site` and current: {"installed", "current", "files": {...}}."""
    site = _check_site(site or default_site())
    wanted = expected_files(site)
    files: Dict[str, str] = {}
    for name, text in wanted.items():
        existing = _read(os.path.join(site, name))
        if existing is None:
            files[name] = "missing"
        elif not _is_ours(existing):
            files[name] = "foreign"
        elif existing == text:
            files[name] = "current"
        else:
            files[name] = "stale"
    present = [s for s in files.values() if s in ("current", "stale")]
    import sys

    return {
        "site": site,
        "installed": files[PTH_NAME] in ("current", "stale") and files[MODULE_NAME] in ("current", "stale"),
        "current": all(s == "current" for s in files.values()),
        "files": files,
        "partial": 0 < len(present) < len(files),
        "on_sys_path": site in [os.path.abspath(p) for p in sys.path if p],
        "probe_dir": os.environ.get("ENVSNAP_PROBE_DIR") or None,
    }
