"""SQL rendered from the vocabulary: the views of `store/views.sql`, and the fragments queries share.

views.sql is a template whose placeholders are rendered from `vocabulary` and `factorial`, so the
views can never disagree with the Python analysis about arms, metrics, effects or the hier score.
"""

from __future__ import annotations

from collections.abc import Iterable
from string import Template

from hierconsole.factorial import CONTRASTS, REDISTRIBUTION_CONTRASTS
from hierconsole.locations import resource_dir
from hierconsole.vocabulary import ARMS, HIER_LEVELS, HIER_SCORE, LEVELS, MAP, RANKING_METRICS, JobKind


def sql_literal(value: str) -> str:
    """A SQL string literal (single quotes doubled)."""
    return "'" + value.replace("'", "''") + "'"


def sql_list(values: Iterable[str]) -> str:
    """`'a', 'b', ...` for an IN (...) list of domain words."""
    return ", ".join(sql_literal(str(v)) for v in values)


def kind_order(column: str) -> str:
    """A sort key putting job kinds in `JobKind` order: tuning, final runs, then scoring."""
    return f"CASE {column} " + " ".join(f"WHEN {sql_literal(k)} THEN {i}" for i, k in enumerate(JobKind)) + " END"


def _mean_at(level: str) -> str:
    return f"max(mean) FILTER (WHERE level = {sql_literal(level)})"


def substitutions() -> dict[str, str]:
    finer, highest = LEVELS[:-1], LEVELS[-1]
    return {
        "ranking_metrics": sql_list(RANKING_METRICS),
        "hier": HIER_SCORE,
        "hier_levels": sql_list(HIER_LEVELS),
        "hier_rule": " and ".join(HIER_LEVELS) + f" {MAP}",
        "map": MAP,
        "arms": sql_list(ARMS),
        "effects": ",\n    ".join(f"({sql_literal(name)}, {c.sql()})" for name, c in CONTRASTS.items()),
        "redistribution_contrasts": sql_list(REDISTRIBUTION_CONTRASTS),
        "levels": sql_list(LEVELS),
        "level_columns": ",\n       ".join(f"{_mean_at(level)} AS {level}" for level in LEVELS),
        "finer_down_highest_up": " AND ".join(
            [f"{_mean_at(level)} < 0" for level in finer] + [f"{_mean_at(highest)} > 0"]
        ),
    }


def views_sql(*, temporary: bool = False) -> str:
    """The views, ready to execute. `temporary` makes them session-local (TEMP views shadow the stored
    ones), which is how a read-only open gets this version's views without writing the file."""
    sql = Template((resource_dir("store") / "views.sql").read_text()).substitute(substitutions())
    if temporary:
        sql = sql.replace("CREATE OR REPLACE VIEW", "CREATE OR REPLACE TEMP VIEW")
    return sql
