import json

import pytest

from envsnap import redact

SECRET_VALUES = [
    "hf_" + "a1B2c3D4e5F6g7H8i9J0kLmN",
    "sk-" + "proj-" + "Zz9Yy8Xx7Ww6Vv5Uu4Tt3",
    "sk-ant-" + "api03-Q1w2E3r4T5y6U7i8O9p0",
    "ghp_" + "0123456789abcdefghijABCDEFGHIJ0123",
    "github_pat_" + "11ABCDEFG0123456789_abcdefghij",
    "AKIA" + "IOSFODNN7EXAMPLE",
    "xoxb-" + "123456789012-abcdefABCDEF",
    "eyJhbGciOiJIUzI1NiJ9" + ".eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U",
    "-----BEGIN RSA PRIVATE KEY-----\nMIIEpAIBAAKCAQEA7\n-----END RSA PRIVATE KEY-----",
    "glpat-" + "abcdefghij0123456789",
    "AIza" + "SyA1234567890abcdefghijklmnopqrstu",
]


@pytest.mark.parametrize("value", SECRET_VALUES)
def test_credential_shapes_are_redacted_anywhere(value):
    for text in (value, f"prefix {value} suffix", f"X={value}", f'{{"v": "{value}"}}'):
        out = redact.redact_text(text)
        assert value not in out, out
        assert "redacted:" in out


@pytest.mark.parametrize("name", ["HF_TOKEN", "OPENAI_API_KEY", "AWS_SECRET_ACCESS_KEY", "PGPASSWORD",
                                  "MY_PASSWD", "GITHUB_TOKEN", "SESSION_COOKIE", "GOOGLE_APPLICATION_CREDENTIALS",
                                  "WANDB_API_KEY", "DB_AUTH", "SSH_PRIVATE_KEY"])
def test_secret_names(name):
    assert redact.is_secret_name(name)
    out = redact.redact_env({name: "plainvalue123"})
    assert out[name].startswith("redacted:") and "plainvalue123" not in out[name]


@pytest.mark.parametrize("name", ["NCCL_PROTO", "TOKENIZERS_PARALLELISM", "PWD", "HOME", "max_tokens",
                                  "CUDA_VISIBLE_DEVICES", "tokenizer_path"])
def test_non_secret_names_stay_visible(name):
    assert not redact.is_secret_name(name)
    assert redact.redact_env({name: "v"})[name] == "v"


def test_changed_secret_still_shows_as_changed():
    a = redact.redact_env({"HF_TOKEN": "one"})["HF_TOKEN"]
    b = redact.redact_env({"HF_TOKEN": "two"})["HF_TOKEN"]
    assert a != b and a == redact.redact_env({"HF_TOKEN": "one"})["HF_TOKEN"]


def test_command_lines_and_urls():
    argv = redact.redact_argv(["python", "-m", "sglang.launch_server", "--api-key", "abc123", "--password=pw9",
                               "--model-path", "/m"])
    assert "abc123" not in argv and all("pw9" not in a for a in argv)
    assert argv[-1] == "/m"
    text = redact.redact_text("git clone https://bob:hunter2@example.com/x.git --admin-api-key k3y MY_SECRET=s3")
    for secret in ("hunter2", "k3y", "s3 "):
        assert secret not in text + " "
    assert "example.com/x.git" in text


def test_scrub_cleans_undecodable_bytes_and_redacts_nested():
    out = redact.scrub({"a": ["x\udcff", {"API_KEY": "v"}]})
    assert out["a"][0] == "x\\xff"
    assert out["a"][1]["API_KEY"].startswith("redacted:")
    assert redact.scrub({"API_KEY": "v"}, redact=False) == {"API_KEY": "v"}


# Issue 36, "Secrets in clear text": each shape below reached a snapshot, a diff or a report on main.
# The values are built from parts so that no credential-shaped literal sits in the repository.
_PW = "Zq7" + "xV9/wK2"


@pytest.mark.parametrize("text, secret", [
    (f"git clone https://bob:{_PW}/b@host/x.git", f"{_PW}/b"),           # '/' in the password
    (f"  url: mysql://admin:{_PW}/x@db.internal:3306/app", _PW),         # the same in YAML
    (f"remote https://ci:{_PW}:x/y@git.example/r.git and more", _PW),
])
def test_url_userinfo_is_redacted_whatever_its_characters(text, secret):
    out = redact.redact_text(text)
    assert secret not in out and "redacted:" in out, out
    assert redact.redact_text(out) == out


def test_a_port_and_a_path_before_an_at_is_no_password():
    for text in ("git+https://git.example:8443/org/repo.git@v1.0", "pip install git+https://h:443/o/r@main"):
        assert redact.redact_text(text) == text


_INI = "Wx" + "8sT3kq"


@pytest.mark.parametrize("line", [
    f"password = {_INI}", f'token = "{_INI}"', f"aws_secret_access_key = {_INI}", f"pw: {_INI}",
    f"  api_key: '{_INI}'", f"DB_PASSWORD={_INI}", f"export API_KEY={_INI}", f'HF_TOKEN = "{_INI}"',
    f"+HF_TOKEN = '{_INI}'", f"-secret_key = {_INI}", f" client_secret = {_INI}",
    f"machine example.com login bob password {_INI}", f"password {_INI}", f"  passwd {_INI}",
    f"default login anon account {_INI}",
])
@pytest.mark.parametrize("path", ["cfg.ini", "pyproject.toml", "c.yaml", ".netrc", ".env", "run.sh", "x.patch",
                                  "settings.py"])
def test_named_values_in_config_code_and_patch_lines(line, path):
    if path.endswith(".py") and _INI + "'" not in line and _INI + '"' not in line:
        return  # in Python a bare name is a variable (`api_key = token`), never a value: the quoted lines only
    text = f"[section]\n{line}\nNCCL_PROTO = Simple\npath = /models/x\n"
    out = redact.redact_file_text(text, path)
    assert _INI not in out, (path, out)
    assert "NCCL_PROTO = Simple" in out and "path = /models/x" in out
    assert redact.redact_file_text(out, path) == out
    assert _INI not in redact.redact_text(line), line


def test_python_assignment_in_a_patch_as_its_export_hunk():
    patch = ("--- a/serve.py\n+++ b/serve.py\n@@ -1,2 +1,3 @@\n import os\n"
             f"+HF_TOKEN = \"{_INI}\"\n+os.environ['API_KEY'] = '{_INI}1'\n")
    for path in ("serve.py", "serve.patch", ""):
        out = redact.redact_file_text(patch, path)
        assert _INI not in out, (path, out)
        assert "import os" in out


@pytest.mark.parametrize("name", ["GITHUB_PAT", "ADMIN_PW", "DB_PW", "PAT", "MY_PASSCODE", "pw", "gitlab_pat",
                                  "SMTP_PASS", "SSHPASS", "DBPASS",
                                  "X_AUTH", "ROOT_PASSWD", "APP_SECRET", "SESSION_ID", "REFRESH_TOKEN", "adminPw",
                                  "githubPat", "dbPwd"])
def test_short_secret_words_are_secret_names(name):
    assert redact.is_secret_name(name), name
    assert redact.redact_env({name: _INI})[name].startswith("redacted:")
    assert _INI not in redact.redact_text(f"export {name}={_INI}")


@pytest.mark.parametrize("name", ["KEYBOARD_LAYOUT", "CUDA_VISIBLE_DEVICES", "NCCL_IB_PKEY", "OMP_NUM_THREADS",
                                  "PATH", "LD_LIBRARY_PATH", "PYTHONPATH", "NCCL_NET_PLUGIN", "pw_name", "PASSTHROUGH",
                                  "CUDA_CACHE_BYPASS", "TWOPASS_MODE", "getKey", "sessionManager", "xPath", "compat",
                                  "key", "sort_key", "COMPAT_MODE", "PATCH_LEVEL", "SPAWN_METHOD", "MAX_TOKENS"])
def test_words_that_contain_a_secret_word_stay_readable(name):
    assert not redact.is_secret_name(name), name
    assert redact.redact_env({name: "v1"})[name] == "v1"
    assert redact.scrub({"role": {name: "sglang-main"}}) == {"role": {name: "sglang-main"}}


@pytest.mark.parametrize("argv, secret", [
    (["serve", "--db-pw", "S1" + _INI], "S1" + _INI),
    (["serve", "--db-pw=S2" + _INI], "S2" + _INI),
    (["serve", "--key", "S3" + _INI, "--port", "1"], "S3" + _INI),
    (["serve", "--key=S4" + _INI], "S4" + _INI),
    (["/usr/bin/mysql", "-uroot", "-pS5" + _INI, "db"], "S5" + _INI),
    (["sudo", "mariadb", "-pS6" + _INI], "S6" + _INI),
    (["curl", "-u", "admin:S7" + _INI, "https://h/"], "S7" + _INI),
    (["curl", "--user=admin:S8" + _INI, "https://h/"], "S8" + _INI),
    (["curl", "-uadmin:S9" + _INI], "S9" + _INI),
    (["sshpass", "-p", "S10" + _INI, "ssh", "h"], "S10" + _INI),
    (["sshpass", "-pS11" + _INI, "ssh", "h"], "S11" + _INI),
    (["redis-cli", "-a", "S12" + _INI, "ping"], "S12" + _INI),
])
def test_secret_flags_in_argv_and_in_shell_text(argv, secret):
    out = redact.redact_argv(argv)
    assert all(secret not in a for a in out), out
    assert len(out) == len(argv) and out[0] == argv[0]
    text = redact.redact_text(" ".join(argv))
    assert secret not in text and "redacted:" in text, text
    assert secret not in redact.redact_text("bash -c '" + " ".join(argv) + "'")
    assert secret not in redact.redact_file_text("#!/bin/sh\n" + " ".join(argv) + "\n", "run.sh")


def test_program_flags_that_are_not_secrets_stay_readable():
    for argv in (["mysql", "-p", "mydb"], ["docker", "run", "-p", "8080:80", "img"], ["serve", "-p", "30000"],
                 ["curl", "-u", "bob", "https://h/"], ["ssh", "-p", "2222", "h"], ["sort", "--key", "2", "f"],
                 ["sort", "--key=1,1", "f"]):
        assert redact.redact_argv(argv) == argv
        assert redact.redact_text(" ".join(argv)) == " ".join(argv)


@pytest.mark.parametrize("template", ["gemm_{}_kernel", "ampere_{}", "x{}", "file_{}.txt", "{}"])
@pytest.mark.parametrize("token", ["hf_" + "aB3dE5gH7jK9mN1pQ3sT5", "ghp_" + "aB3dE5gH7jK9mN1pQ3sT5vW7yZ",
                                   "github_pat_" + "11AB3dE5gH7jK9mN1pQ3sT5", "glpat-" + "aB3dE5gH7jK9mN1pQ3",
                                   "xoxb-" + "1234567890-aB3dE5gH", "AKIA" + "ABCDEFGH12345678"])
def test_token_prefixes_are_found_inside_identifiers(template, token):
    text = template.format(token)
    out = redact.redact_text(text)
    assert token not in out and "redacted:" in out, out
    assert token[-8:] not in json.dumps(redact.scrub({"kernels": {text: 1}}))


def test_short_prefixes_do_not_match_inside_words():
    for text in ("task-runner-for-everything-here", "disk-by-uuid-0123456789abcdef", "NCCL_PROTO=Simple"):
        assert redact.redact_text(text) == text
    assert "redacted:" in redact.redact_text("kernel_sk-" + "aB3dE5gH7jK9mN1pQ3sT5")


@pytest.mark.parametrize("path, text", [
    ("a.py", "# Account for size (the header)\nlog.warning('password was rejected for admin site.')\n"),
    ("a.py", "# So with current DEFAULT_LAST_PASS = 2 each function\nsorted(items, key=len)\n"),
    ("a.py", 'URL_PAT = r"[A-Za-z0-9._~-]+"\nIPV6_PAT = "(?:" + "|".join(parts) + ")"\n'),
    ("a.py", 'sep = ", ".join(args)\npw = "\\n".join(pairs)\n#   new_key = KEY_MAP.get(old_key, old_key)\n'),
    ("notes.txt", "Settings take the form KEY=VALUE.\nUse smaller indentation: Session = 0, Package = 1\n"),
    ("notes.txt", "Password Hashing\naccount for i386 extended precision\n"),
])
def test_prose_and_code_that_only_mention_secret_words_stay_readable(path, text):
    assert redact.redact_file_text(text, path) == text


def test_xml_elements_named_as_secrets():
    text = f"<server>\n  <username>bob</username>\n  <password>{_INI}</password>\n  <port>5432</port>\n</server>\n"
    for out in (redact.redact_text(text), redact.redact_file_text(text, "settings.xml")):
        assert _INI not in out and "<username>bob</username>" in out and "<port>5432</port>" in out


def test_a_file_named_like_a_key_in_a_message_is_not_a_secret():
    """envsnap names the file first in a bad input's one line: "/etc/passwd: not valid JSON" is a path and a
    message, not `passwd: value`. The same key on its own (YAML, a log) stays redacted."""
    assert redact.redact_text("/etc/passwd: not valid JSON (truncated?)") == "/etc/passwd: not valid JSON (truncated?)"
    assert redact.redact_text("/srv/conf/secrets.json: not valid JSON").endswith(": not valid JSON")
    assert "hunter2x" not in redact.redact_text("passwd: hunter2x")
    assert "s3cretvalue" not in redact.redact_text("  db.password: s3cretvalue")
