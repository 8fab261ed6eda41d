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
