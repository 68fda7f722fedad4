"""Every public class method of every public class is a plain class method, and is called.

Python 3.13 no longer chains ``classmethod`` through another descriptor: a method decorated
``@classmethod`` twice works on 3.11 and 3.12 and raises ``TypeError: 'classmethod' object is not
callable`` on 3.13. The class methods are found by walking the installed package, so a new one is
covered at once: it needs an example call in ``EXAMPLES`` (the test says so, naming it).
"""

from __future__ import annotations

import importlib
import inspect
import json
import pkgutil
from collections.abc import Callable, Iterator
from pathlib import Path
from types import MethodType, ModuleType

import pytest

import mcpwire

#: The packages whose public classes are looked at (conformance and fuzz install inside mcpwire
#: from their own folders, so they are walked from their own paths).
ROOTS = ("mcpwire", "mcpwire.conformance", "mcpwire.fuzz")


def _public_modules() -> Iterator[ModuleType]:
    for root in ROOTS:
        package = importlib.import_module(root)
        yield package
        for info in pkgutil.walk_packages(package.__path__, root + "."):
            if any(part.startswith("_") for part in info.name.split(".")):
                continue
            yield importlib.import_module(info.name)


def _public_classmethods() -> dict[str, tuple[type, str]]:
    """``module.Class.method`` -> (class, method name), for every class defined in mcpwire under
    a public name of a public module, and each public class method it defines."""
    found: dict[str, tuple[type, str]] = {}
    seen: set[type] = set()
    for module in _public_modules():
        for name, value in vars(module).items():
            if name.startswith("_") or not inspect.isclass(value) or value in seen:
                continue
            if not value.__module__.startswith("mcpwire"):
                continue
            seen.add(value)
            for attr, member in vars(value).items():
                if isinstance(member, classmethod) and not attr.startswith("_"):
                    found[f"{value.__module__}.{value.__qualname__}.{attr}"] = (value, attr)
    return found


FOUND = _public_classmethods()


def _config(tmp_path: Path) -> Path:
    path = tmp_path / "mcp.json"
    path.write_text(
        json.dumps({"mcpServers": {"demo": {"command": "python3", "args": ["-m", "mcpwire.testing.demo_server"]}}})
    )
    return path


def _host_from_config(tmp_path: Path) -> object:
    from mcpwire.host import Host

    host = Host.from_config(_config(tmp_path))
    assert [server.name for server in host.config.servers] == ["demo"]
    return host


def _aio_host_from_config(tmp_path: Path) -> object:
    import mcpwire.aio

    return mcpwire.aio.Host.from_config(_config(tmp_path))


def _agent_from_preset(tmp_path: Path) -> object:
    from mcpwire.agent import Agent
    from mcpwire.agent.presets import Preset
    from mcpwire.host import Host

    # ollama needs no key: the provider is made from the preset (nothing is sent)
    preset = Preset(name="local", provider="ollama", model="m", base_url="http://127.0.0.1:9/v1", system="be brief")
    return Agent.from_preset(Host(), preset)


def _audit_record(tmp_path: Path) -> object:
    from mcpwire.host.policies.audit import AuditRecord
    from mcpwire.host.policies.context import CallContext

    record = AuditRecord.for_call(CallContext(server="s", tool="t", arguments={"a": 1}, name="s__t"), latency=0.25)
    assert (record.server, record.tool, record.latency_ms) == ("s", "t", 250.0)
    return record


def _approval(tmp_path: Path) -> object:
    from mcpwire.host.approvals import Approval

    data = {
        "id": "a1",
        "state": "pending",
        "risk": "high",
        "server": "s",
        "tool": "t",
        "name": "s__t",
        "arguments": {"x": 1},
        "created_at": 1.0,
        "expires_at": 61.0,
    }
    approval = Approval.from_dict(data)
    assert Approval.from_dict(approval.to_dict()) == approval
    return approval


def _pin(tmp_path: Path) -> object:
    from mcpwire.host.pins import Pin

    pin = Pin.from_dict({"server": "s", "tool": "t", "hash": "h", "definition": {"name": "t"}, "first_seen": 1.0})
    assert Pin.from_dict(pin.to_dict()) == pin
    return pin


def _token_set(tmp_path: Path) -> object:
    from mcpwire.auth.storage import TokenSet

    tokens = TokenSet.from_json({"access_token": "a", "expires_at": 10})
    assert TokenSet.from_json(tokens.to_json()) == tokens
    return tokens


def _client_info(tmp_path: Path) -> object:
    from mcpwire.auth.storage import ClientInfo

    info = ClientInfo.from_json({"client_id": "c"})
    assert ClientInfo.from_json(info.to_json()) == info
    return info


def _client_options(tmp_path: Path) -> object:
    options = mcpwire.ClientOptions.from_mapping({"timeout": 5})
    assert options.timeout == 5
    return options


def _message_user(tmp_path: Path) -> object:
    from mcpwire.agent.messages import Message

    return Message.user("hi")


def _message_assistant(tmp_path: Path) -> object:
    from mcpwire.agent.messages import Message

    return Message.assistant("hello")


def _tool_call(tmp_path: Path) -> object:
    from mcpwire.agent.messages import ToolCall

    call = ToolCall.parse("c1", "s__t", '{"a": 1}')
    assert (call.id, call.name) == ("c1", "s__t")
    return call


def _task_state(tmp_path: Path) -> object:
    from mcpwire.testing.tasks import TaskState

    task = TaskState.new("slow", 1.0)
    assert task.tool == "slow" and task.task_id
    return task


def _wire_entry_of_bytes(tmp_path: Path) -> object:
    from mcpwire.fuzz.wire import Entry

    assert Entry.of_bytes("recv", 0.5, b"\xff").data_hex == "ff"
    return Entry.of_bytes("send", 0.5, b'{"jsonrpc": "2.0"}')


def _wire_entry_from_json(tmp_path: Path) -> object:
    from mcpwire.fuzz.wire import Entry

    entry = Entry.from_json({"dir": "send", "t": 0.5, "line": "{}"})
    assert Entry.from_json(entry.to_json()) == entry
    return entry


def _exchange_step(tmp_path: Path) -> object:
    from mcpwire.fuzz.exchange import Step

    line = b'{"jsonrpc": "2.0", "id": 1, "method": "ping"}'
    step = Step.from_json(line, {"kind": "request", "request_id": 1, "method": "ping"})
    assert Step.from_json(line, step.to_json()) == step
    return step


def _role(tmp_path: Path) -> object:
    from mcpwire.service.identity import Role

    role = Role.parse(" Approver ")
    assert role is Role.APPROVER and role > Role.CALLER
    return role


def _role_map(tmp_path: Path) -> object:
    from mcpwire.service.identity import Role
    from mcpwire.service.oauth import RoleMap
    from mcpwire.service.settings import OAuthSettings

    oauth = OAuthSettings(
        issuer="https://id.example", roles=(("ops", "approver"), ("ops", "caller"), ("dev", "caller"))
    )
    roles = RoleMap.from_settings(oauth)
    assert roles.role_of({"groups": ["dev", "ops"]}) is Role.APPROVER
    assert roles.role_of({"groups": ["other"]}) is None
    return roles


#: ``module.Class.method`` -> an example call, which returns what the method returned.
def _journal(tmp_path: Path) -> object:
    from mcpwire.service.store.journal import Journal

    journal = Journal.create(tmp_path / "journals")
    journal.close()
    return journal


EXAMPLES: dict[str, Callable[[Path], object]] = {
    "mcpwire.host.host.Host.from_config": _host_from_config,
    "mcpwire.aio.Host.from_config": _aio_host_from_config,
    "mcpwire.agent.agent.Agent.from_preset": _agent_from_preset,
    "mcpwire.host.policies.audit.AuditRecord.for_call": _audit_record,
    "mcpwire.host.approvals.Approval.from_dict": _approval,
    "mcpwire.host.pins.Pin.from_dict": _pin,
    "mcpwire.auth.storage.TokenSet.from_json": _token_set,
    "mcpwire.auth.storage.ClientInfo.from_json": _client_info,
    "mcpwire.client.options.ClientOptions.from_mapping": _client_options,
    "mcpwire.agent.messages.Message.user": _message_user,
    "mcpwire.agent.messages.Message.assistant": _message_assistant,
    "mcpwire.agent.messages.ToolCall.parse": _tool_call,
    "mcpwire.testing.tasks.TaskState.new": _task_state,
    "mcpwire.fuzz.wire.Entry.of_bytes": _wire_entry_of_bytes,
    "mcpwire.fuzz.wire.Entry.from_json": _wire_entry_from_json,
    "mcpwire.fuzz.exchange.Step.from_json": _exchange_step,
    "mcpwire.service.identity.Role.parse": _role,
    "mcpwire.service.oauth.RoleMap.from_settings": _role_map,
    "mcpwire.service.store.journal.Journal.create": _journal,
}


def test_the_walk_finds_the_class_methods_it_is_meant_to() -> None:
    assert "mcpwire.host.host.Host.from_config" in FOUND
    assert "mcpwire.aio.Host.from_config" in FOUND
    assert "mcpwire.client.options.ClientOptions.from_mapping" in FOUND


@pytest.mark.parametrize("qualname", sorted(FOUND))
def test_each_class_method_is_bound_to_its_class_and_wraps_a_function(qualname: str) -> None:
    cls, name = FOUND[qualname]
    # a second @classmethod (or a property, or a staticmethod) under it fails here on every Python;
    # bound, it would still look right on 3.11 and 3.12, which chain the descriptors
    wrapped = vars(cls)[name].__func__
    assert inspect.isfunction(wrapped), f"{qualname} wraps a {type(wrapped).__name__}, not a function"
    bound = getattr(cls, name)
    assert isinstance(bound, MethodType) and bound.__self__ is cls and bound.__func__ is wrapped, qualname


@pytest.mark.parametrize("qualname", sorted(FOUND))
def test_each_class_method_is_called(qualname: str, tmp_path: Path) -> None:
    example = EXAMPLES.get(qualname)
    assert example is not None, f"{qualname} is a public class method: add an example call for it to EXAMPLES"
    cls, _ = FOUND[qualname]
    assert isinstance(example(tmp_path), cls), qualname


def test_every_example_names_a_class_method_that_exists() -> None:
    assert sorted(set(EXAMPLES) - set(FOUND)) == []
