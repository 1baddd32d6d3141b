"""Tokens, tenants and roles (sounding.serving.auth)."""

import asyncio
import os
import time

import pytest
from sounding.runtime import errors
from sounding.serving import auth

pytestmark = pytest.mark.unit


def _entry_text(token: str, tenant: str, role: str) -> str:
    return f'[[tokens]]\nsha256 = "{auth.hash_token(token)}"\ntenant = "{tenant}"\nrole = "{role}"\n'


def _bearer(token: str) -> list[tuple[str, str]]:
    return [("authorization", f"Bearer {token}")]


def test_without_tokens_every_call_is_the_local_admin():
    authenticator = auth.Authenticator()
    assert not authenticator.enabled
    assert authenticator.authenticate([]) == auth.LOCAL == auth.Principal("default", "admin")


def test_a_configured_token_maps_to_its_tenant_and_role_and_others_are_refused():
    token, digest = auth.new_token()
    authenticator = auth.Authenticator([auth.TokenEntry(sha256=digest, tenant="acme", role="writer")])
    assert authenticator.authenticate(_bearer(token)) == auth.Principal("acme", "writer")
    assert authenticator.authenticate([("authorization", f"bearer  {token} ")]).tenant == "acme"
    for metadata, reason in (
        ([], "MISSING_TOKEN"),
        ([("authorization", token)], "MISSING_TOKEN"),
        ([("authorization", "Basic dXNlcjpwYXNz")], "MISSING_TOKEN"),
        (_bearer(token + "x"), "INVALID_TOKEN"),
        (_bearer(digest), "INVALID_TOKEN"),
    ):
        with pytest.raises(errors.Unauthenticated) as refused:
            authenticator.authenticate(metadata)
        assert refused.value.reason == reason and token not in refused.value.message


def test_roles_include_the_roles_below_them():
    reader, writer, admin = (auth.Principal("t", role) for role in auth.ROLES)
    assert [reader.may(r) for r in auth.ROLES] == [True, False, False]
    assert [writer.may(r) for r in auth.ROLES] == [True, True, False]
    assert [admin.may(r) for r in auth.ROLES] == [True, True, True]
    with pytest.raises(errors.PermissionDenied, match="needs the role 'admin'"):
        auth.authorize(writer, "admin", "Calibrate")


def test_the_token_file_is_read_again_when_it_changes(tmp_path, monkeypatch):
    monkeypatch.setattr(auth, "RELOAD_INTERVAL_S", 0.0)
    path = tmp_path / "tokens.toml"
    first, second = auth.new_token()[0], auth.new_token()[0]
    path.write_text(_entry_text(first, "acme", "reader"))
    authenticator = auth.Authenticator(tokens_file=path)
    assert authenticator.authenticate(_bearer(first)).role == "reader"

    path.write_text(_entry_text(second, "acme", "admin"))  # rotated: the first is gone
    os.utime(path, ns=(time.time_ns(), time.time_ns() + 10**9))
    assert authenticator.authenticate(_bearer(second)).role == "admin"
    with pytest.raises(errors.Unauthenticated):
        authenticator.authenticate(_bearer(first))


@pytest.mark.parametrize(
    "break_it",
    [
        lambda path: path.unlink(),
        lambda path: path.write_text('[[tokens]]\nsha256 = "not-a-hash"\ntenant = "acme"\nrole = "writer"\n'),
        lambda path: path.write_text("[[tokens]]\n"),  # an entry removed, its header left behind
    ],
    ids=["deleted", "invalid", "empty entry"],
)
def test_a_token_file_that_breaks_refuses_its_tokens_until_it_reads_again(
    tmp_path, monkeypatch, caplog, break_it
):
    monkeypatch.setattr(auth, "RELOAD_INTERVAL_S", 0.0)
    path = tmp_path / "tokens.toml"
    token, fixed = auth.new_token(), auth.new_token()
    path.write_text(_entry_text(token[0], "acme", "writer"))
    authenticator = auth.Authenticator(
        [auth.TokenEntry(sha256=fixed[1], tenant="globex", role="reader")], tokens_file=path
    )
    asyncio.run(authenticator.check())
    break_it(path)
    with pytest.raises(errors.Unauthenticated):
        authenticator.authenticate(_bearer(token[0]))
    assert authenticator.authenticate(_bearer(fixed[0])).tenant == "globex"  # not the file's
    with pytest.raises(RuntimeError, match="unreadable"):
        asyncio.run(authenticator.check())
    assert "every token it held is refused" in caplog.text and token[0] not in caplog.text

    path.write_text(_entry_text(token[0], "acme", "writer"))
    os.utime(path, ns=(time.time_ns(), time.time_ns() + 10**9))
    assert authenticator.authenticate(_bearer(token[0])).tenant == "acme"
    asyncio.run(authenticator.check())


def test_keep_last_good_keeps_a_broken_files_tokens(tmp_path, monkeypatch, caplog):
    monkeypatch.setattr(auth, "RELOAD_INTERVAL_S", 0.0)
    path = tmp_path / "tokens.toml"
    token = auth.new_token()[0]
    path.write_text(_entry_text(token, "acme", "writer"))
    authenticator = auth.Authenticator(tokens_file=path, keep_last_good=True)
    path.unlink()
    assert authenticator.authenticate(_bearer(token)).tenant == "acme"
    asyncio.run(authenticator.check())
    assert "last good tokens stay in force" in caplog.text


@pytest.mark.parametrize(
    "text",
    [
        "not toml [[",
        '[[tokens]]\nsha256 = "ab"\ntenant = "acme"\nrole = "writer"\n',
        f'[[tokens]]\nsha256 = "{"a" * 64}"\ntenant = "Acme!"\nrole = "writer"\n',
        f'[[tokens]]\nsha256 = "{"a" * 64}"\ntenant = "acme"\nrole = "owner"\n',
    ],
)
def test_an_invalid_token_file_refuses_to_start(tmp_path, text):
    path = tmp_path / "tokens.toml"
    path.write_text(text)
    with pytest.raises(ValueError, match="token file"):
        auth.Authenticator(tokens_file=path)


@pytest.mark.parametrize(
    ("address", "loopback"),
    [
        ("127.0.0.1:50051", True),
        ("localhost:50051", True),
        ("[::1]:50051", True),
        ("0.0.0.0:50051", False),
        ("[::]:50051", False),
        ("10.1.2.3:50051", False),
        ("sounding.example.com:443", False),
    ],
)
def test_loopback_addresses(address, loopback):
    assert auth.is_loopback(address) is loopback
