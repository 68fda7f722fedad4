"""An approval backend on one SQLite file, shared by several processes (a test peer for the
queue's polling; the service's store is the product one).

Run as a script, it is the "other process": it waits for the first pending approval in the file
and decides it: ``python _sqlite_approvals.py DB approve|deny [ARGUMENTS_JSON]``.
"""

from __future__ import annotations

import json
import sqlite3
import sys
import time

import trio

from mcpwire.host import Approval, ApprovalConflict, ApprovalQueue


class SqliteApprovals:
    """Versions are checked inside one write transaction, as a shared backend must."""

    def __init__(self, path: str) -> None:
        self.path = path
        with self._db() as db:
            db.execute(
                "CREATE TABLE IF NOT EXISTS approvals (id TEXT PRIMARY KEY, version INTEGER, pending INTEGER,"
                " seq INTEGER, data TEXT)"
            )

    def _db(self) -> sqlite3.Connection:
        return sqlite3.connect(self.path, timeout=10, isolation_level=None)

    async def save(self, approval: Approval) -> None:
        db = self._db()
        try:
            db.execute("BEGIN IMMEDIATE")
            row = db.execute("SELECT version FROM approvals WHERE id = ?", (approval.id,)).fetchone()
            stored = 0 if row is None else row[0]
            if approval.version != stored + 1:
                db.execute("ROLLBACK")
                raise ApprovalConflict(f"approval {approval.id}: stored version {stored}, saving {approval.version}")
            seq = db.execute("SELECT COALESCE(MAX(seq), 0) + 1 FROM approvals").fetchone()[0]
            db.execute(
                "INSERT OR REPLACE INTO approvals VALUES (?, ?, ?, ?, ?)",
                (approval.id, approval.version, int(approval.pending), seq, json.dumps(approval.to_dict())),
            )
            db.execute("COMMIT")
        finally:
            db.close()

    def _rows(self, sql: str, *params: object) -> list[Approval]:
        with self._db() as db:
            return [Approval.from_dict(json.loads(r[0])) for r in db.execute(sql, params).fetchall()]

    async def load(self, id: str) -> Approval | None:
        rows = self._rows("SELECT data FROM approvals WHERE id = ?", id)
        return rows[0] if rows else None

    async def pending(self) -> list[Approval]:
        return self._rows("SELECT data FROM approvals WHERE pending = 1 ORDER BY seq")

    async def changed_since(self, cursor: str | None) -> tuple[list[Approval], str]:
        with self._db() as db:
            top = str(db.execute("SELECT COALESCE(MAX(seq), 0) FROM approvals").fetchone()[0])
        if cursor is None:
            return [], top
        return self._rows("SELECT data FROM approvals WHERE seq > ? ORDER BY seq", int(cursor)), top


async def _decide(path: str, verdict: str, arguments: str | None) -> None:
    queue = ApprovalQueue(SqliteApprovals(path), poll_interval=0.05)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        pending = await queue.pending()
        if pending:
            first = pending[0]
            edited = None if arguments is None else json.loads(arguments)
            decided = await queue.decide(
                first.id, approve=verdict == "approve", arguments=edited, reason="from the other process", by="other"
            )
            print(json.dumps({"id": decided.id, "state": decided.state.value}), flush=True)
            return
        await trio.sleep(0.05)
    raise SystemExit("no pending approval appeared")


if __name__ == "__main__":
    trio.run(_decide, sys.argv[1], sys.argv[2], sys.argv[3] if len(sys.argv) > 3 else None)
