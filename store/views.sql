-- Views over the store, for the duckdb shell and for cross-checking the Python analysis.
-- Re-created on every open, so they always match this hierconsole's schema. This file is a template:
-- each placeholder (a dollar sign and a name in braces) stands for domain words defined once in Python
-- (hierconsole.vocabulary, hierconsole.study.effects) and is filled in by hierconsole.study.views when
-- the store opens.

-- Registered (not post-hoc) test metrics, Q/G perturbations averaged within seed; the `${hier}` level is
-- the mean of strict ${map} at the study's hier levels (study_levels.in_hier; never the leaf), summed one
-- level at a time in level order from 0.0 as vocabulary.hier_score does, levels without a value left out.
-- No level code is a column name here, so any depth (and any code) reads the same.
CREATE OR REPLACE VIEW per_seed_metrics AS
WITH base AS (
    SELECT study_id, aggregation, seed, arm, level, metric, avg(value) AS value
    FROM metrics
    WHERE NOT posthoc AND metric IN (${ranking_metrics})
    GROUP BY ALL
),
hier AS (
    SELECT b.study_id, b.aggregation, b.seed, b.arm,
           list(b.value ORDER BY l.position) FILTER (WHERE b.value IS NOT NULL AND NOT isnan(b.value)) AS present
    FROM base b JOIN study_levels l ON l.study_id = b.study_id AND l.code = b.level AND l.in_hier
    WHERE b.metric = '${map}'
    GROUP BY b.study_id, b.aggregation, b.seed, b.arm
)
SELECT * FROM base
UNION ALL
SELECT study_id, aggregation, seed, arm, '${hier}' AS level, '${map}' AS metric,
       list_reduce(coalesce(present, []), lambda x, y: x + y, 0.0::DOUBLE) / nullif(len(present), 0) AS value
FROM hier;

CREATE OR REPLACE VIEW arm_summary AS
SELECT study_id, aggregation, arm, level, metric, avg(value) AS mean, stddev_samp(value) AS sd,
       count(*) AS n
FROM per_seed_metrics
GROUP BY ALL;

-- Simple effects within seed (paper Eqs. 12-13 and the interaction).
CREATE OR REPLACE VIEW effects_per_seed AS
WITH wide AS (
    PIVOT per_seed_metrics ON arm IN (${arms}) USING first(value)
    GROUP BY study_id, aggregation, seed, level, metric
)
SELECT study_id, aggregation, level, metric, seed, effect, value
FROM wide,
LATERAL (VALUES
    ${effects}
) AS e(effect, value)
-- An effect needing an arm the study does not train is left out, not reported as null.
WHERE value IS NOT NULL;

CREATE OR REPLACE VIEW effects_summary AS
SELECT study_id, aggregation, level, metric, effect, avg(value) AS mean, stddev_samp(value) AS sd,
       count(*) FILTER (WHERE value > 0) AS positive_seeds, count(value) AS n_seeds
FROM effects_per_seed
GROUP BY ALL;

-- Level-wise redistribution: H - E under each loss, one row per level (position 1 = leaf ... K = top), with
-- the "finer down, highest up" flag of the contrast on each of its rows: every finer level's mean below
-- zero and the top level's above.
CREATE OR REPLACE VIEW redistribution AS
WITH s AS (
    SELECT e.study_id, e.aggregation, e.effect, l.position, e.level, avg(e.value) AS mean
    FROM effects_per_seed e JOIN study_levels l ON l.study_id = e.study_id AND l.code = e.level
    WHERE e.metric = '${map}' AND e.effect IN (${redistribution_contrasts})
    GROUP BY ALL
),
depth AS (
    SELECT study_id, max(position) AS top FROM study_levels GROUP BY study_id
)
SELECT s.study_id, s.aggregation, s.effect, s.position, s.level, s.mean,
       (bool_and(s.mean < 0) FILTER (WHERE s.position < d.top) OVER w
        AND bool_and(s.mean > 0) FILTER (WHERE s.position = d.top) OVER w) AS finer_down_highest_up
FROM s JOIN depth d USING (study_id)
WINDOW w AS (PARTITION BY s.study_id, s.aggregation, s.effect);

CREATE OR REPLACE VIEW audit_status AS
SELECT study_id, check_name,
       CASE WHEN ok IS NULL THEN 'pending' WHEN ok THEN 'pass' ELSE 'FAIL' END AS status,
       evidence, checked_at
FROM audits;
