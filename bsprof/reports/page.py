"""One self-contained HTML page: plotly.js embedded once, each figure a JSON spec drawn on load.

Sections are plain data (title, HTML snippets, plotly figures); this module only lays them out. The
page records in ``<body data-figures-total=N data-figures-rendered=M>`` how many figures were drawn
and writes script errors into ``#bsprof-console``, so a headless browser can check the result.
"""

from __future__ import annotations

import datetime as _dt
import html
import json
from dataclasses import dataclass, field
from typing import Any, Iterable, Sequence

from bsprof.io import BSPROF_MARK


def esc(value: Any) -> str:
    return html.escape(str(value), quote=True)


@dataclass
class Figure:
    """A plotly figure (``go.Figure`` or its dict) and the height it needs."""

    fig: Any
    height: int = 360
    caption: str = ""


@dataclass
class Section:
    id: str
    title: str
    blocks: list[Any] = field(default_factory=list)  # str (trusted HTML) or Figure
    level: str = "ok"  # ok | note | warning

    def add(self, *blocks: Any) -> "Section":
        self.blocks.extend(blocks)
        return self


def note(text: str, level: str = "note") -> str:
    """A clearly marked line on the page (``level``: note or warning)."""
    return f'<p class="{esc(level)}">{esc(text)}</p>'


def table(
    rows: Sequence[Sequence[Any]],
    header: Sequence[str] | None = None,
    classes: Sequence[str] | None = None,
    caption: str = "",
    numeric: Sequence[int] = (),
) -> str:
    """An HTML table; cells are escaped unless given as ``Raw``; ``numeric`` columns align right."""
    out = ['<table class="kv">']
    if caption:
        out.append(f"<caption>{esc(caption)}</caption>")
    if header:
        out.append(
            "<thead><tr>"
            + "".join(f"<th{_num(j, numeric)}>{esc(h)}</th>" for j, h in enumerate(header))
            + "</tr></thead>"
        )
    out.append("<tbody>")
    for i, row in enumerate(rows):
        cls = f' class="{esc(classes[i])}"' if classes and i < len(classes) and classes[i] else ""
        out.append(
            f"<tr{cls}>"
            + "".join(
                f"<td{_num(j, numeric)}>{c.html if isinstance(c, Raw) else esc(c)}</td>" for j, c in enumerate(row)
            )
            + "</tr>"
        )
    out.append("</tbody></table>")
    return "".join(out)


def _num(j: int, numeric: Sequence[int]) -> str:
    return ' class="num"' if j in numeric else ""


@dataclass
class Raw:
    html: str


_CSS = """
:root { --fg:#1d2330; --muted:#5b6475; --line:#dde2ea; --bg:#f6f7f9; --card:#fff; --warn:#a03b00; --ok:#1f6f43; }
* { box-sizing: border-box; }
body { margin:0; font:14px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif; color:var(--fg); background:var(--bg); }
header { padding:18px 28px 10px; background:#1d2330; color:#fff; }
header h1 { margin:0 0 4px; font-size:20px; font-weight:600; }
header .sub { color:#c6cbd6; font-size:13px; }
nav { padding:6px 28px; background:#eef0f4; border-bottom:1px solid var(--line); font-size:13px; }
nav a { margin-right:14px; color:#2b5fb4; text-decoration:none; white-space:nowrap; }
main { padding:12px 28px 40px; }
section { background:var(--card); border:1px solid var(--line); border-radius:6px; margin:14px 0; padding:10px 16px 14px; }
section h2 { font-size:16px; margin:4px 0 8px; }
section.warning { border-left:4px solid var(--warn); }
.cols { display:grid; grid-template-columns: repeat(var(--ncols,1), minmax(0,1fr)); gap:18px; }
.col h3 { font-size:13px; margin:2px 0 6px; color:var(--muted); text-transform:uppercase; letter-spacing:.04em; }
.fig { width:100%; }
.caption { color:var(--muted); font-size:12px; margin:2px 0 10px; overflow-wrap:anywhere; }
p.note { color:var(--muted); margin:6px 0; }
p.note::before { content:"note: "; font-weight:600; }
p.warning { color:var(--warn); margin:6px 0; }
p.warning::before { content:"⚠ "; }
table.kv { border-collapse:collapse; margin:6px 0 10px; font-size:13px; }
table.kv caption { text-align:left; color:var(--muted); font-size:12px; padding-bottom:3px; }
table.kv th, table.kv td { border-bottom:1px solid var(--line); padding:3px 10px 3px 0; text-align:left; vertical-align:top; overflow-wrap:break-word; }
table.kv { max-width:100%; }
table.kv th { color:var(--muted); font-weight:600; }
table.kv td.num, table.kv th.num { text-align:right; }
tr.better td { color:var(--ok); } tr.worse td { color:var(--warn); }
.verdict { font-size:18px; font-weight:600; margin:4px 0 6px; }
.pill { display:inline-block; padding:1px 8px; border-radius:10px; background:#eef0f4; margin-right:6px; font-size:12px; }
code, pre { font-family: ui-monospace, "SFMono-Regular", Menlo, monospace; font-size:12px; }
pre { background:#f3f4f7; padding:8px; border-radius:4px; overflow-x:auto; }
#bsprof-console:empty { display:none; }
#bsprof-console { color:var(--warn); white-space:pre-wrap; }
footer { color:var(--muted); font-size:12px; padding:0 28px 20px; }
"""

# Draws every figure once plotly.js is parsed; counts what rendered; records script errors in the DOM
# (a headless test reads both back).
_LOADER = """
(function(){
  var con = document.getElementById('bsprof-console');
  function report(msg){ con.textContent += msg + "\\n"; document.body.dataset.errors = (+document.body.dataset.errors||0)+1; }
  window.addEventListener('error', function(e){ report('error: ' + (e.message || e)); });
  window.addEventListener('unhandledrejection', function(e){ report('error: ' + (e.reason && e.reason.message || e.reason)); });
  if (typeof Plotly === 'undefined') { report('error: plotly.js did not load'); return; }
  var specs = document.querySelectorAll('script.bsprof-fig');
  var done = 0;
  var config = {displaylogo:false, responsive:true, modeBarButtonsToRemove:['select2d','lasso2d']};
  specs.forEach(function(s){
    var spec = JSON.parse(s.textContent);
    var div = document.getElementById(s.dataset.target);
    Plotly.newPlot(div, spec.data || [], spec.layout || {}, config).then(function(){
      done += 1; document.body.dataset.figuresRendered = done;
    }).catch(function(err){ report('error: figure ' + s.dataset.target + ': ' + err); });
  });
})();
"""


def _figure_json(fig: Any) -> str:
    import plotly.io as pio

    text = pio.to_json(fig, validate=False, pretty=False, remove_uids=True)
    spec = json.loads(text)
    spec.pop("config", None)
    # the page's one template keeps figure JSON small: drop plotly's embedded default template
    layout = spec.setdefault("layout", {})
    layout.pop("template", None)
    return script_json(spec)


# Inside <script> the HTML parser knows no entities and ends the element at `</script`, and `<!--`
# switches it into escaped states where a later `<script>` keeps it open past its own end tag: no
# `<` may reach the page from data, so every `<`, `>` and `&` of the JSON becomes its \u escape
# (JSON.parse reads the same text).
_SCRIPT_SAFE = str.maketrans({"<": "\\u003c", ">": "\\u003e", "&": "\\u0026", "\u2028": "\\u2028", "\u2029": "\\u2029"})


def script_json(obj: Any) -> str:
    """``obj`` as compact JSON that is safe as the content of a ``<script>`` element."""
    return json.dumps(obj, separators=(",", ":")).translate(_SCRIPT_SAFE)


_LAYOUT_DEFAULTS = {
    "font": {"family": "system-ui, sans-serif", "size": 12, "color": "#1d2330"},
    "paper_bgcolor": "#ffffff",
    "plot_bgcolor": "#ffffff",
    "margin": {"l": 60, "r": 20, "t": 44, "b": 48},
    "title": {"x": 0.01, "xanchor": "left"},
}


def _apply_defaults(fig: Any, height: int) -> Any:
    import plotly.graph_objects as go

    if isinstance(fig, dict):
        fig = go.Figure(fig)
    fig.update_layout(height=height, **{k: v for k, v in _LAYOUT_DEFAULTS.items()})
    fig.update_xaxes(gridcolor="#eceff3", zerolinecolor="#cfd5de", automargin=True)
    fig.update_yaxes(gridcolor="#eceff3", zerolinecolor="#cfd5de", automargin=True)
    return fig


class _Counter:
    def __init__(self) -> None:
        self.n = 0

    def next(self) -> str:
        self.n += 1
        return f"fig-{self.n}"


def _render_blocks(blocks: Iterable[Any], counter: _Counter, scripts: list[str]) -> str:
    out = []
    for block in blocks:
        if isinstance(block, Figure):
            target = counter.next()
            fig = _apply_defaults(block.fig, block.height)
            out.append(f'<div class="fig plotly-target" id="{target}" style="height:{block.height}px"></div>')
            if block.caption:
                out.append(f'<div class="caption">{esc(block.caption)}</div>')
            scripts.append(
                f'<script type="application/json" class="bsprof-fig" data-target="{target}">'
                f"{_figure_json(fig)}</script>"
            )
        else:
            out.append(str(block))
    return "".join(out)


@dataclass
class Row:
    """One section of the page: a single column, or one column per run (baseline | optimized)."""

    id: str
    title: str
    columns: list[tuple[str, Section | None]]  # (column heading, section or None = no data there)

    @property
    def level(self) -> str:
        levels = [s.level for _, s in self.columns if s is not None]
        return "warning" if "warning" in levels else "ok"


def render_page(
    title: str, subtitle: str, rows: list[Row], preamble: list[str] | None = None, plotly_js: str | None = None
) -> str:
    """The whole HTML document. ``plotly_js`` defaults to the installed plotly's bundle (embedded once)."""
    if plotly_js is None:
        from plotly.offline import get_plotlyjs

        plotly_js = get_plotlyjs()
    counter = _Counter()
    scripts: list[str] = []
    body: list[str] = []
    for block in preamble or []:
        body.append(block)
    for row in rows:
        ncols = len(row.columns)
        body.append(f'<section id="{esc(row.id)}" class="{esc(row.level)}"><h2>{esc(row.title)}</h2>')
        if ncols == 1:
            sec = row.columns[0][1]
            body.append(_render_blocks(sec.blocks if sec else [note("no data")], counter, scripts))
        else:
            body.append(f'<div class="cols" style="--ncols:{ncols}">')
            for heading, sec in row.columns:
                body.append(f'<div class="col"><h3>{esc(heading)}</h3>')
                body.append(
                    _render_blocks(
                        sec.blocks if sec else [note("no data for this section in this run")], counter, scripts
                    )
                )
                body.append("</div>")
            body.append("</div>")
        body.append("</section>")
    nav = " ".join(f'<a href="#{esc(r.id)}">{esc(r.title)}</a>' for r in rows)
    now = _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    return "".join(
        [
            '<!DOCTYPE html><html lang="en"><head><meta charset="utf-8">',
            BSPROF_MARK,
            '<meta name="viewport" content="width=device-width, initial-scale=1">',
            f"<title>{esc(title)}</title><style>{_CSS}</style>",
            f"<script>{plotly_js}</script></head>",
            f'<body data-figures-total="{counter.n}" data-figures-rendered="0" data-errors="0">',
            f'<header><h1>{esc(title)}</h1><div class="sub">{esc(subtitle)} · generated {now}</div></header>',
            f'<nav>{nav}</nav><main><pre id="bsprof-console"></pre>',
            "".join(body),
            "</main><footer>bsprof report · plotly.js embedded, opens offline</footer>",
            "".join(scripts),
            f"<script>{_LOADER}</script></body></html>",
        ]
    )
