-- Views over the store, for the duckdb shell and for cross-checking the Python analysis.
-- Re-created on every open, so they always match this hierconsole's schema. This file is a template:
-- each placeholder (a dollar sign and a name in braces) stands for domain words defined once in Python
-- (hierconsole.vocabulary, hierconsole.study.effects) and is filled in by hierconsole.study.views when
-- the store opens.

-- Registered (not post-hoc) test metrics, Q/G perturbations averaged within seed; the `hier` level is
-- the mean of strict middle and high mAP (never the leaf).
CREATE OR REPLACE VIEW per_seed_metrics AS
WITH base AS (
    SELECT study_id, aggregation, seed, arm, level, metric, avg(value) AS value
    FROM metrics
    WHERE NOT posthoc AND metric IN ('mAP', 'R@1', 'R@5', 'R@10', 'R@20')
    GROUP BY ALL
)
SELECT * FROM base
UNION ALL
SELECT study_id, aggregation, seed, arm, 'hier' AS level, 'mAP' AS metric, avg(value) AS value
FROM base
WHERE metric = 'mAP' AND level IN ('middle', 'high')
GROUP BY study_id, aggregation, seed, arm;

CREATE OR REPLACE VIEW arm_summary AS
SELECT study_id, aggregation, arm, level, metric, avg(value) AS mean, stddev_samp(value) AS sd,
       count(*) AS n
FROM per_seed_metrics
GROUP BY ALL;

-- Simple effects within seed (paper Eqs. 12-13 and the interaction).
CREATE OR REPLACE VIEW effects_per_seed AS
WITH wide AS (
    PIVOT per_seed_metrics ON arm IN ('E_R', 'H_R', 'E_S', 'H_S') USING first(value)
    GROUP BY study_id, aggregation, seed, level, metric
)
SELECT study_id, aggregation, level, metric, seed, effect, value
FROM wide,
LATERAL (VALUES
    ('geom_R', "H_R" - "E_R"),
    ('geom_S', "H_S" - "E_S"),
    ('loss_E', "E_S" - "E_R"),
    ('loss_H', "H_S" - "H_R"),
    ('interaction', ("H_S" - "E_S") - ("H_R" - "E_R"))
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
    WHERE metric = 'mAP' AND effect IN ('geom_S', 'geom_R') AND level IN ('leaf', 'middle', 'high')
    GROUP BY ALL
)
SELECT study_id, aggregation, effect,
       max(mean) FILTER (WHERE level = 'leaf') AS leaf,
       max(mean) FILTER (WHERE level = 'middle') AS middle,
       max(mean) FILTER (WHERE level = 'high') AS high,
       (max(mean) FILTER (WHERE level = 'leaf') < 0 AND max(mean) FILTER (WHERE level = 'middle') < 0 AND max(mean) FILTER (WHERE level = 'high') > 0) AS finer_down_highest_up
FROM s
GROUP BY ALL;

CREATE OR REPLACE VIEW audit_status AS
SELECT study_id, check_name,
       CASE WHEN ok IS NULL THEN 'pending' WHEN ok THEN 'pass' ELSE 'FAIL' END AS status,
       evidence, checked_at
FROM audits;
