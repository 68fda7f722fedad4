"""Tokens and console sessions in the store (SQLite and PostgreSQL): only hashes kept, names
never reused, sessions that end on logout, on revocation, on idle and on age, for every replica."""

from __future__ import annotations

import pytest

from mcpwire.service.console.sessions import Sessions
from mcpwire.service.identity import LOCAL, Authenticator, Identity, Role, hash_credential, new_token
from mcpwire.service.settings import Secret
from mcpwire.service.store import Store, StoreError

ADMIN = "access-admin-token-0123456789"


async def test_tokens_are_kept_as_hashes_and_their_names_never_reused(store: Store) -> None:
    token = new_token()
    assert token.startswith("mcpw_") and len(token) > 40 and token != new_token()
    row = await store.access.create_token("ci", "caller", hash_credential(token))
    assert (row.name, row.role, row.revoked_at) == ("ci", "caller", None)
    assert token not in repr(await store.access.tokens())
    with pytest.raises(StoreError, match=r"^a token named 'ci' exists or existed; names are not reused"):
        await store.access.create_token("ci", "viewer", hash_credential(new_token()))
    auth = Authenticator(Secret(ADMIN), store)
    assert await auth.identify(token) == Identity("token", "ci", Role.CALLER)
    assert await auth.identify(ADMIN) == Identity("token", "admin", Role.ADMIN)
    assert await auth.identify(token + "x") is None
    assert await auth.identify("") is None
    revoked = await store.access.revoke_token("ci")
    assert revoked is not None and revoked.revoked_at is not None
    assert await store.access.revoke_token("nope") is None
    auth.forget()
    assert await auth.identify(token) is None
    with pytest.raises(StoreError):
        await store.access.create_token("ci", "caller", hash_credential(new_token()))


async def test_a_revocation_reaches_another_replica_within_a_second(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    token = new_token()
    await store.access.create_token("agent", "caller", hash_credential(token))
    other = Authenticator(Secret(ADMIN), store)  # another process on the same store
    clock = [1000.0]
    monkeypatch.setattr("mcpwire.service.identity.time.monotonic", lambda: clock[0])
    assert await other.identify(token) is not None
    await store.access.revoke_token("agent")
    clock[0] += 0.5
    assert await other.identify(token) is not None  # what it read is believed for a second
    clock[0] += 0.6
    assert await other.identify(token) is None


async def test_sessions_end_on_logout_revocation_idle_and_age(store: Store, monkeypatch: pytest.MonkeyPatch) -> None:
    wall = [10_000.0]
    monkeypatch.setattr("mcpwire.service.console.sessions.time.time", lambda: wall[0])
    monkeypatch.setattr("mcpwire.service.store.access.time.time", lambda: wall[0])
    auth = Authenticator(Secret(ADMIN), store)
    here = Sessions(store, auth, ttl=3600, idle=600)
    there = Sessions(store, auth, ttl=3600, idle=600)  # another replica
    identity = Identity("token", "alice", Role.APPROVER)

    session = await here.start(identity)
    assert session.identity == identity and len(session.csrf) == 40
    found = await there.find(session.cookie)
    assert found is not None and found.identity == identity and found.csrf == session.csrf
    assert await there.find(session.cookie[:-1] + "x") is None
    assert await there.find(None) is None and await there.find("x" * 500) is None

    # used every 5 minutes: it lives on, until its age is up
    for _ in range(11):
        wall[0] += 300
        assert await there.find(session.cookie) is not None
    wall[0] += 400
    assert await Sessions(store, auth, ttl=3600, idle=600).find(session.cookie) is None

    idle = await here.start(identity)
    wall[0] += 601
    assert await Sessions(store, auth, ttl=3600, idle=600).find(idle.cookie) is None

    out = await here.start(identity)
    await here.end(out.cookie)
    assert await Sessions(store, auth).find(out.cookie) is None

    token = new_token()
    await store.access.create_token("bob", "viewer", hash_credential(token))
    bob = await here.start(Identity("token", "bob", Role.VIEWER))
    await store.access.revoke_token("bob")
    assert await Sessions(store, auth).find(bob.cookie) is None

    local = await here.start(LOCAL)
    assert (await Sessions(store, auth).find(local.cookie)) is not None
    assert session.cookie not in repr(await store.access.session(hash_credential(session.cookie)))
