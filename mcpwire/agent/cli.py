"""``mcpwire chat``: talk to a model that calls the tools of your mcp.json servers.

Theory of operation: the options (or a preset of mcp.json, which the options override) name a
provider and model, the servers and tools the model may use, the system prompt, the approval
policy and the budgets. The servers start under a :class:`~mcpwire.host.Host` (with the host's
risk rules, confirmations and approval timeout), then either one prompt is answered (the answer on
stdout, tool calls and approvals on stderr; exit 0, or 1 with the run's reason in one line) or an
interactive session reads prompts until ``/exit`` (:mod:`mcpwire.agent.terminal`). ``--json``
prints the events as JSON lines instead of text. Approvals are asked at the terminal (approve,
deny with a reason, edit the arguments inline or in ``$EDITOR``); with no terminal to ask,
``--approve ask`` denies and says so. ``--approve`` takes the words of ``mcpwire call --approve``:
``all``, ``ask``, ``deny`` (``none``, the old word for ``deny``, with a warning). Everything a
model or a server wrote is cleaned before it reaches the terminal.

Without a config file the bundled demo server is the model's only server, so the command works
on a fresh install.
"""

from __future__ import annotations

import argparse
import logging
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final, TextIO

import msgspec

from ..cliargs import UsageError, add_target_options, declare_as_serve, era_options, load_target_config, run_cli
from ..errors import ConfigError
from ..host import HostConfig, Risk, parse_server
from ..redaction import clean_terminal
from .agent import Agent
from .loop import DEFAULT_MAX_STEPS
from .presets import Preset, load_presets, preset_names, provider_for
from .providers import PROVIDER_KINDS

__all__ = ["ChatSettings", "main", "parser", "servers_for", "settings_from"]

log = logging.getLogger("mcpwire.agent.cli")

EXIT_FAILED: Final = 1
EXIT_USAGE: Final = 2

EXAMPLES: Final = """\
examples:
  mcpwire chat --provider ollama --model qwen2.5:7b "What time is it in Tokyo?"
  mcpwire chat --preset local                      an interactive session with a preset of mcp.json
  mcpwire chat --provider anthropic --model claude-sonnet-4-5 --approve all --json "..."

in a session: /tools, /servers, /reset (forget the conversation), /exit; approvals ask
  y (approve), n [REASON] (deny), e (edit the arguments in $EDITOR), or a JSON object (approve with it)
"""


def parser() -> argparse.ArgumentParser:
    """The parser of ``mcpwire chat``."""
    p = argparse.ArgumentParser(
        prog="mcpwire chat",
        description="Talk to an LLM that calls your servers' tools; risky calls wait for your approval.",
        epilog=EXAMPLES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("prompt", nargs="?", help="answer this one prompt and exit (default: an interactive session)")
    model = p.add_argument_group("model options")
    model.add_argument("--preset", metavar="NAME", help="a preset of mcp.json's 'presets' (the options override it)")
    model.add_argument("--provider", choices=PROVIDER_KINDS, help="the provider's wire format")
    model.add_argument("--model", metavar="M", help="the model's name at the provider")
    model.add_argument("--base-url", metavar="URL", help="the provider's API (e.g. http://127.0.0.1:11434/v1)")
    model.add_argument(
        "--api-key-env", metavar="VAR", help="the variable holding the key (default OPENAI_API_KEY / ANTHROPIC_API_KEY)"
    )
    model.add_argument("--system", metavar="TEXT", help="the system prompt")
    model.add_argument(
        "--tool-mode",
        choices=("native", "react"),
        help="native tool calling, or react (Thought/Action text) for models without it",
    )
    model.add_argument("--no-stream", action="store_true", help="ask for whole answers instead of streamed ones")
    run = p.add_argument_group("run options")
    run.add_argument("--server", action="append", metavar="NAME", help="only this server of mcp.json (repeatable)")
    run.add_argument("--tools", action="append", metavar="GLOB", help="only tools matching this glob (repeatable)")
    run.add_argument(
        "--approve",
        choices=("all", "ask", "deny", "none"),
        metavar="{all,ask,deny}",
        help="calls that need approval: all approves them, ask asks at the terminal (default), deny refuses "
        "them (as mcpwire call --approve; 'none' is an old name for deny)",
    )
    run.add_argument("--ask-at", choices=("low", "medium", "high", "critical"), help="ask at or above this risk")
    run.add_argument(
        "--max-steps", type=int, metavar="N", help=f"model requests per prompt (default {DEFAULT_MAX_STEPS})"
    )
    run.add_argument("--json", action="store_true", help="print the events as JSON lines")
    add_target_options(p, stdio=False, http=False)
    return p


@dataclass(frozen=True, slots=True)
class ChatSettings:
    """What a chat runs with: a preset (possibly made from the options alone) and the output."""

    preset: Preset
    json: bool
    prompt: str | None


_OVERRIDES: Final = {
    "provider": "provider",
    "model": "model",
    "base_url": "base_url",
    "api_key_env": "api_key_env",
    "system": "system",
    "tool_mode": "tool_mode",
    "server": "servers",
    "tools": "tools",
    "approve": "approve",
    "ask_at": "ask_at",
    "max_steps": "max_steps",
}


def settings_from(args: argparse.Namespace, presets: dict[str, Preset]) -> ChatSettings:
    """The preset the options name, with the options laid over it.

    Raises:
        UsageError: an unknown preset, or no provider and model.
    """
    if args.preset is not None:
        if args.preset not in presets:
            raise UsageError(f"no preset {args.preset!r} in the config; the presets are: {preset_names(presets)}")
        base = presets[args.preset]
        values: dict[str, object] = {f: getattr(base, f) for f in base.__struct_fields__}
    else:
        values = {"name": "command line", "provider": None, "model": None}
    for option, field in _OVERRIDES.items():
        given = getattr(args, option)
        if given is not None:
            values[field] = tuple(given) if isinstance(given, list) else given
    if args.no_stream:
        values["stream"] = False
    if args.max_steps is not None and args.max_steps < 1:
        raise UsageError(f"--max-steps must be at least 1, not {args.max_steps}")
    if not values.get("provider") or not values.get("model"):
        raise UsageError(
            "name a model: --preset NAME (from mcp.json's presets), or --provider "
            f"{'|'.join(PROVIDER_KINDS)} and --model M"
        )
    return ChatSettings(preset=msgspec.convert(values, Preset), json=args.json, prompt=args.prompt)


def servers_for(config: HostConfig | None, preset: Preset) -> HostConfig:
    """The servers the chat starts: the config's (narrowed to the preset's), or the demo server.

    Raises:
        UsageError: the preset names a server the config does not have.
    """
    if config is None:
        from ..testing import demo_server_argv

        argv = demo_server_argv()
        return HostConfig(servers=(parse_server("demo", {"command": argv[0], "args": list(argv[1:])}),))
    if preset.servers is None:
        return config
    known = {s.name for s in config.servers}
    missing = [name for name in preset.servers if name not in known]
    if missing:
        raise UsageError(
            f"no server {', '.join(repr(m) for m in missing)} in the config; the servers are: "
            f"{', '.join(sorted(known)) or 'none'}"
        )
    return msgspec.structs.replace(config, servers=tuple(s for s in config.servers if s.name in preset.servers))


def host_options(preset: Preset, args: argparse.Namespace) -> dict[str, object]:
    """The host's options: the preset's approval rules, and the start-up bound given."""
    options: dict[str, object] = {
        "approval_rules": [tuple(rule) for rule in preset.rules],
        "start_timeout": args.connect_timeout,
        "connect_timeout": args.connect_timeout,
    }
    if preset.ask_at is not None:
        options["ask_at"] = Risk[preset.ask_at.upper()]
    if preset.approval_timeout is not None:
        options["approval_timeout"] = preset.approval_timeout
    return options


def main(argv: Sequence[str] | None = None, *, stdin: TextIO | None = None) -> int:
    """Entry point of ``mcpwire chat``."""
    out, err, inp = sys.stdout, sys.stderr, stdin or sys.stdin
    try:
        args = parser().parse_args(list(sys.argv[1:] if argv is None else argv))
    except SystemExit as exc:  # --help, or argparse's own usage message
        return exc.code if isinstance(exc.code, int) else 0
    _logging(args.verbose, err)
    if args.approve == "none":
        err.write("mcpwire chat: warning: --approve none is deprecated; it means deny: use --approve deny\n")
        args.approve = "deny"
    try:
        config = load_target_config(args, stdin=inp, stderr=err)
        presets = load_presets(config.path) if config is not None and config.path is not None else {}
        settings = settings_from(args, presets)
        servers = servers_for(config, settings.preset)
        provider = provider_for(settings.preset)
    except (UsageError, ConfigError, ValueError) as exc:
        err.write(f"mcpwire chat: {clean_terminal(str(exc), newlines=False)}\n")
        return EXIT_USAGE
    from .terminal import ChatOptions, run_chat

    preset = settings.preset
    options = ChatOptions(
        prompt=settings.prompt, json_lines=settings.json, thoughts=args.verbose > 0, approve=preset.approve
    )
    return run_cli(
        lambda: run_chat(
            lambda host, sampling: Agent.from_preset(
                host, preset, provider=provider, caller="mcpwire chat", sampling=sampling, tool_timeout=args.timeout
            ),
            servers,
            provider,
            host_options(preset, args),
            declare_as_serve(era_options(args), "chat"),
            options,
            inp,
            out,
            err,
        )
    )


def _logging(verbose: int, err: TextIO) -> None:
    if not verbose:
        return
    handler = logging.StreamHandler(err)
    handler.setFormatter(logging.Formatter("%(levelname)s %(name)s: %(message)s"))
    root = logging.getLogger("mcpwire")
    root.addHandler(handler)
    root.setLevel(logging.DEBUG if verbose > 1 else logging.INFO)
