"""``/api/v1/catalog``: the presets of well-known servers (``mcpwire add --list``), with the values
each one asks for. A server is added from one with ``POST /api/v1/servers``."""

from __future__ import annotations

from typing import Literal

from ...catalog import PRESETS, Preset, environment_names
from .core import API, PREFIX, named
from .routing import Ctx, ResponseSpec
from .types import Out

__all__ = ["preset_out"]

TAGS = ("catalog",)


class PresetParamOut(Out, frozen=True, kw_only=True):
    """A value the preset asks for (a folder, a repository, a database file)."""

    name: str
    description: str
    required: bool
    #: it takes one value or more (each one written as the preset writes one)
    repeated: bool
    #: a file or folder on the service's machine (``~`` is the service's home)
    path: bool
    #: written as ``FLAG VALUE`` after the preset's arguments; ``None``: the value alone
    flag: str | None


class PresetOut(Out, frozen=True, kw_only=True):
    name: str
    description: str
    transport: Literal["stdio", "http"]
    #: the program and its fixed arguments (stdio); each parameter's words follow them
    command: list[str] | None
    url: str | None
    #: environment variables or headers of the entry (``${env:NAME}`` placeholders, never values)
    env: dict[str, str]
    headers: dict[str, str]
    params: list[PresetParamOut]
    #: the variables its placeholders read: set them in the service's environment
    environment: list[str]
    #: what must be installed on the service's machine to run it
    needs: str
    homepage: str


class PresetList(Out, frozen=True, kw_only=True):
    items: list[PresetOut]


def preset_out(preset: Preset) -> PresetOut:
    return PresetOut(
        name=preset.name,
        description=preset.description,
        transport="http" if preset.url else "stdio",
        command=list(preset.command) if preset.command else None,
        url=preset.url,
        env=dict(preset.env),
        headers=dict(preset.headers),
        params=[
            PresetParamOut(
                name=p.name,
                description=p.description,
                required=p.required,
                repeated=p.repeated,
                path=p.path,
                flag=p.flag,
            )
            for p in preset.params
        ],
        environment=environment_names(preset),
        needs=preset.needs,
        homepage=preset.homepage,
    )


@API.operation(
    "GET",
    f"{PREFIX}/catalog",
    summary="List the presets of well-known servers",
    tags=TAGS,
    responses={200: ResponseSpec("Every preset, as `mcpwire add --list` shows them.", PresetList)},
)
async def list_presets(ctx: Ctx) -> PresetList:
    """Each preset with the values it asks for. To add a server from one, ``POST /servers`` its
    entry: ``command`` (the first word), ``args`` (the other words, then each parameter's
    ``flag`` and value, or the value alone), ``env``; or ``url`` and ``headers``."""
    return PresetList(items=[preset_out(p) for p in PRESETS.values()])


@API.operation(
    "GET",
    f"{PREFIX}/catalog/{{name}}",
    summary="One preset",
    tags=TAGS,
    responses={200: ResponseSpec("The preset.", PresetOut)},
)
async def get_preset(ctx: Ctx) -> PresetOut:
    return preset_out(named(PRESETS.values(), ctx.path["name"], "preset", listing="catalog"))
