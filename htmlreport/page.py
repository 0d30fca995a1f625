"""The report as one HTML file: styles, scripts (report.js and the vendored
dagre graph layout, MIT licence) and data inline, nothing fetched when viewed."""

from __future__ import annotations

import html
import json
import re
from importlib import resources
from typing import Any


def _asset(name: str) -> str:
    return (resources.files("meshjit.htmlreport") / "assets" / name).read_text("utf-8")


def _inline(text: str) -> str:
    """Text safe inside a <script> or <style> element (only `</script`,
    `</style` and `<!--` end or change one; `<\\/` means `</` in JS and JSON)."""
    text = re.sub(r"</(script|style)", r"<\\/\1", text, flags=re.IGNORECASE)
    return text.replace("<!--", "<\\u0021--")


def render_html(model: dict[str, Any]) -> str:
    data = json.dumps(model, separators=(",", ":"), sort_keys=False)
    licence = _asset("dagre-LICENSE.txt")
    dagre = f"/* dagre {_DAGRE_VERSION}, vendored unchanged but for its source-map "
    dagre += f"comment.\n{licence}*/\n" + _asset("dagre.min.js")
    return _asset("report.html").format(
        title=html.escape(str(model.get("title", ""))),
        css=_inline(_asset("report.css")),
        data=_inline(data),
        dagre=_inline(dagre),
        js=_inline(_asset("report.js")),
    )


_DAGRE_VERSION = "@dagrejs/dagre 3.1.3"
