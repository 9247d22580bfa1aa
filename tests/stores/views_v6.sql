-- Views over the store, for the duckdb shell and for cross-checking the Python analysis.
-- Re-created on every open, so they always match this hierconsole's schema. This file is a template:
-- each placeholder (a dollar sign and a name in braces) stands for domain words defined once in Python
-- (hierconsole.vocabulary, hierconsole.study.effects) and is filled in by hierconsole.study.views when
-- the store opens.

-- Registered (not post-hoc) test metrics, Q/G perturbations averaged within seed; the `${hier}` level is
-- the mean of strict ${hier_rule} (never the leaf).
CREATE OR REPLACE VIEW per_seed_metrics AS
WITH base AS (
    SELECT study_id, aggregation, seed, arm, level, metric, avg(value) AS value
    FROM metrics
    WHERE NOT posthoc AND metric IN (${ranking_metrics})
    GROUP BY ALL
)
SELECT * FROM base
UNION ALL
SELECT study_id, aggregation, seed, arm, '${hier}' AS level, '${map}' AS metric, avg(value) AS value
FROM base
WHERE metric = '${map}' AND level IN (${hier_levels})
GROUP BY study_id, aggregation, seed, arm;

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

-- Level-wise redistribution: H - E under each loss, per level, with the "finer down, highest up" flag.
CREATE OR REPLACE VIEW redistribution AS
WITH s AS (
    SELECT study_id, aggregation, effect, level, avg(value) AS mean
    FROM effects_per_seed
    WHERE metric = '${map}' AND effect IN (${redistribution_contrasts}) AND level IN (${levels})
    GROUP BY ALL
)
SELECT study_id, aggregation, effect,
       ${level_columns},
       (${finer_down_highest_up}) AS finer_down_highest_up
FROM s
GROUP BY ALL;

CREATE OR REPLACE VIEW audit_status AS
SELECT study_id, check_name,
       CASE WHEN ok IS NULL THEN 'pending' WHEN ok THEN 'pass' ELSE 'FAIL' END AS status,
       evidence, checked_at
FROM audits;
