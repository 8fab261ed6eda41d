"""The in-process probe: what a Python process's os.environ really held, at start, at init_process_group, at exit.

Runs inside other people's programs (every SGLang scheduler, every torchrun worker), so it
follows three rules: standard library only, imported lazily (it must work in a venv without
envsnap, and cost nothing when off); never raise into the host program, never print; never
slow a step (it acts at start-up, once at `init_process_group`, and at exit). It is one file
on purpose: `envsnap probe install` copies it (and envsnap/redact.py) next to a `.pth` hook in
the host's site-packages, and the hook execs it (no __pycache__ written there) only when
ENVSNAP_PROBE_DIR is set.

What it writes: `<ENVSNAP_PROBE_DIR>/<host>-<pid>.json`, replaced atomically at each stage
(env_at_start, env_at_init with the init call's backend/rank/world size/NCCL version,
env_at_exit; see _write), with which variables the process's Python code read (env_reads,
env_copies; see _track_reads), the modules it loaded, its session and working directory; and
a journal of first reads and new modules for a process that never exits (see _append).
Argument lists and environments are redacted with envsnap's own redact module; without it,
values are not recorded at all (names only).
"""
import os
import sys

PROBE_ENV = "ENVSNAP_PROBE_DIR"
RECORD_VERSION = 2
JOURNAL_SUFFIX = ".journal"
MODULES_EVERY_S = 1.0  # the gc callback lists new modules at most this often
REDACT_COPY = "_envsnap_probe_redact.py"
CACHE_DIR = ".envsnap-probe-cache"
_UNREDACTED = "<not recorded: redaction unavailable>"

_state = {"active": False, "record": None, "path": None, "start_done": False, "redact": None,
          "journal": None}
# Modules already listed (names) and when the gc callback last looked.
_modules = {"known": set(), "count": 0, "checked": 0.0}

# Environment reads: {name: count}, whole-environment walks, names beyond the cap.
MAX_READ_NAMES = 4096
MAX_NAME_CHARS = 256
_reads = {}  # type: dict
_read_totals = {"copies": 0, "dropped": 0}
_walks = {}  # type: dict  # thread id -> [keys handed out by __iter__, how many of them were looked up in order]
_quiet = set()  # type: set  # threads in which the probe itself is reading os.environ


def activate():
    """Start the probe for this process if ENVSNAP_PROBE_DIR is set. Never raises."""
    try:
        _activate()
    except Exception:
        pass


def _activate():
    directory = os.environ.get(PROBE_ENV)
    if not directory or _state["active"]:
        return
    _state["active"] = True
    directory = os.path.abspath(directory)
    # Records hold what the process's environment, command line and modules say, redacted: still
    # its owner's alone (a root server's records are not for every user), like /proc/PID/environ.
    os.makedirs(directory, mode=0o700, exist_ok=True)
    _track_reads()
    _track_opens(directory)
    host = _hostname()
    pid = os.getpid()
    _state["path"] = os.path.join(directory, "%s-%d.json" % (_safe_host(host), pid))
    argv = _proc_cmdline() or list(getattr(sys, "orig_argv", None) or sys.argv or [])
    _state["record"] = {
        "probe_version": RECORD_VERSION,
        "host": host,
        "pid": pid,
        "ppid": os.getppid(),
        "executable": sys.executable,
        "python_version": "%d.%d.%d" % sys.version_info[:3],
        "argv": _redact_argv(argv),
        "title": " ".join(_redact_argv(argv)),
        "stages": [],
        "started_at": _now(),
        "sid": _sid(),
        "cwd": _cwd(),
        "stdlib_dir": os.path.dirname(os.path.abspath(os.__file__)),
        "site_dirs": [p for p in sys.path if isinstance(p, str) and os.path.basename(p.rstrip(os.sep))
                      in ("site-packages", "dist-packages")],
    }
    finder = _Finder()
    if "sitecustomize" in sys.modules:
        _start_record()  # activated late (site.addsitedir at run time): site is done
    else:
        finder.watch["sitecustomize"] = _after_sitecustomize
    finder.watch["torch.distributed"] = _after_torch_distributed
    sys.meta_path.insert(0, finder)
    import atexit
    import gc

    atexit.register(_at_exit)
    gc.callbacks.append(_after_collection)
    if hasattr(os, "register_at_fork"):
        os.register_at_fork(after_in_child=_after_fork_child)


def _now():
    import time

    return time.time()


def _sid():
    try:
        return os.getsid(0)
    except (AttributeError, OSError):
        return None


def _cwd():
    try:
        return os.getcwd()
    except OSError:  # the working directory was removed
        return None


def _hostname():
    # os.uname() is what socket.gethostname() reads on Linux, without importing socket (~5-10 ms).
    try:
        return os.uname().nodename
    except AttributeError:
        import socket

        return socket.gethostname()


def load_code(path, cache_dir):
    """Compiled code of a source file, through a marshal cache in `cache_dir` when possible.

    Compiling the probe and the redact copy costs ~10 ms per process; every worker of a
    server loads the same files, so the first one compiles and the others read the cache.
    The cache lives in the records directory (never in site-packages, which must stay as
    it was) and is keyed by interpreter version and the file's size and mtime.
    """
    import marshal

    stat = os.stat(path)
    name = "%s-%s-%s-%d-%d.code" % (os.path.basename(path), getattr(sys.implementation, "cache_tag", "py"),
                                     sys.version.split()[0], stat.st_size, stat.st_mtime_ns)
    cached = os.path.join(cache_dir, name)
    try:
        if _trusted(cache_dir) and _trusted(cached):
            with open(cached, "rb") as handle:
                return marshal.loads(handle.read())
    except Exception:
        pass
    with open(path, "rb") as handle:
        code = compile(handle.read(), path, "exec")
    try:
        os.makedirs(cache_dir, mode=0o700, exist_ok=True)
        tmp = "%s.%d.tmp" % (cached, os.getpid())
        _write_private(tmp, marshal.dumps(code))
        os.replace(tmp, cached)
    except Exception:
        pass
    return code


def _trusted(path):
    """Owned by this user and writable by nobody else: only then is cached code run."""
    stat = os.stat(path)
    return stat.st_uid == os.getuid() and not stat.st_mode & 0o022


def _safe_host(host):
    return "".join(c if c.isalnum() or c in "-_." else "_" for c in host) or "host"


def _proc_cmdline():
    try:
        with open("/proc/self/cmdline", "rb") as handle:
            raw = handle.read()
    except OSError:
        return None
    parts = raw.split(b"\0")
    while parts and parts[-1] == b"":
        parts.pop()
    return [p.decode("utf-8", "surrogateescape") for p in parts]


def _current_title():
    module = sys.modules.get("setproctitle")
    if module is not None:
        try:
            return module.getproctitle()
        except Exception:
            pass
    parts = _proc_cmdline()
    return " ".join(p for p in parts if p) if parts else None


# --- redaction -------------------------------------------------------------------------

def _redactor():
    if _state["redact"] is None:
        _state["redact"] = _load_redactor() or False
    return _state["redact"] or None


def _load_redactor():
    if __name__ == "envsnap.probe.runtime":  # imported from the envsnap package itself
        try:
            from envsnap import redact
            return redact
        except Exception:
            return None
    try:
        import types

        path = os.path.join(os.path.dirname(os.path.abspath(__file__)), REDACT_COPY)
        module = types.ModuleType("_envsnap_probe_redact")
        module.__file__ = path
        code = load_code(path, os.path.join(os.path.dirname(_state["path"]), CACHE_DIR))
        sys.modules["_envsnap_probe_redact"] = module  # dataclass-free, but keep import semantics
        exec(code, module.__dict__)
        return module
    except Exception:
        sys.modules.pop("_envsnap_probe_redact", None)
        return None


def _redacted(record):
    """The record as envsnap would keep it: every string through envsnap's redaction (scrub), the names
    of variables and the paths of modules and the working directory included (a file named after a
    token, a variable named like one). Without the redact module, no string beyond names is recorded:
    the values are already left out (_redact_env), and paths are withheld here."""
    redact = _redactor()
    if redact is not None:
        return redact.scrub(record)
    record = dict(record)
    for key in ("cwd", "executable", "title"):
        if record.get(key) is not None:
            record[key] = _UNREDACTED
    if isinstance(record.get("modules"), dict):
        record["modules"] = {name: _UNREDACTED for name in record["modules"]}
    return record


def _write_private(path, data):
    """Write `data` to a new file readable by this user only (0600, whatever the umask)."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | getattr(os, "O_CLOEXEC", 0), 0o600)
    try:
        if hasattr(os, "fchmod"):
            os.fchmod(fd, 0o600)  # a leftover temp file of a killed writer kept its old mode
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view):]
    finally:
        os.close(fd)


def _redact_env(env):
    redact = _redactor()
    if redact is None:
        return {name: _UNREDACTED for name in env}
    return redact.redact_env(env)


def _redact_argv(argv):
    redact = _redactor()
    if redact is None:
        return [argv[0]] + [_UNREDACTED] * (len(argv) > 1) if argv else []
    return redact.redact_argv(argv)


# --- writing ---------------------------------------------------------------------------

def _write(stage):
    """Replace the record file (temp file + rename) with the record as of `stage`.

    - "env_at_start": os.environ once site-packages, sitecustomize and usercustomize ran --
      the environment the program's own code starts with. A meta-path hook sees the end of
      the `sitecustomize` (and `usercustomize`) import, because .pth files run before them.
    - "env_at_init" and "init" {backend, rank, world_size, nccl_version}: the same hook
      waits for `torch.distributed` to be imported and wraps `init_process_group` (on both
      torch.distributed and torch.distributed.distributed_c10d) once. The environment is
      taken just before the call; NCCL reads its variables when it creates a communicator,
      which is at that call or at the first collective, so this is the closest in-process
      view. The NCCL version is asked only for an NCCL backend, from torch.cuda.nccl.version().
    - "env_at_exit": from an atexit handler. A process that dies by a signal or os._exit
      (fork-started multiprocessing children) has no exit record.
    Every record carries the reads counted so far ("env_reads" {name: count}, "env_copies") and
    "started_at"; "modules": the top-level modules loaded so far, {name: file} ("built-in",
    "frozen", "namespace:<dir>", "object" where sys.modules holds something other than a
    module), with "stdlib_dir" and "site_dirs" so envsnap can tell a module loaded from elsewhere
    (a file in the working directory shadowing `json`) from the one installed; "__main__" is the
    main script. Also "sid" (`envsnap run` starts its command in a session of its own, so the
    command's processes are told from a server's) and "cwd".
    """
    record = _state["record"]
    path = _state["path"]
    if record is None or path is None:
        return
    import json
    import time

    record["stages"].append(stage)
    record["written_at"] = time.time()
    record["env_reads"] = dict(sorted(_reads.items()))
    modules = _module_files()
    record["modules"] = modules
    _modules["known"] = set(modules)
    _modules["count"] = len(sys.modules)
    journal = path[:-len(".json")] + JOURNAL_SUFFIX
    if _state.get("journal_broken_at"):
        record.pop("journal", None)
        record["journal_broken_at"] = _state["journal_broken_at"]
    else:
        record["journal"] = os.path.basename(journal)
    record["env_copies"] = _read_totals["copies"]
    _opens_into(record)
    if _read_totals["dropped"]:
        record["env_reads_dropped"] = _read_totals["dropped"]
    title = _current_title()
    if title is not None:
        redact = _redactor()
        record["title"] = redact.redact_text(title) if redact is not None else title.split(" ")[0]
    text = json.dumps(_redacted(record), sort_keys=True, indent=1, ensure_ascii=False, default=repr)
    tmp = os.path.join(os.path.dirname(path), ".%s.tmp" % os.path.basename(path))
    try:
        _write_private(tmp, (text + "\n").encode("utf-8", "surrogateescape"))
        os.replace(tmp, path)
        if _state["journal"] is None and not _state.get("journal_broken_at"):
            # From here on, every first read of a name is appended to the journal (see the module doc);
            # the reads before it are in this record (a forked child's journal starts with its first record).
            _state["journal"] = journal
    except Exception:
        try:
            os.unlink(tmp)
        except OSError:
            pass


def _start_record(late=None):
    if _state["start_done"]:
        return
    _state["start_done"] = True
    if late:
        _state["record"]["env_at_start_note"] = "taken at %s: the start-up hook did not fire" % late
    _state["record"]["env_at_start"] = _redact_env(_environ_copy())
    if not late:
        # What site.py and the start-up hooks (.pth lines, sitecustomize, usercustomize) read -- a hook's
        # os.environ.setdefault(...) included -- is theirs, not the program's: kept apart, and the
        # program's reads are counted from here.
        _state["record"]["startup_reads"] = dict(sorted(_reads.items()))
        _reads.clear()
    _write("start")


def _after_fork_child():
    """A forked child is a new process with the parent's memory: give it its own record."""
    try:
        record = _state["record"]
        if record is None:
            return
        child = dict(record)
        for key in ("env_at_init", "init", "env_at_exit", "written_at", "env_reads", "env_copies",
                    "env_reads_dropped", "startup_reads"):
            child.pop(key, None)
        # The parent's reads were the parent's: the child counts its own from here.
        _reads.clear()
        _walks.clear()
        _quiet.clear()
        _read_totals.update(copies=0, dropped=0)
        child["started_at"] = _now()
        child["forked_from"] = record["pid"]
        child["pid"] = os.getpid()
        child["ppid"] = os.getppid()
        child["stages"] = []
        child["sid"] = _sid()
        directory = os.path.dirname(_state["path"])
        _state["path"] = os.path.join(directory, "%s-%d.json" % (_safe_host(record["host"]), child["pid"]))
        _state["journal"] = None  # the child's journal starts with its own first record
        _state.pop("journal_broken_at", None)
        _state["record"] = child
    except Exception:
        _state["record"] = None


def _after_sitecustomize(module):
    site = sys.modules.get("site")
    if getattr(site, "ENABLE_USER_SITE", False) and "usercustomize" not in sys.modules:
        # site imports usercustomize next; the start record waits for it.
        for finder in sys.meta_path:
            if isinstance(finder, _Finder):
                finder.watch["usercustomize"] = lambda m: _start_record()
                return
    _start_record()


def _at_exit():
    try:
        if _state["record"] is None:
            return
        _start_record(late="exit")
        _state["record"]["env_at_exit"] = _redact_env(_environ_copy())
        _write("exit")
    except Exception:
        pass


# --- the journal and the module list ----------------------------------------------------

def _append(entry):
    """One JSON line appended to the journal; on failure journaling stops (the next record says when).

    A record is a picture at one moment, and a server still running writes no exit record. So once
    the start record is written, every variable read for the first time is also appended,
    synchronously, to `<host>-<pid>.journal` (the file opened, written and closed: no descriptor is
    kept that the program could close or reuse); whenever envsnap reads the journal, the reads it
    holds are every read up to that moment, for a process alive or gone. New top-level modules are
    appended the same way, at most once a second, from a gc callback (the program allocates while
    it imports: no thread, signal or timer of the probe's own); the journal says when its module
    lines were written, so "loaded" is claimed only up to then.
    """
    path = _state["journal"]
    if path is None:
        return
    import json

    try:
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | getattr(os, "O_CLOEXEC", 0), 0o600)
        try:
            line = json.dumps(_redacted(entry), ensure_ascii=False, default=repr) + "\n"
            os.write(fd, line.encode("utf-8", "surrogateescape"))
        finally:
            os.close(fd)
    except Exception:
        _state["journal"] = None
        _state["journal_broken_at"] = _now()


def _module_file(module):
    """Where a top-level module came from, without touching its attributes (a lazy module's __getattr__)."""
    import types

    if not isinstance(module, types.ModuleType):
        return "object"
    namespace = module.__dict__
    spec = namespace.get("__spec__")
    origin = getattr(spec, "origin", None) if spec is not None else None
    path = namespace.get("__file__") or origin
    if isinstance(path, str) and path not in ("built-in", "frozen"):
        return path
    if origin in ("built-in", "frozen"):
        return origin
    locations = getattr(spec, "submodule_search_locations", None) if spec is not None else None
    for location in list(locations or ()):
        return "namespace:%s" % location
    return "built-in" if namespace.get("__name__") in sys.builtin_module_names else "unknown"


def _module_files(names=None):
    """{top-level module name: file} of sys.modules (or of `names` only)."""
    out = {}
    for name, module in list(sys.modules.items()):
        if "." in name or (names is not None and name not in names):
            continue
        try:
            out[name] = _module_file(module)
        except Exception:
            out[name] = "unknown"
    return out


def _after_collection(phase, info):
    """gc callback: new top-level modules go to the journal, at most once every MODULES_EVERY_S."""
    if phase != "stop" or _state["journal"] is None:
        return
    try:
        count = len(sys.modules)
        if count == _modules["count"]:
            return
        import time

        now = time.monotonic()
        if now - _modules["checked"] < MODULES_EVERY_S:
            return
        _modules["checked"], _modules["count"] = now, count
        known = _modules["known"]
        new = [name for name in list(sys.modules) if "." not in name and name not in known]
        if new:
            known.update(new)
            _append({"t": _now(), "modules": _module_files(set(new))})
    except Exception:
        pass


# --- environment reads -----------------------------------------------------------------

def _environ_copy():
    """dict(os.environ) for the probe's own records: not counted as the program's copy."""
    from _thread import get_ident

    me = get_ident()
    _quiet.add(me)
    try:
        return dict(os.environ)
    finally:
        _quiet.discard(me)


def _track_reads():
    """Wrap os._Environ's __getitem__ and __iter__ (once) so reads of os.environ are counted.

    The class is patched in place rather than os.environ swapped for another object:
    `from os import environ` elsewhere, type checks, copy/pickle (which name the class)
    and putenv on assignment all keep working unchanged. Only os.environ and os.environb
    are counted; other instances of the class (copy.copy of os.environ) pass straight
    through. The wrappers never raise anything the original would not have raised.

    Every explicit read goes through `__getitem__`: `os.environ[k]`, `.get(k)` and `k in os.environ`
    (collections.abc.Mapping's get/__contains__), `os.getenv(k)` (environ.get), setdefault, pop.
    Each such read counts once for its name, set or not. A walk over the whole environment --
    dict(os.environ), .copy(), .items(), .values(), {**os.environ}, an environment handed to
    subprocess -- is not a read of every variable: `__iter__` hands out the keys and the lookups
    that follow in the same order, in the same thread, are counted as one "copy". Lookups that
    break the order end the walk (the keys looked up so far then count as reads). The probe's own
    copies are not counted. C code that calls getenv() (NCCL, CUDA, OpenMP, glibc) is not seen
    here: "not read by Python" never means "not read".
    """
    cls = type(os.environ)
    if getattr(cls.__getitem__, "_envsnap_probe", False):
        return
    from _thread import get_ident

    environ = os.environ
    environb = getattr(os, "environb", None)
    get_item = cls.__getitem__
    iterate = cls.__iter__
    reads, walks, quiet, totals = _reads, _walks, _quiet, _read_totals

    def count(key):
        if type(key) is bytes:
            key = key.decode(sys.getfilesystemencoding(), "surrogateescape")
        if key == PROBE_ENV:
            return  # the .pth line's own test (site.py may run a .pth file twice: venv and main)
        if len(key) > MAX_NAME_CHARS:
            key = key[:MAX_NAME_CHARS]
        if key in reads:
            reads[key] += 1
        elif len(reads) < MAX_READ_NAMES:
            reads[key] = 1
            if _state["journal"] is not None:
                _append({"t": _now(), "read": key})
        else:
            totals["dropped"] += 1

    def note(key):
        try:
            if walks or quiet:
                me = get_ident()
                if me in quiet:
                    return
                walk = walks.get(me)
                if walk is not None:
                    keys, done = walk
                    if done < len(keys) and keys[done] == key:
                        done += 1
                        if done == len(keys):
                            del walks[me]
                            totals["copies"] += 1
                        else:
                            walk[1] = done
                        return
                    # Not the next key of the walk: the walk is over, and what it had looked up
                    # so far was looked at by the program (a loop that stopped early).
                    del walks[me]
                    for earlier in keys[:done]:
                        count(earlier)
            count(key)
        except Exception:
            pass

    def __getitem__(self, key):
        # A key of the wrong type (bytes for os.environ) makes the original raise TypeError: no read.
        if self is environ:
            if type(key) is str:
                if key in reads and not walks and not quiet:
                    reads[key] += 1  # the common case, a name read before: no call
                else:
                    note(key)
        elif self is environb and type(key) is bytes:
            note(key)
        return get_item(self, key)

    def walk(self):
        keys = list(iterate(self))  # at the first next(), as the original takes its key list
        try:
            me = get_ident()
            if keys and me not in quiet:
                walks[me] = [keys, 0]
        except Exception:
            pass
        for key in keys:
            yield key

    def __iter__(self):
        if self is environ or self is environb:
            return walk(self)
        return iterate(self)

    for wrapper, original in ((__getitem__, get_item), (__iter__, iterate)):
        wrapper.__name__ = original.__name__
        wrapper.__qualname__ = getattr(original, "__qualname__", original.__name__)
        wrapper.__doc__ = original.__doc__
        wrapper._envsnap_probe = True
        wrapper.__wrapped__ = original
    cls.__getitem__ = __getitem__
    cls.__iter__ = __iter__


# --- files opened for reading -----------------------------------------------------------

MAX_OPENED = 1024  # distinct paths a process records; more are counted in "files_opened_dropped"
MAX_PATH_CHARS = 4096
# Opens that say nothing about settings: the kernel's views and devices, and imported code (byte code
# caches and sources: the module list already says which file each module came from).
_SKIP_PREFIXES = ("/proc/", "/sys/", "/dev/")
_SKIP_SUFFIXES = (".pyc", ".py")
_opened = {}  # type: dict  # path -> when first opened (epoch s), in the order opened
_opened_totals = {"dropped": 0}


def _track_opens(probe_dir):
    """Record which files the process's Python code opened for reading (PEP 578 audit hook, event "open").

    The hook sees every open() / io.open / os.open / io.open_code call with its path, mode and flags; it
    keeps read-only opens of paths (not descriptors), each once, at most MAX_OPENED, and leaves out /proc,
    /sys, /dev, imported code (.py, .pyc) and the probe's own directory. Cheap on purpose: an event that is
    not "open" returns at the first comparison, a path seen before at one dict lookup. A new path is also
    appended to the journal (as reads are). C code's opens (fopen in a library) are not seen here: envsnap
    samples /proc/PID/fd for those. Whether the path is a regular file is left to envsnap (a stat per open
    would cost the program). An audit hook cannot be removed: it stays for the life of the process. Cost:
    one Python call per audit event of any kind, ~0.4-0.8 us on a loaded 2-core VM (sys._getframe: 0.13 ->
    0.5-0.9 us).
    """
    add_hook = getattr(sys, "addaudithook", None)
    if add_hook is None or _opened_totals.get("hooked"):
        return
    _opened_totals["hooked"] = True
    opened, totals = _opened, _opened_totals
    own = os.path.join(probe_dir, "")
    skip_prefixes = _SKIP_PREFIXES + (own,)
    write_flags = os.O_WRONLY | os.O_RDWR
    fspath = os.fspath

    def hook(event, args):
        if event != "open":
            return
        try:
            path, mode, flags = args
            if path.__class__ is not str:
                if isinstance(path, int):
                    return  # a descriptor: opened earlier, by path or not
                path = fspath(path)
                if isinstance(path, bytes):
                    path = path.decode(sys.getfilesystemencoding(), "surrogateescape")
            if path in opened:
                return
            if mode is None:
                if flags & write_flags:
                    return
            elif "w" in mode or "a" in mode or "x" in mode or "+" in mode:
                return
            if not path.startswith("/"):
                path = os.path.abspath(path)
                if path in opened:
                    return
            if path.startswith(skip_prefixes) or path.endswith(_SKIP_SUFFIXES):
                return
            if len(opened) >= MAX_OPENED:
                totals["dropped"] += 1
                return
            now = _now()
            opened[path[:MAX_PATH_CHARS]] = now
            if _state["journal"] is not None:
                _append({"t": now, "opened": path[:MAX_PATH_CHARS]})
        except Exception:
            pass

    add_hook(hook)
    if hasattr(os, "register_at_fork"):
        os.register_at_fork(after_in_child=_opens_after_fork)


def _opens_after_fork():
    """A forked child records its own opens (the parent's stay the parent's)."""
    _opened.clear()
    _opened_totals["dropped"] = 0


def _opens_into(record):
    """The opens recorded so far into a record: {"files_opened": {path: first opened}, "files_opened_dropped"}."""
    if not _opened_totals.get("hooked"):
        return
    record["files_opened"] = dict(_opened)
    if _opened_totals["dropped"]:
        record["files_opened_dropped"] = _opened_totals["dropped"]
    else:
        record.pop("files_opened_dropped", None)


# --- torch.distributed -----------------------------------------------------------------

def _after_torch_distributed(module):
    if module is None:
        return
    wrapped = None
    original = getattr(module, "init_process_group", None)
    if callable(original):
        wrapped = _wrap_init(original)
        module.init_process_group = wrapped
    c10d = sys.modules.get("torch.distributed.distributed_c10d")
    if c10d is not None and wrapped is not None and getattr(c10d, "init_process_group", None) is original:
        c10d.init_process_group = wrapped


def _wrap_init(original):
    if getattr(original, "_envsnap_probe", False):
        return original
    import functools

    @functools.wraps(original)
    def init_process_group(*args, **kwargs):
        try:
            env = _environ_copy()
        except Exception:
            env = None
        error = None
        try:
            return original(*args, **kwargs)
        except BaseException as exc:
            error = "%s: %s" % (type(exc).__name__, exc)
            raise
        finally:
            try:
                _record_init(env, args, kwargs, error)
            except Exception:
                pass

    init_process_group._envsnap_probe = True
    return init_process_group


def _record_init(env, args, kwargs, error):
    record = _state["record"]
    if record is None:
        return
    _start_record(late="init_process_group")
    dist = sys.modules.get("torch.distributed")
    init = {"calls": record.get("init", {}).get("calls", 0) + 1}
    backend = kwargs.get("backend", args[0] if args else None)
    init["backend"] = None if backend is None else str(backend)
    if error is not None:
        init["error"] = error[:500]
    try:
        if dist is not None and dist.is_initialized():
            init["rank"] = dist.get_rank()
            init["world_size"] = dist.get_world_size()
            init["backend"] = str(dist.get_backend())
    except Exception:
        pass
    init["nccl_version"] = _nccl_version(init.get("backend"))
    record["init"] = init
    if env is not None:
        record["env_at_init"] = _redact_env(env)
    _write("init")


def _nccl_version(backend):
    """torch's NCCL version, asked only when NCCL is the backend (then it is loaded anyway)."""
    if not backend or "nccl" not in backend.lower():
        return None
    torch = sys.modules.get("torch")
    try:
        version = torch.cuda.nccl.version()
    except Exception:
        return None
    if isinstance(version, tuple):
        return ".".join(str(v) for v in version)
    return str(version)


# --- the import hook -------------------------------------------------------------------

class _Finder(object):
    """A meta-path entry that finds nothing itself: it lets the real finder find a watched
    module and wraps its loader so that a callback runs once the module has executed."""

    def __init__(self):
        self.watch = {}

    def find_spec(self, fullname, path=None, target=None):
        callback = self.watch.pop(fullname, None) if self.watch else None
        if callback is None:
            if not self.watch:
                self._retire()
            return None
        spec = None
        try:
            for finder in list(sys.meta_path):
                if finder is self or not hasattr(finder, "find_spec"):
                    continue
                spec = finder.find_spec(fullname, path, target)
                if spec is not None:
                    break
        except Exception:
            spec = None
        if spec is None or spec.loader is None or not hasattr(spec.loader, "exec_module"):
            _call(callback, None)  # not found (no sitecustomize): the moment has come anyway
            return None
        spec.loader = _AfterLoader(spec.loader, callback)
        return spec

    def _retire(self):
        try:
            sys.meta_path.remove(self)
        except ValueError:
            pass


class _AfterLoader(object):
    """Delegates everything to the real loader; calls back after exec_module, then steps aside."""

    def __init__(self, real, callback):
        self._real = real
        self._callback = callback

    def __getattr__(self, name):
        return getattr(self._real, name)

    def create_module(self, spec):
        create = getattr(self._real, "create_module", None)
        return create(spec) if create is not None else None

    def exec_module(self, module):
        try:
            self._real.exec_module(module)
        finally:
            if getattr(module, "__loader__", None) is self:
                module.__loader__ = self._real
            spec = getattr(module, "__spec__", None)
            if spec is not None and spec.loader is self:
                spec.loader = self._real
            _call(self._callback, module)


def _call(callback, module):
    try:
        callback(module)
    except Exception:
        pass
