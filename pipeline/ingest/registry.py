"""ADAPTERS: format name -> adapter class (the only place that knows every format)."""

from __future__ import annotations

from importlib import import_module
from typing import Any

from pipeline.errors import UsageError
from pipeline.ingest.base import Adapter

# name -> "module:Class"; imported lazily so one broken adapter never breaks the others.
ADAPTERS: dict[str, str] = {
    "google2011": "pipeline.ingest.google2011:Google2011",
    "alibaba2017": "pipeline.ingest.alibaba2017:Alibaba2017",
    "alibaba2018": "pipeline.ingest.alibaba2018:Alibaba2018",
    "swim": "pipeline.ingest.swim:Swim",
    "sls": "pipeline.ingest.sls:Sls",
    "alibaba-gpu2023": "pipeline.ingest.openb:Openb",
    "alibaba-gpu2020": "pipeline.ingest.pai2020:Pai2020",
    "google2019": "pipeline.ingest.google2019:Google2019",
    "swf": "pipeline.ingest.swf:Swf",
}


def adapter_class(fmt: str) -> type[Adapter]:
    """The adapter class registered under ``fmt``."""
    if fmt not in ADAPTERS:
        known = ", ".join(sorted(ADAPTERS))
        raise UsageError(f"unknown trace format '{fmt}' (known: {known})")
    module, cls = ADAPTERS[fmt].split(":")
    return getattr(import_module(module), cls)


def make_adapter(fmt: str, **options: Any) -> Adapter:
    """A new adapter for format ``fmt``, built with ``options`` (``ingest --set KEY=VALUE``).

    Only the options the class declares in ``options`` (name -> one-line description) are
    accepted; an adapter that declares none takes none.  The adapter checks the values.
    """
    cls = adapter_class(fmt)
    declared: dict[str, str] = getattr(cls, "options", {})
    for key in sorted(set(options) - set(declared)):
        known = ", ".join(f"{name} ({text})" for name, text in declared.items())
        reason = (f"unknown option '{key}' for format {fmt} (known: {known})" if declared
                  else f"format {fmt} takes no options (got '{key}')")
        raise UsageError(reason, field="--set")
    return cls(**options)
