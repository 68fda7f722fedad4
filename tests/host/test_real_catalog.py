"""The host against real servers for what fakes cannot prove: the risk level of every tool of every
installed server (the table the keyword rule was tuned on), a server that offers only prompts
(written on the official Python SDK) connected with no tools instead of restarted for ever, and
server-everything's prompts, resources and templates through the host."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import trio

from mcpwire.host import Host, Risk, ServerStatus, parse_config

pytestmark = [pytest.mark.real, pytest.mark.slow]

REPO = Path(__file__).resolve().parents[2]
SERVERS = Path(os.environ.get("MCPWIRE_SERVERS_DIR", REPO / ".cache" / "servers"))
NPM = SERVERS / "npm" / "node_modules"
PY_BIN = SERVERS / "py" / "bin"
FIXTURES = Path(__file__).with_name("fixtures")


def _require(path: Path) -> str:
    if not path.exists():
        message = f"{path} is missing: run tests/real/install_servers.sh"
        if os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(message)
    return str(path)


L, M, H, C = Risk.LOW, Risk.MEDIUM, Risk.HIGH, Risk.CRITICAL

#: Every tool of every installed server and the risk the host gives it. Annotated servers are
#: judged by their annotations; mcp-cron (Go) and mcp-server-sqlite (no annotations) by the words of
#: their names.
RISKS: dict[str, dict[str, Risk]] = {
    "everything": {
        "echo": L,
        "get-annotated-message": L,
        "get-env": L,
        "get-resource-links": L,
        "get-resource-reference": L,
        "get-structured-content": L,
        "get-sum": L,
        "get-tiny-image": L,
        "gzip-file-as-resource": H,  # writes a resource, may fetch a URL
        "simulate-research-query": H,
        "toggle-simulated-logging": H,
        "toggle-subscriber-updates": H,
        "trigger-long-running-operation": L,
    },
    "filesystem": {
        "create_directory": H,
        "directory_tree": L,
        "edit_file": C,
        "get_file_info": L,
        "list_allowed_directories": L,
        "list_directory": L,
        "list_directory_with_sizes": L,
        "move_file": C,
        "read_file": L,
        "read_media_file": L,
        "read_multiple_files": L,
        "read_text_file": L,
        "search_files": L,
        "write_file": C,
    },
    "memory": {
        "add_observations": H,
        "create_entities": H,
        "create_relations": H,
        "delete_entities": C,
        "delete_observations": C,
        "delete_relations": C,
        "open_nodes": L,
        "read_graph": L,
        "search_nodes": L,
    },
    "time": {"convert_time": L, "get_current_time": L},
    "git": {
        "git_add": H,
        "git_branch": L,
        "git_checkout": H,
        "git_commit": H,
        "git_create_branch": H,
        "git_diff": L,
        "git_diff_staged": L,
        "git_diff_unstaged": L,
        "git_log": L,
        "git_reset": C,
        "git_show": L,
        "git_status": L,
    },
    "sqlite": {
        "append_insight": H,
        "create_table": H,
        "describe_table": L,
        "list_tables": L,
        "read_query": M,  # SQL: read-only by the server's word only
        "write_query": C,  # any SQL: DROP and DELETE too
    },
    "cron": {
        "add_ai_task": H,
        "add_http_task": H,
        "add_task": H,  # a shell command to run later
        "disable_task": H,
        "enable_task": H,
        "get_task": L,
        "get_task_result": L,
        "list_tasks": L,
        "query_task_result": M,  # SQL, read-only by the server's word only
        "remove_task": C,
        "run_task": H,
        "update_task": H,
    },
}


async def test_the_risk_of_every_tool_of_every_installed_server(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    repo.mkdir()
    await trio.run_process(["git", "init", "-q", str(repo)])
    files = tmp_path / "files"
    files.mkdir()
    cron = NPM / "mcp-cron-linux-amd64" / "bin" / "mcp-cron"
    config = parse_config(
        {
            "mcpServers": {
                "everything": {"command": _require(NPM / ".bin" / "mcp-server-everything"), "args": ["stdio"]},
                "filesystem": {"command": [_require(NPM / ".bin" / "mcp-server-filesystem"), str(files)]},
                "memory": {
                    "command": _require(NPM / ".bin" / "mcp-server-memory"),
                    "env": {"MEMORY_FILE_PATH": str(tmp_path / "memory.jsonl")},
                },
                "time": {"command": _require(PY_BIN / "mcp-server-time")},
                "git": {"command": _require(PY_BIN / "mcp-server-git"), "args": ["--repository", str(repo)]},
                "sqlite": {
                    "command": _require(PY_BIN / "mcp-server-sqlite"),
                    "args": ["--db-path", str(tmp_path / "s.db")],
                },
                "cron": {
                    "command": _require(cron),
                    "args": [
                        "-transport",
                        "stdio",
                        "-db-path",
                        str(tmp_path / "cron.db"),
                        "-log-file",
                        str(tmp_path / "cron.log"),
                        "-mcp-config-path",
                        str(tmp_path / "none.json"),
                    ],
                },
            }
        }
    )
    async with Host(config, health_interval=0, start_timeout=90) as host:
        down = {i.name: i.error for i in host.list() if i.status is not ServerStatus.CONNECTED}
        assert down == {}
        found = {
            info.name: {t.tool.name: host.tool_risk(t.name) for t in host.tools(info.name)} for info in host.list()
        }
    assert found == RISKS


async def test_a_prompts_only_server_is_connected_with_no_tools() -> None:
    python = _require(PY_BIN / "python")
    config = parse_config({"mcpServers": {"sdk": {"command": python, "args": [str(FIXTURES / "sdk_prompts_only.py")]}}})
    async with Host(config, health_interval=0, start_timeout=60, backoff_base=0.05) as host:
        info = host.get("sdk")
        assert (info.status, info.error, info.tool_count, info.prompt_count) == (ServerStatus.CONNECTED, None, 0, 1)
        assert info.capabilities is not None and info.capabilities.tools is None
        assert [p.name for p in host.prompts()] == ["sdk__greet"]
        result = await host.get_prompt("sdk__greet", {"name": "Ada"})
        assert result.messages[0].content["text"] == "Hello, Ada!"
        await trio.sleep(1)  # long enough for several restarts, if it were restarting
        assert (info.status, info.restart_count) == (ServerStatus.CONNECTED, 0)


async def test_prompts_resources_and_templates_of_server_everything() -> None:
    config = parse_config(
        {"mcpServers": {"ev": {"command": _require(NPM / ".bin" / "mcp-server-everything"), "args": ["stdio"]}}}
    )
    async with Host(config, health_interval=0, start_timeout=60) as host:
        info = host.get("ev")
        assert (info.prompt_count, info.resource_count, info.template_count) == (4, 7, 2)
        assert [p.name for p in host.prompts()] == [
            "ev__args-prompt",
            "ev__completable-prompt",
            "ev__resource-prompt",
            "ev__simple-prompt",
        ]
        args = await host.get_prompt("ev__args-prompt", {"city": "Lyon", "state": "Rhône"})
        assert "Lyon" in args.messages[0].content["text"]
        resource = next(r for r in host.resources() if r.name == "ev__architecture.md")
        read = await host.read_resource("ev", resource.uri)
        assert read.contents[0].uri == resource.uri and (read.contents[0].text or "").strip()
        templates = {t.name: t.uri_template for t in host.resource_templates()}
        assert templates["ev__Dynamic Text Resource"] == "demo://resource/dynamic/text/{resourceId}"
        stats = host.statistics()
        assert (stats.prompts, stats.resources) == (4, 7)
        assert stats.servers["ev"].calls["prompts/get"].calls == 1
