"""ADAPTERS: format name -> adapter class (the only place that knows every format)."""

from __future__ import annotations

from importlib import import_module

from pipeline.errors import UsageError
from pipeline.ingest.base import Adapter

# name -> "module:Class"; imported lazily so one broken adapter never breaks the others.
ADAPTERS: dict[str, str] = {
    "google2011": "pipeline.ingest.google2011:Google2011",
    "alibaba2017": "pipeline.ingest.alibaba2017:Alibaba2017",
    "alibaba2018": "pipeline.ingest.alibaba2018:Alibaba2018",
    "swim": "pipeline.ingest.swim:Swim",
    "sls": "pipeline.ingest.sls:Sls",
}


def adapter_class(fmt: str) -> type[Adapter]:
    """The adapter class registered under ``fmt``."""
    if fmt not in ADAPTERS:
        known = ", ".join(sorted(ADAPTERS))
        raise UsageError(f"unknown trace format '{fmt}' (known: {known})")
    module, cls = ADAPTERS[fmt].split(":")
    return getattr(import_module(module), cls)


def make_adapter(fmt: str) -> Adapter:
    """A new adapter for format ``fmt``."""
    return adapter_class(fmt)()
