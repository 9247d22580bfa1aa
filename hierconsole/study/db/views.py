"""SQL rendered from the vocabulary: the views of `store/views.sql`, and the fragments queries share.

views.sql is a template whose placeholders are rendered from `vocabulary` and `factorial`, so the
views can never disagree with the Python analysis about arms, metrics, effects or the hier score.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from string import Template

from hierconsole.factorial import CONTRASTS, REDISTRIBUTION_CONTRASTS
from hierconsole.locations import resource_dir
from hierconsole.vocabulary import ARMS, HIER_SCORE, MAP, RANKING_METRICS, JobKind


def sql_literal(value: str) -> str:
    """A SQL string literal (single quotes doubled)."""
    return "'" + value.replace("'", "''") + "'"


def sql_list(values: Iterable[str]) -> str:
    """`'a', 'b', ...` for an IN (...) list of domain words."""
    return ", ".join(sql_literal(str(v)) for v in values)


def kind_order(column: str) -> str:
    """A sort key putting job kinds in `JobKind` order: tuning, final runs, then scoring."""
    return f"CASE {column} " + " ".join(f"WHEN {sql_literal(k)} THEN {i}" for i, k in enumerate(JobKind)) + " END"


def substitutions() -> dict[str, str]:
    """The domain words of views.sql. No level is among them: the views read each study's levels from
    `study_levels`, so one rendering serves every depth."""
    return {
        "ranking_metrics": sql_list(RANKING_METRICS),
        "hier": HIER_SCORE,
        "map": MAP,
        "arms": sql_list(ARMS),
        "effects": ",\n    ".join(f"({sql_literal(name)}, {c.sql()})" for name, c in CONTRASTS.items()),
        "redistribution_contrasts": sql_list(REDISTRIBUTION_CONTRASTS),
    }


def tuning_sql(hier: Sequence[str]) -> str:
    """The tuning table of one study (parameter: its id) as it is exported: a `{level}_mAP` column per hier
    level in the study's order (`middle_mAP, high_mAP` for three levels), then the score and status."""
    columns = "".join(
        f"max(l.{MAP}) FILTER (WHERE l.level = {sql_literal(code)}) AS {sql_identifier(f'{code}_{MAP}')}, "
        for code in hier
    )
    return (
        f"SELECT t.study_id, t.geometry, t.tau, {columns}any_value(t.score) AS score, any_value(t.status) AS status "
        "FROM tuning t LEFT JOIN tuning_levels l USING (study_id, geometry, tau) WHERE t.study_id = ? "
        "GROUP BY t.study_id, t.geometry, t.tau ORDER BY t.geometry, t.tau"
    )


def sql_identifier(name: str) -> str:
    """A quoted SQL identifier (double quotes doubled): a level code may be a SQL keyword (`order`)."""
    return '"' + name.replace('"', '""') + '"'


def views_sql(*, temporary: bool = False) -> str:
    """The views, ready to execute. `temporary` makes them session-local (TEMP views shadow the stored
    ones), which is how a read-only open gets this version's views without writing the file."""
    sql = Template((resource_dir("store") / "views.sql").read_text()).substitute(substitutions())
    if temporary:
        sql = sql.replace("CREATE OR REPLACE VIEW", "CREATE OR REPLACE TEMP VIEW")
    return sql
