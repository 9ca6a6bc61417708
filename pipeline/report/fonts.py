"""The one font every chart is drawn in, brought by the project, so a report's bytes do not
depend on the fonts a machine happens to have.

Vega draws text in ``sans-serif`` by default, which the renderer resolves to whatever the
machine has (installing a browser brings Liberation Sans and changed every chart PNG).  So
charts name one family, and the renderer gets that family from files the project brings:
Source Sans Pro (Adobe, SIL Open Font License 1.1) as the ``font-source-sans-pro`` package
ships it, renamed with fontTools to :data:`FAMILY` (the licence's reserved name "Source"
may not stay on a modified copy, and a family no machine has cannot be shadowed by a copy
the user installed).  Its regular and bold faces cover every character the report draws
(a test checks); its italic faces are registered too, so no style falls back to a
machine's font.  The HTML report embeds the regular and bold faces, so a browser draws what
the PNGs show.
"""

from __future__ import annotations

import atexit
import base64
import shutil
import tempfile
from functools import cache
from io import BytesIO
from pathlib import Path

import font_source_sans_pro
import vl_convert as vlc
from fontTools.ttLib import TTFont

FAMILY = "tracereplay Sans"
FACES = {"Regular": "SourceSansPro-Regular.ttf", "Bold": "SourceSansPro-Bold.ttf",
         "Italic": "SourceSansPro-It.ttf", "BoldItalic": "SourceSansPro-BoldIt.ttf"}
EMBEDDED = ("Regular", "Bold")  # the faces the HTML page carries (it draws no italics)
# name table entries naming the family (1, 16), the full name (4) and the PostScript name (6)
_FAMILY_IDS, _FULL_ID, _POSTSCRIPT_ID = (1, 16), 4, 6


def _renamed(source: Path, face: str) -> bytes:
    """The font file ``source`` with its family renamed to :data:`FAMILY`."""
    font = TTFont(source, recalcTimestamp=False)  # (a new timestamp: other bytes each run)
    names = font["name"]
    for record in list(names.names):
        if record.nameID in _FAMILY_IDS:
            record.string = FAMILY
        elif record.nameID == _FULL_ID:
            record.string = f"{FAMILY} {face}"
        elif record.nameID == _POSTSCRIPT_ID:
            record.string = f"{FAMILY.replace(' ', '')}-{face}"
    out = BytesIO()
    font.save(out)
    return out.getvalue()


@cache
def font_files() -> dict[str, bytes]:
    """The renamed faces (face -> TTF bytes), made once per process."""
    source = Path(font_source_sans_pro.font_directory)
    return {face: _renamed(source / name, face) for face, name in FACES.items()}


@cache
def registered() -> str:
    """Register :data:`FAMILY` with the chart renderer (once per process); its name."""
    directory = Path(tempfile.mkdtemp(prefix="tracereplay-fonts-"))
    atexit.register(shutil.rmtree, directory, ignore_errors=True)
    for face, data in font_files().items():
        (directory / f"{FAMILY.replace(' ', '')}-{face}.ttf").write_bytes(data)
    vlc.register_font_directory(str(directory))
    return FAMILY


def themed(spec: dict) -> dict:
    """``spec`` with every title, label and text mark in :data:`FAMILY`."""
    config = dict(spec.get("config") or {})
    config["font"] = FAMILY
    return {**spec, "config": config}


def css_font_faces() -> str:
    """``@font-face`` rules embedding the faces, for the HTML report."""
    rules = []
    for face in EMBEDDED:
        data = font_files()[face]
        weight = "bold" if face == "Bold" else "normal"
        encoded = base64.b64encode(data).decode("ascii")
        rules.append(f"@font-face {{ font-family: '{FAMILY}'; font-weight: {weight}; "
                     f"src: url(data:font/ttf;base64,{encoded}) format('truetype'); }}")
    return "\n".join(rules)
