"""Shared material for the hardening tests: the secrets corpus, snapshot builders, mutators.

The secret values are generated (seeded, so they are stable) rather than written out:
no credential-shaped literal lives in the repository, where a secret scanner would flag
it, and each value has a random core that a test can look for in any output, even after
JSON escaping or a partial (prefix-only) redaction.
"""
from __future__ import annotations

import base64
import copy
import hashlib
import json
import os
import random
import string
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Dict, Iterator, List, Optional, Tuple

REPO_ROOT = Path(__file__).resolve().parent.parent.parent

_ALNUM = string.ascii_letters + string.digits
_UPPER = string.ascii_uppercase + string.digits
_HEX = "0123456789abcdef"
_B64URL = _ALNUM + "-_"
_B64 = _ALNUM + "+/"


def _gen(seed: str, n: int, alphabet: str = _ALNUM) -> str:
    rnd = random.Random(hashlib.sha256(seed.encode()).digest())
    return "".join(rnd.choice(alphabet) for _ in range(n))


@dataclass(frozen=True)
class Secret:
    """One secret shape: a variable name it typically lives under, its value, and its random core.

    `self_identifying`: the value alone gives it away (a prefix, a structure), so it must be
    caught under any name, in free text and in JSON. Otherwise (a bare 40-char key, a
    password) only its context can: the name of the variable, flag or JSON key.
    """

    shape: str
    name: str
    value: str
    core: str
    self_identifying: bool = True
    flag: str = ""

    def windows(self) -> List[str]:
        """Pieces of the core that must never appear in any output (start, middle, end)."""
        core = self.core
        width = min(10, len(core))
        picks = {core[:width], core[len(core) // 2 - width // 2:len(core) // 2 - width // 2 + width], core[-width:]}
        return sorted(p for p in picks if len(p) >= 6)

    def leaked_in(self, text: str) -> bool:
        return self.value in text or any(w in text for w in self.windows())


def _s(shape: str, name: str, prefix: str, core_len: int, alphabet: str = _ALNUM, suffix: str = "",
       self_identifying: bool = True, flag: str = "") -> Secret:
    core = _gen(shape, core_len, alphabet)
    return Secret(shape, name, prefix + core + suffix, core, self_identifying, flag)


def _jwt() -> Secret:
    def b64(obj: Any) -> str:
        return base64.urlsafe_b64encode(json.dumps(obj).encode()).decode().rstrip("=")

    payload = b64({"sub": _gen("jwt-sub", 12), "iat": 1700000000})
    sig = _gen("jwt-sig", 43, _B64URL)
    return Secret("jwt", "SESSION_JWT", b64({"alg": "HS256", "typ": "JWT"}) + "." + payload + "." + sig,
                  payload[-14:] + "." + sig)


def _pem(shape: str, kind: str) -> Secret:
    core = _gen(shape, 64 * 5, _B64)
    body = "\n".join(core[i:i + 64] for i in range(0, len(core), 64))
    value = f"-----BEGIN {kind}-----\n{body}\n-----END {kind}-----\n"
    return Secret(shape, "TLS_KEY_PEM", value, core[:64])


def _gcp_service_account() -> Secret:
    key = _pem("gcp-sa-key", "PRIVATE KEY")
    key_id = _gen("gcp-sa-key-id", 40, _HEX)
    doc = {"type": "service_account", "project_id": "demo-project", "private_key_id": key_id,
           "private_key": key.value, "client_email": "svc@demo-project.iam.gserviceaccount.com"}
    return Secret("gcp_service_account_json", "GOOGLE_CREDENTIALS_JSON", json.dumps(doc), key.core)


def _azure_conn() -> Secret:
    key = _gen("azure-account-key", 86, _B64) + "=="
    value = f"DefaultEndpointsProtocol=https;AccountName=demoacct;AccountKey={key};EndpointSuffix=core.windows.net"
    return Secret("azure_storage_connection_string", "AZURE_STORAGE_CONNECTION_STRING", value, key[:-2])


def _azure_sas() -> Secret:
    sig = _gen("azure-sas", 40, _ALNUM) + "%2B" + _gen("azure-sas2", 8) + "%3D"
    value = ("https://demoacct.blob.core.windows.net/models/w.bin?sv=2022-11-02&ss=b&srt=o&sp=r"
             f"&se=2030-01-01T00%3A00%3A00Z&sig={sig}")
    return Secret("azure_sas_url", "MODEL_BLOB_URL", value, sig[:40])


def _basic_auth() -> Secret:
    raw = "deploy:" + _gen("basic-pw", 18)
    enc = base64.b64encode(raw.encode()).decode()
    return Secret("http_basic_auth_header", "EXTRA_HEADER", "Authorization: Basic " + enc, enc)


def _url(shape: str, name: str, template: str, core_len: int) -> Secret:
    core = _gen(shape, core_len)
    return Secret(shape, name, template.format(core), core)


def build_corpus() -> List[Secret]:
    c = [
        # Cloud providers
        _s("aws_access_key_id", "AWS_ACCESS_KEY_ID", "AKIA", 16, _UPPER),
        _s("aws_sts_access_key_id", "AWS_ACCESS_KEY_ID_STS", "ASIA", 16, _UPPER),
        _s("aws_secret_access_key", "AWS_SECRET_ACCESS_KEY", "", 40, _B64, self_identifying=False,
           flag="--aws-secret-access-key"),
        _s("aws_session_token", "AWS_SESSION_TOKEN", "FwoGZXIvYXdzE", 120, _B64, self_identifying=False,
           flag="--session-token"),
        _s("gcp_api_key", "GOOGLE_API_KEY", "AIza", 35, _B64URL),
        _s("gcp_oauth_access_token", "GCLOUD_ACCESS", "ya29.", 80, _B64URL),
        _s("gcp_oauth_client_secret", "GOOGLE_OAUTH_CLIENT", "GOCSPX-", 28, _B64URL),
        _gcp_service_account(),
        _azure_conn(),
        _azure_sas(),
        Secret("azure_client_secret", "AZURE_CLIENT_SECRET",
               _gen("az-cs-a", 3) + "8Q~" + _gen("az-cs", 34, _ALNUM + "_-.~"), _gen("az-cs", 34, _ALNUM + "_-.~")),
        # Hosting / ML services
        _s("huggingface_token", "HF_TOKEN", "hf_", 34, string.ascii_letters),
        _s("huggingface_org_token", "HF_ORG", "api_org_", 34, string.ascii_letters),
        _s("openai_project_key", "OPENAI_API_KEY", "sk-proj-", 120, _B64URL),
        _s("openai_legacy_key", "OPENAI_KEY_OLD", "sk-", 48),
        _s("anthropic_key", "ANTHROPIC_API_KEY", "sk-ant-api03-", 93, _B64URL, suffix="AA"),
        _s("github_classic_pat", "GITHUB_TOKEN", "ghp_", 36),
        _s("github_oauth_token", "GH_OAUTH", "gho_", 36),
        _s("github_fine_grained_pat", "GH_PAT", "github_pat_11", 80, _ALNUM + "_"),
        _s("gitlab_pat", "GITLAB_TOKEN", "glpat-", 20, _B64URL),
        _s("slack_bot_token", "SLACK_BOT", "xoxb-2849-3857-", 24),
        _url("slack_webhook_url", "ALERTS_HOOK", "https://hooks.slack.com/services/T0A1B2C3D/B0A1B2C3D/{}", 24),
        _s("stripe_live_secret", "STRIPE_KEY", "sk_live_", 32),
        _s("stripe_restricted_key", "STRIPE_RK", "rk_live_", 32),
        _s("stripe_webhook_secret", "STRIPE_WH", "whsec_", 32),
        _s("npm_token", "NPM_TOKEN", "npm_", 36),
        _s("pypi_token", "TWINE_PASSWORD", "pypi-AgEIcHlwaS5vcmc", 70, _B64URL),
        _s("wandb_api_key", "WANDB_API_KEY", "", 40, _HEX, self_identifying=False, flag="--wandb-key"),
        _s("replicate_token", "REPLICATE", "r8_", 37),
        _s("groq_key", "GROQ", "gsk_", 52),
        _s("databricks_token", "DATABRICKS_HOST_TOKEN", "dapi", 32, _HEX),
        _s("docker_hub_pat", "DOCKER_PAT", "dckr_pat_", 27, _B64URL),
        _s("vault_token", "VAULT_TOKEN", "hvs.", 90, _B64URL),
        _s("digitalocean_token", "DO_PAT", "dop_v1_", 64, _HEX),
        _s("sendgrid_key", "SENDGRID", "SG." + _gen("sg-a", 22, _B64URL) + ".", 43, _B64URL),
        _s("langsmith_key", "LANGCHAIN_KEY", "lsv2_pt_", 32, _HEX, suffix="_" + _gen("ls2", 10, _HEX)),
        _s("telegram_bot_token", "TG_BOT", "7012345678:AA", 33, _B64URL),
        _s("age_secret_key", "AGE_IDENTITY", "AGE-SECRET-KEY-1", 58, _UPPER),
        # Tokens and key material
        _jwt(),
        _pem("pem_rsa_private_key", "RSA PRIVATE KEY"),
        _pem("pem_openssh_private_key", "OPENSSH PRIVATE KEY"),
        _pem("pem_pkcs8_encrypted_key", "ENCRYPTED PRIVATE KEY"),
        # Credentials in URLs and headers
        _url("url_postgres_password", "DATABASE_URL", "postgresql://admin:{}@db.internal:5432/prod", 20),
        _url("url_redis_empty_user", "CACHE_URL", "redis://:{}@cache.internal:6379/0", 24),
        _url("url_https_user_password", "PIP_INDEX_URL", "https://ci-bot:{}@pypi.internal.example/simple", 22),
        _url("url_password_with_at", "MIRROR_URL", "https://bob:p@ss{}@mirror.example/x", 16),
        _url("bearer_header", "CURL_HEADER", "Authorization: Bearer {}", 40),
        _basic_auth(),
        # Context-only secrets: a name or flag is all that marks them
        _s("password_env", "PGPASSWORD", "", 18, self_identifying=False, flag="--password"),
        _s("mysql_pwd", "MYSQL_PWD", "", 16, self_identifying=False, flag="--db-password"),
        _s("generic_api_key_flag", "SGLANG_API_KEY", "", 32, self_identifying=False, flag="--api-key"),
        _s("admin_api_key_flag", "ADMIN_KEY", "", 32, self_identifying=False, flag="--admin-api-key"),
        _s("kaggle_key", "KAGGLE_KEY", "", 32, _HEX, self_identifying=False, flag="--kaggle-key"),
        _s("cohere_key", "COHERE_API_KEY", "", 40, self_identifying=False, flag="--cohere-api-key"),
        _s("hf_hub_token_flag", "HUGGING_FACE_HUB_TOKEN", "", 30, self_identifying=False, flag="--hf-token"),
        _s("client_secret_flag", "OIDC_CLIENT_SECRET", "", 30, self_identifying=False, flag="--client-secret"),
    ]
    names = [s.shape for s in c]
    assert len(names) == len(set(names)), "duplicate shape ids"
    return c


CORPUS = build_corpus()
SELF_IDENTIFYING = [s for s in CORPUS if s.self_identifying]

# Performance variables that must stay visible (no false positive may hide them).
PERF_VARS = {
    "NCCL_PROTO": "Simple", "NCCL_ALGO": "Ring,Tree", "NCCL_IB_HCA": "mlx5_0:1,mlx5_1:1",
    "NCCL_SOCKET_IFNAME": "eth0", "NCCL_P2P_LEVEL": "NVL", "NCCL_NVLS_ENABLE": "0", "NCCL_CUMEM_ENABLE": "1",
    "NCCL_DEBUG": "INFO", "NCCL_IB_GID_INDEX": "3", "NCCL_NET_GDR_LEVEL": "PHB", "NCCL_MIN_NCHANNELS": "16",
    "NCCL_IB_PKEY": "0", "NCCL_IB_TIMEOUT": "22", "NCCL_DEBUG_SUBSYS": "INIT,ENV",
    "CUDA_VISIBLE_DEVICES": "0,1,2,3", "CUDA_DEVICE_MAX_CONNECTIONS": "1", "CUDA_LAUNCH_BLOCKING": "0",
    "CUDA_MODULE_LOADING": "LAZY", "CUDA_HOME": "/usr/local/cuda-12.4",
    "OMP_NUM_THREADS": "8", "OMP_PROC_BIND": "close", "MKL_NUM_THREADS": "4",
    "PYTORCH_CUDA_ALLOC_CONF": "expandable_segments:True,max_split_size_mb:512",
    "PYTORCH_NVML_BASED_CUDA_CHECK": "1", "TORCH_NCCL_ASYNC_ERROR_HANDLING": "1", "TORCH_CUDA_ARCH_LIST": "9.0",
    "TORCHINDUCTOR_CACHE_DIR": "/tmp/inductor", "TORCH_COMPILE_DEBUG": "0", "TORCH_NCCL_BLOCKING_WAIT": "0",
    "TORCH_NCCL_AVOID_RECORD_STREAMS": "1", "SGLANG_ENABLE_TORCH_COMPILE": "1",
    "SGLANG_TORCH_PROFILER_DIR": "/tmp/prof", "SGLANG_SET_CPU_AFFINITY": "1", "SGLANG_DISABLE_CUDNN_CHECK": "1",
    "SGLANG_ENABLE_JIT_DEEPGEMM": "0", "SGLANG_IS_IN_CI": "false", "TOKENIZERS_PARALLELISM": "false",
    "HF_HUB_OFFLINE": "1", "HF_HOME": "/data/hf", "HF_HUB_ENABLE_HF_TRANSFER": "1", "TRANSFORMERS_OFFLINE": "1",
    "PYTHONHASHSEED": "0", "MALLOC_ARENA_MAX": "2", "NVIDIA_TF32_OVERRIDE": "0",
    "CUBLAS_WORKSPACE_CONFIG": ":4096:8", "FLASHINFER_WORKSPACE_BASE": "/tmp/fi",
    "NCCL_TOPO_FILE": "/etc/nccl/topo.xml", "MAX_JOBS": "8", "KEYTIMEOUT": "1",
    "GPU_MAX_HW_QUEUES": "2", "SESSION_MANAGER": "local/host:@/tmp/.ICE-unix/1", "PASSTHROUGH": "1",
}
# Sub-strings the perf corpus must not lose (a false positive on a value shape would).
PERF_ARGV = ["python3", "-m", "sglang.launch_server", "--model-path", "/models/Llama-3.1-8B-Instruct",
             "--tp-size", "8", "--max-total-tokens", "65536", "--tokenizer-path", "/models/tok",
             "--speculative-num-draft-tokens", "4", "--attention-backend", "fa3", "--port", "30000"]


def secret_env(neutral: bool = True) -> Dict[str, str]:
    """The corpus as environment variables: each under its own name, and the self-identifying
    ones also under a neutral name, and inside a JSON string under its name."""
    env: Dict[str, str] = {}
    for i, s in enumerate(CORPUS):
        env[s.name] = s.value
        if neutral and s.self_identifying:
            env[f"ENVSNAP_HT_PLAIN_{i}"] = s.value
    env["ENVSNAP_HT_JSON"] = json.dumps({s.name.lower(): s.value for s in CORPUS})
    return env


def secret_argv() -> List[str]:
    """A command line carrying every flag-shaped secret (both `--flag V` and `--flag=V`) and
    every self-identifying value as a bare argument."""
    argv: List[str] = []
    for i, s in enumerate(CORPUS):
        if s.flag:
            if i % 2:
                argv += [s.flag, s.value]
            else:
                argv.append(f"{s.flag}={s.value}")
        elif "\n" not in s.value:
            argv.append(s.value)
    return argv


def find_leaks(text: str, corpus: Optional[List[Secret]] = None) -> List[str]:
    return [s.shape for s in (corpus or CORPUS) if s.leaked_in(text)]


def walk_strings(obj: Any) -> Iterator[str]:
    """Every key and string value of a JSON-like structure."""
    if isinstance(obj, dict):
        for k, v in obj.items():
            yield str(k)
            yield from walk_strings(v)
    elif isinstance(obj, list):
        for v in obj:
            yield from walk_strings(v)
    elif isinstance(obj, str):
        yield obj


# --- snapshots ---------------------------------------------------------------------------------------

def run_cli(*args: str, env: Optional[Dict[str, str]] = None, timeout: float = 120, cwd: Optional[str] = None,
            input_text: Optional[str] = None) -> subprocess.CompletedProcess:
    full = dict(os.environ)
    full.pop("ENVSNAP_DEBUG", None)
    if env:
        full.update(env)
    return subprocess.run([sys.executable, "-m", "envsnap", *map(str, args)], capture_output=True, text=True, env=full,
                          cwd=cwd, timeout=timeout, input=input_text)


def rich_snapshot(label: str = "good", seed: int = 0, *, packages: int = 40, env_vars: int = 60,
                  integrity: int = 20, workers: int = 2, worker_vars: int = 30, metric: float = 100.0,
                  runs: int = 3) -> Dict[str, Any]:
    """A snapshot with every section in its contract shape (see /tmp contract), sized by the arguments.

    Used where a real capture cannot reach a size (20k integrity entries, 8 workers): the
    shapes follow the section layouts of model/schema.py, values vary with `seed`.
    """
    rnd = random.Random(seed)
    env = {f"APP_VAR_{i}": f"v{i}" for i in range(env_vars)}
    env.update({"NCCL_PROTO": "Simple" if seed % 2 else "LL128", "OMP_NUM_THREADS": str(4 + seed % 3),
                "CUDA_VISIBLE_DEVICES": "0,1,2,3,4,5,6,7", "HF_TOKEN": "redacted:0a1b2c3d"})
    dists = {}
    for i in range(packages):
        name = f"pkg-{i}"
        dists[name] = {"name": name, "version": f"1.{i}.{(seed if i % 7 == 0 else 0)}", "installer": "pip",
                       "location": "/venv/lib/python3.11/site-packages",
                       "origin": {"kind": "index", "editable": False}}
    dists["torch"] = {"name": "torch", "version": "2.13.0" if seed % 2 == 0 else "2.12.1", "installer": "pip",
                      "location": "/venv/lib/python3.11/site-packages", "origin": {"kind": "index", "editable": False}}
    modified = {}
    for i in range(integrity):
        modified[f"pkg_{i % max(1, packages)}/mod_{i}.py"] = {
            "dist": f"pkg-{i % max(1, packages)}", "recorded_sha256": f"{i:064x}",
            "actual_sha256": f"{(i + seed * 7919):064x}", "recorded_size": 100 + i, "actual_size": 100 + i + seed}
    procs = {"sglang-main": {"pid": 1000 + seed, "ppid": 1, "parent_key": None, "title": "python3 -m sglang.launch_server",
                             "cmdline": ["python3", "-m", "sglang.launch_server", "--tp-size", str(workers)],
                             "role": {"kind": "main"}, "status": "ok", "environ_status": "ok", "environ": dict(env),
                             "num_threads": 10, "nice": 0, "cpu_affinity": list(range(8))}}
    for w in range(workers):
        wenv = {f"WORKER_VAR_{i}": f"{i}-{(seed if i % 50 == 0 else 0)}" for i in range(worker_vars)}
        wenv["NCCL_PROTO"] = env["NCCL_PROTO"]
        procs[f"scheduler_TP{w}"] = {
            "pid": 2000 + w + seed, "ppid": 1000 + seed, "parent_key": "sglang-main", "title": f"sglang::scheduler_TP{w}",
            "cmdline": ["python3", "-c", "from multiprocessing.spawn import spawn_main"], "role": {"kind": "scheduler", "tp": w},
            "status": "ok", "environ_status": "ok", "environ": wenv, "num_threads": 40, "nice": 0,
            "cpu_affinity": [w], "divergence": {"added": {"LOCAL_RANK": str(w)}, "removed": [], "changed": {}}}
    gpus = {}
    for g in range(max(1, workers)):
        gpus[str(g)] = {"name": "NVIDIA H200", "uuid": f"GPU-{g:08d}", "pci_bus_id": f"00000000:{g + 0x18:02X}:00.0",
                        "memory": {"total_bytes": 150754820096}, "persistence_mode": "Enabled",
                        "compute_mode": "Default", "mig_mode": "NotSupported",
                        "power": {"limit_w": 700.0 - (seed % 2) * 100, "default_limit_w": 700.0},
                        "clocks": {"current": {"sm": 1980}, "max": {"sm": 1980}, "application": {"sm": 1980}},
                        "clock_event_reasons": [], "performance_state": "P0",
                        "pcie": {"current_gen": 5, "max_gen": 5, "current_width": 16, "max_width": 16},
                        "nvlink": {"0": {"state": "Enabled"}}, "numa_node": 0}
    run_list = []
    for r in range(runs):
        value = metric * (1 + (rnd.random() - 0.5) * 0.02)
        run_list.append({"ok": True, "exit_code": 0, "duration_s": 1.0 + r, "started": "2026-01-01T00:00:00Z",
                         "metrics": {"output_throughput": value, "accept_length": 3.1}, "output_tail": "done",
                         "command": ["bench"], "source": "run", "parsers": ["json"]})
    sections = {
        "host": {"status": "ok", "elapsed_s": 0.1, "data": {
            "os": {"name": "Debian"}, "kernel": "6.1", "cpu": {"model": "EPYC", "logical": 192, "physical": 96,
                                                               "governor": "performance" if seed % 2 == 0 else "powersave"},
            "numa_nodes": 2, "memory": {"total_bytes": 2 << 40}, "ulimits": {"memlock": "unlimited", "nofile": 1048576}}},
        "python": {"status": "ok", "elapsed_s": 0.01, "data": {"executable": "/venv/bin/python", "version": "3.11.7",
                                                                "implementation": "cpython", "sys_path": ["/venv/lib"],
                                                                "env": {}, "startup_hooks": {}}},
        "packages": {"status": "ok", "elapsed_s": 0.5, "data": {
            "count": len(dists), "dists": dists,
            "integrity": {"mode": "py", "checked_files": 1000 + integrity, "modified": modified, "missing": {},
                          "rewritten_scripts": {}, "unhashable": {}, "errors": {}}}},
        "git": {"status": "ok", "elapsed_s": 0.1, "data": {"repos": {"/src/sglang": {
            "roles": ["editable:sglang"], "head": f"{seed:040x}", "branch": "main", "detached": False,
            "dirty": {"python/sglang/srt/x.py": {"status": "M", "sha256": f"{seed:064x}"}}, "untracked": {},
            "stash": {}}}}},
        "env": {"status": "ok", "elapsed_s": 0.0, "data": {"count": len(env), "vars": env}},
        "nvidia": {"status": "ok", "elapsed_s": 0.2, "data": {"driver_version": "570.86", "count": len(gpus),
                                                              "gpus": gpus, "source": "nvml"}},
        "torch": {"status": "ok", "elapsed_s": 0.0, "data": {"installed": True, "version": "2.13.0", "cuda": "12.8"}},
        "processes": {"status": "ok", "elapsed_s": 0.1, "data": {"processes": procs, "roots": ["sglang-main"],
                                                                 "errors": {}}},
        "files": {"status": "unavailable", "reason": "nothing to watch"},
    }
    return {"schema_version": 1, "envsnap_version": "0.1.0", "created": f"2026-01-0{1 + seed % 9}T00:00:00.000000Z",
            "label": label, "host": f"node{seed}", "redaction": "on", "sections": sections, "runs": run_list}


def wait_for(predicate, timeout: float = 10.0, step: float = 0.02) -> bool:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if predicate():
            return True
        time.sleep(step)
    return predicate()


# --- fuzzing -----------------------------------------------------------------------------------------

HUGE_VALUES: List[Any] = [
    10 ** 30, -(10 ** 30), 1e308, -1e308, 5e-324, 2 ** 63, -(2 ** 63) - 1, 0, -1, 1.5, True, False, None, "",
    "x" * 5000, "\x00", "\udcff", "\u202e\u200b", "💥", "redacted:0123abcd", [], {}, [None], {"": None},
    "NaN", "-", "../../etc/passwd", "{{ 7*7 }}", "<script>alert(1)</script>", "%s%n", "\\x00",
]
_BYTE_JUNK = [b"\x00", b"\xff", b"\xc3\x28", b"\xed\xa0\x80", b"\xef\xbb\xbf", b"\\u0000", b"\\ud800", b"]", b"}",
              b"{", b"[", b'"', b",", b":", b"1e999", b"-0", b"NaN", b"Infinity", b"null", b"\n", b"\r\n"]


def _paths(obj: Any, limit: int = 50000, max_depth: int = 40) -> list:
    """Paths to the nodes of a JSON tree (bounded in count and depth; no recursion)."""
    out: list = []
    stack = [((), obj)]
    while stack and len(out) < limit:
        prefix, node = stack.pop()
        out.append(prefix)
        if len(prefix) >= max_depth:
            continue
        if isinstance(node, dict):
            stack.extend((prefix + (k,), v) for k, v in node.items())
        elif isinstance(node, list):
            stack.extend((prefix + (i,), v) for i, v in enumerate(node[:50]))
    return out


def _get(obj: Any, path: tuple) -> Any:
    for p in path:
        obj = obj[p]
    return obj


def _deep(depth: int, leaf: Any = 1) -> Any:
    value: Any = leaf
    for i in range(depth):
        value = [value] if i % 2 else {"k": value}
    return value


def random_value(rnd: random.Random, depth: int = 0) -> Any:
    roll = rnd.random()
    if roll < 0.45 or depth > 2:
        return copy.deepcopy(rnd.choice(HUGE_VALUES))  # a fresh object: shared ones could form cycles
    if roll < 0.6:
        return _deep(rnd.choice([3, 50, 400]))
    if roll < 0.8:
        return {rnd.choice(["status", "data", "vars", "gpus", "dists", "0", "", "metrics", "env", "environ"]):
                random_value(rnd, depth + 1) for _ in range(rnd.randint(0, 3))}
    return [random_value(rnd, depth + 1) for _ in range(rnd.randint(0, 3))]


def mutate_tree(snap: Dict[str, Any], rnd: random.Random, rounds: int = 0) -> Dict[str, Any]:
    """A structural mutation: wrong types, huge numbers, deletions, unknown keys, odd versions.

    Always JSON-serialisable (a mutation nesting past json's own recursion limit is redone)."""
    for _ in range(20):
        tree = _mutate_tree_once(snap, rnd, rounds)
        try:
            json.dumps(tree)
            return tree
        except (RecursionError, ValueError):
            continue
    return json.loads(json.dumps(snap))


def _mutate_tree_once(snap: Dict[str, Any], rnd: random.Random, rounds: int = 0) -> Dict[str, Any]:
    snap = json.loads(json.dumps(snap))
    for _ in range(rounds or rnd.choice([1, 1, 1, 2, 3, 6])):
        paths = _paths(snap)
        path = rnd.choice(paths)
        kind = rnd.random()
        if not path:
            if kind < 0.5:
                snap["schema_version"] = rnd.choice([0, 2, 99, -1, "1", 1.0, None, True, 10 ** 40])
            else:
                snap[rnd.choice(["sections", "runs", "nodes", "label", "host", "created", "provenance",
                                 "redaction", "metric_directions", "run_session"])] = random_value(rnd)
            continue
        parent = _get(snap, path[:-1])
        key = path[-1]
        if kind < 0.55:
            parent[key] = random_value(rnd)
        elif kind < 0.7 and isinstance(parent, dict):
            del parent[key]
        elif kind < 0.8 and isinstance(parent, dict):
            parent[rnd.choice(["", "\x00", "💥", "__proto__", "constructor", "a.b.c", "0", key + "_x"])] = random_value(rnd)
        elif kind < 0.9:
            value = parent[key]
            if isinstance(value, str):
                parent[key] = rnd.choice(["", value * 50, value[::-1], "\udcff" + value, value + "\x00", str(10 ** 30)])
            elif isinstance(value, (int, float)) and not isinstance(value, bool):
                parent[key] = rnd.choice([value * 10 ** 30, -value, 0, 1e308, -1e308, 5e-324, str(value)])
            else:
                parent[key] = rnd.choice([None, str(value)[:50], [value], {"x": value}])
        else:
            parent[key] = _deep(rnd.choice([10, 200, 400]), parent[key])
    return snap


def mutate_bytes(data: bytes, rnd: random.Random) -> bytes:
    """A byte-level mutation of snapshot text: truncation, junk, NULs, non-UTF-8, duplicate keys..."""
    buf = bytearray(data)
    kind = rnd.randrange(11)
    if kind == 0 and buf:  # truncation
        return bytes(buf[:rnd.randrange(len(buf))])
    if kind == 1 and buf:  # flip bytes
        for _ in range(rnd.randint(1, 8)):
            i = rnd.randrange(len(buf))
            buf[i] = rnd.randrange(256)
        return bytes(buf)
    if kind == 2:  # insert junk
        for _ in range(rnd.randint(1, 4)):
            i = rnd.randrange(len(buf) + 1)
            buf[i:i] = rnd.choice(_BYTE_JUNK)
        return bytes(buf)
    if kind == 3 and buf:  # delete a chunk
        i = rnd.randrange(len(buf))
        del buf[i:i + rnd.randint(1, 200)]
        return bytes(buf)
    if kind == 4 and buf:  # duplicate a chunk
        i = rnd.randrange(len(buf))
        j = min(len(buf), i + rnd.randint(1, 300))
        buf[j:j] = buf[i:j]
        return bytes(buf)
    if kind == 5:  # duplicate key at top level
        text = data.decode("utf-8", "replace")
        return text.replace("{", '{"schema_version": 1, ', 1).encode() if text.startswith("{") else data
    if kind == 6:  # huge numbers
        text = data.decode("utf-8", "replace")
        for _ in range(3):
            text = text.replace(": 0", ": " + rnd.choice(["1e999", "-1e999", "9" * 5000, "1" + "0" * 400, "-0.0e-999"]), 1)
        return text.encode()
    if kind == 7:  # deep nesting
        depth = rnd.choice([100, 1000, 5000, 200000])
        return b"[" * depth + b"]" * (depth if rnd.random() < 0.5 else 0)
    if kind == 8:  # encodings
        return rnd.choice([data.decode("utf-8", "replace").encode("utf-16"), b"\xef\xbb\xbf" + data,
                           data.replace(b'"', b"'"), data + b"\x00", data + b"{}", b" " * 1000])
    if kind == 9:  # a different schema version
        text = data.decode("utf-8", "replace")
        return text.replace('"schema_version": 1', '"schema_version": ' + rnd.choice(
            ["2", "0", "-1", '"1"', "1.0", "null", "true", "[1]", "99999999999999999999"]), 1).encode()
    return rnd.choice([b"", b"null", b"[]", b"{}", b'{"schema_version": 1}', b"1", b'"x"', b"\x00" * 10,
                       b'{"schema_version": 1, "sections": []}', b'{"schema_version": 1, "runs": {}}',
                       b'{"schema_version": 1, "sections": {"env": {"status": "ok", "data": []}}}'])


class Consumers:
    """Everything that reads a loaded snapshot, run in-process; an exception other than
    EnvsnapError is a bug (the CLI would print `internal error`, exit 3)."""

    def __init__(self, partner: Dict[str, Any], html_every: int = 25):
        from envsnap.model import snapshot as snapshot_mod, store

        self.snapshot = snapshot_mod
        self.store = store
        self.partner = partner
        self.html_every = html_every
        self.calls = 0

    def run(self, snap: Dict[str, Any]) -> None:
        from envsnap.analysis import association, result as result_mod
        from envsnap.bisect import deltas
        from envsnap.errors import EnvsnapError
        from envsnap.model import merge
        from envsnap.render import show, text as text_mod

        self.calls += 1
        partner = self.partner

        def diff_both() -> None:
            for good, bad in ((partner, snap), (snap, partner)):
                result = result_mod.analyze(good, bad, include_volatile=self.calls % 2 == 0, good_file="g", bad_file="b",
                                            tables=True)
                json.dumps(result, sort_keys=True, allow_nan=False)
                text_mod.render_diff(result, verbose=True)
                if self.html_every and self.calls % self.html_every == 0:
                    from envsnap.render import html

                    html.render_report(result)

        def associate() -> None:
            text_mod.render_rank(association.associate([snap, partner, partner], ["a", "b", "c"]))

        steps = [
            lambda: show.render_show(snap, verbose=True),
            lambda: show.summary_line(snap, "x.json"),
            lambda: self.snapshot.flatten(snap),
            diff_both,
            lambda: self.store.dumps(merge.merge([snap, dict(partner, host="partner-host-x")], ["a", "b"],
                                                    "2026-01-01T00:00:00Z")),
            associate,
            lambda: deltas.collect_deltas(partner, snap, environ={}),
            lambda: deltas.collect_deltas(snap, partner, environ={}),
        ]
        for step in steps:
            try:
                step()
            except EnvsnapError as exc:  # a consumer's own one-line refusal (rank needs runs...)
                assert str(exc).strip() and "\n" not in str(exc).strip(), str(exc)


# --- snapshots generated from the shape table: everything they produce passes validate -------------

def shape_strategies():
    """Hypothesis strategies: (snapshot) built from the collectors' SECTION_SHAPES, so each one
    is a valid snapshot whose values are arbitrary within their types. A crash on one of
    them is a consumer's bug, not a loader's."""
    from hypothesis import strategies as st

    from envsnap.capture.collectors import SECTION_SHAPES
    from envsnap.model import snapshot as snapshot_mod

    words = st.sampled_from(["", "ok", "NotSupported", "redacted:0123abcd", "main", "scheduler", "M", "??", "gone",
                             "denied", "Simple", "LL128", "editable", "index", "vcs", "1.0", "2.13.0", "P0",
                             "sglang-main", "scheduler_TP0", "/a/b.py", "GPU0", "NV18", "X", "0", "-1", "nan", "inf",
                             "\x00", "é", "\u202e", "a" * 300])
    text = st.one_of(words, st.text(max_size=12))
    keys = st.one_of(st.sampled_from(["0", "1", "GPU0", "NCCL_PROTO", "HF_TOKEN", "torch", "sglang-main",
                                      "scheduler_TP0", "scheduler_TP1", "python-0", "/src/sglang", "a.py", "",
                                      "env.vars", "x.y", "sglang/srt/x.py"]), st.text(max_size=8))
    num = st.one_of(st.none(), st.integers(-(2 ** 63), 2 ** 63), st.floats(allow_nan=False, allow_infinity=False),
                    st.sampled_from([0, -1, 1, 0.5, 1e15, -1e15, 5e-324, 1e308]))
    scalar = st.one_of(st.none(), st.booleans(), text, num)
    json_any = st.recursive(scalar, lambda inner: st.one_of(st.lists(inner, max_size=3),
                                                           st.dictionaries(keys, inner, max_size=3)), max_leaves=8)

    def build(spec):
        if isinstance(spec, str):
            if spec == "str":
                return st.one_of(st.none(), text)
            if spec == "num":
                return num
            if spec == "int":
                return st.integers(-(2 ** 63), 2 ** 63)
            if spec == "scalar":
                return scalar
            if spec == "dict":
                return st.dictionaries(keys, json_any, max_size=4)
            return json_any
        if isinstance(spec, tuple):
            kind, inner = spec
            if kind == "map":
                return st.dictionaries(keys, build(inner), max_size=4)
            return st.lists(build(inner), max_size=4)
        return st.fixed_dictionaries({}, optional={k: build(v) for k, v in spec.items()})

    def section(name):
        shape = SECTION_SHAPES.get(name, "dict")
        return st.fixed_dictionaries({"status": st.sampled_from(snapshot_mod.SECTION_STATUSES)},
                                     optional={"data": build(shape), "reason": text, "error": text,
                                               "elapsed_s": st.floats(0, 1e6)})

    metric_names = st.one_of(st.sampled_from(["output_throughput", "accept_length", "verify_ms", "tok_s",
                                              "request_throughput", "mean_itl_ms", "median_ttft_ms", "cycle_ms",
                                              "gflops", "latency", "x"]), st.text(max_size=6))
    metric_value = st.one_of(st.floats(-1e15, 1e15, allow_nan=False), st.integers(-10 ** 12, 10 ** 12),
                             st.sampled_from([0.0, 1.0, 100.0, 1e-300]))
    run = st.fixed_dictionaries(
        {"metrics": st.dictionaries(metric_names, metric_value, max_size=3)},
        optional={"ok": st.one_of(st.booleans(), st.none()), "exit_code": num, "duration_s": num,
                  "started": text, "output_tail": text, "command": st.lists(text, max_size=3), "source": text,
                  "parsers": st.lists(text, max_size=2), "error": text, "note": text, "host": text})
    sections = st.fixed_dictionaries({}, optional={n: section(n) for n in SECTION_SHAPES})
    snap = st.fixed_dictionaries(
        {"schema_version": st.just(1), "sections": sections, "runs": st.lists(run, max_size=5)},
        optional={"label": st.one_of(st.none(), text), "host": st.one_of(st.none(), text),
                  "created": st.one_of(st.none(), text), "envsnap_version": text, "redaction": text,
                  "provenance": st.dictionaries(keys, json_any, max_size=3),
                  "metric_directions": st.dictionaries(metric_names, st.sampled_from(["higher", "lower", "x"]),
                                                       max_size=2)})
    return snap


# A tiny launcher between the test and the measured command: the command's own peak RSS
# (ru_maxrss from wait4) is inflated by whatever its parent had mapped when it forked, and a
# pytest process that ran the fuzzer holds hundreds of MiB. The launcher (python -S, ~10 MiB)
# forks the command instead, and reports its rusage as JSON on stdout.
_LAUNCHER = r"""
import json, os, subprocess, sys, time
start = time.monotonic()
with open(sys.argv[1], "wb") as err:
    proc = subprocess.Popen(sys.argv[2:], stdout=subprocess.DEVNULL, stderr=err)
    _, status, usage = os.wait4(proc.pid, 0)
print(json.dumps({"code": os.waitstatus_to_exitcode(status), "wall": time.monotonic() - start,
                  "peak_rss_kb": usage.ru_maxrss}))
"""


def run_measured(argv: List[str], err_path: Path, env: Optional[Dict[str, str]] = None,
                 timeout: float = 300) -> Tuple[int, str, float, int]:
    """(exit code, stderr, wall seconds, peak RSS KiB of the command alone)."""
    full = dict(os.environ)
    full.pop("ENVSNAP_DEBUG", None)
    full.update(env or {})
    result = subprocess.run([sys.executable, "-S", "-c", _LAUNCHER, str(err_path), *map(str, argv)], env=full,
                            capture_output=True, text=True, timeout=timeout)
    figures = json.loads(result.stdout.strip().splitlines()[-1])
    return figures["code"], err_path.read_text(errors="replace"), figures["wall"], figures["peak_rss_kb"]
