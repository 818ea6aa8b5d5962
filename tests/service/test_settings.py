from __future__ import annotations

import pytest

from cpsched.errors import ConfigError
from cpsched.service.settings import load_settings


def test_toml_defaults_and_cluster_overrides(tmp_path):
    path = tmp_path / "c.toml"
    path.write_text(
        'database_url = "sqlite:///x.db"\n'
        '[defaults]\ndispatcher = "sjf"\n'
        '[clusters.big]\ndispatcher = "hcp3"\ndeadline = 5\n'
    )
    settings = load_settings(path)
    assert settings.policy("big").dispatcher == "hcp3"
    assert settings.policy("big").deadline == 5
    assert settings.policy("other").dispatcher == "sjf"


def test_a_named_policy_in_defaults_or_in_a_cluster_table(tmp_path):
    path = tmp_path / "c.toml"
    path.write_text(
        '[defaults]\npolicy = "today"\n'
        '[clusters.fast]\npolicy = "easy++"\noverrun = "ladder"\n'
        "[clusters.slow]\ndeadline = 5\n"
    )
    settings = load_settings(path)
    fast, slow = settings.policy("fast"), settings.policy("slow")
    assert (fast.predictor, fast.backfill_order, fast.overrun) == ("last-two", "shortest", "ladder")
    assert (slow.predictor, slow.deadline) == ("wall-time", 5)  # today's, from [defaults]
    path.write_text('[clusters.a]\npolicy = "tomorrow"\n')
    with pytest.raises(ConfigError, match="unknown policy 'tomorrow'"):
        load_settings(path)


def test_environment_overrides_the_file(tmp_path, monkeypatch):
    path = tmp_path / "c.toml"
    path.write_text('database_url = "sqlite:///file.db"\n')
    monkeypatch.setenv("CPSCHED_DATABASE_URL", "sqlite:///env.db")
    assert load_settings(path).database_url == "sqlite:///env.db"


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("database_url = ", "not valid TOML"),
        ("databse_url = 'x'", "databse_url"),
        ("[clusters.a]\ndispatchr = 'x'", "dispatchr"),
        ("[[tokens]]\nname = 'a'\nsecret = 'short'", "at least 8"),
    ],
)
def test_bad_config_says_what_is_wrong(tmp_path, text, message):
    path = tmp_path / "c.toml"
    path.write_text(text)
    with pytest.raises(ConfigError, match=message):
        load_settings(path)


def test_missing_file(tmp_path):
    with pytest.raises(ConfigError, match="does not exist"):
        load_settings(tmp_path / "none.toml")
