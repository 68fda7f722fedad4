"""``mcpwire login`` against a server that needs no authorization says so and writes nothing."""

from __future__ import annotations

from pathlib import Path

from _cli_run import mcpwire


def test_login_to_a_server_without_auth_saves_nothing(reference_url: str, tmp_path: Path) -> None:
    store = tmp_path / "tokens.json"
    proc = mcpwire("login", reference_url, "--store", str(store), "--no-browser", cwd=tmp_path, home=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr == "mcpwire-everything needs no authorization: it answered without a token; nothing was saved\n"
    assert not store.exists()


def test_an_unrelated_token_file_is_left_as_it_was(reference_url: str, tmp_path: Path) -> None:
    store = tmp_path / "tokens.json"
    store.write_text('{"tokens": {}}')
    proc = mcpwire("login", reference_url, "--store", str(store), "--no-browser", cwd=tmp_path, home=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "needs no authorization" in proc.stderr
    assert store.read_text() == '{"tokens": {}}'


def test_a_url_with_credentials_is_not_echoed(tmp_path: Path) -> None:
    proc = mcpwire("login", "ftp://user:secret-pw@host/x", cwd=tmp_path, home=tmp_path)
    assert proc.returncode == 2
    assert "secret-pw" not in proc.stderr
