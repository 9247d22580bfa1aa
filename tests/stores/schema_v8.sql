-- hierconsole store, schema version 8. Applied by hierconsole.storage on a new store. Every statement is
-- idempotent (IF NOT EXISTS): versions 2, 4, 5 and 6 only added tables, so their migrations re-apply
-- this file (storage.MIGRATIONS). A change to an existing table needs a migration of its own (version 3:
-- the jobs' executor columns; version 7: the levels of any depth, `storage._k_levels`; version 8: the
-- runs' objective_params, `storage._add_objective_params`).

CREATE TABLE IF NOT EXISTS meta (
    key   VARCHAR PRIMARY KEY,
    value VARCHAR NOT NULL
);

CREATE TABLE IF NOT EXISTS datasets (
    dataset_id  VARCHAR PRIMARY KEY,
    kind        VARCHAR NOT NULL,          -- generic | cub | nabirds | synthetic
    n_samples   INTEGER NOT NULL,
    dim         INTEGER NOT NULL,
    n_leaf      INTEGER NOT NULL,
    n_train     INTEGER NOT NULL,
    n_val       INTEGER NOT NULL,
    n_test      INTEGER NOT NULL,
    level_names VARCHAR[] NOT NULL,        -- display names, finest first
    sha256      VARCHAR NOT NULL,          -- content hash of features, ids, labels, split, taxonomy
    taxonomy_sha256 VARCHAR NOT NULL,
    artifact_dir VARCHAR NOT NULL,         -- self-contained copy that workers load
    sources     JSON NOT NULL,             -- input path -> sha256
    params      JSON NOT NULL,
    created_at  TIMESTAMP NOT NULL DEFAULT current_timestamp
);

-- Version 7: a dataset's K levels (2 <= K <= 12), leaf (position 1) to top (position K).
CREATE TABLE IF NOT EXISTS dataset_levels (
    dataset_id VARCHAR NOT NULL,
    position   INTEGER NOT NULL,           -- 1 = leaf ... K = top
    code       VARCHAR NOT NULL,           -- stored in metrics.level, JSON keys, column names (levels.Levels)
    name       VARCHAR NOT NULL,           -- display name from the data
    n_groups   INTEGER NOT NULL,           -- nodes at this level
    PRIMARY KEY (dataset_id, position)
);

CREATE TABLE IF NOT EXISTS taxonomy_nodes (
    dataset_id VARCHAR NOT NULL,
    leaf_index INTEGER NOT NULL,
    path       VARCHAR[] NOT NULL,         -- the leaf's node name at every level, leaf first (K names)
    PRIMARY KEY (dataset_id, leaf_index)
);

CREATE TABLE IF NOT EXISTS studies (
    study_id        VARCHAR PRIMARY KEY,
    name            VARCHAR NOT NULL,
    dataset_id      VARCHAR NOT NULL,
    preset          JSON NOT NULL,
    preset_sha256   VARCHAR NOT NULL,
    phase           VARCHAR NOT NULL,      -- tuning | training | locked | evaluating | complete | failed
    temperatures    JSON,                  -- chosen tau per geometry once known
    created_at      TIMESTAMP NOT NULL DEFAULT current_timestamp,
    locked_at       TIMESTAMP,
    lock_sha256     VARCHAR,               -- hash over preset hash, split hashes and final-state hashes
    test_first_read_at TIMESTAMP
);

-- Version 7: a study's level plan (levels.LevelPlan) over its dataset's levels, written at creation: which
-- levels it trains on and which its hier score averages. The views read the hier levels from here.
CREATE TABLE IF NOT EXISTS study_levels (
    study_id VARCHAR NOT NULL,
    position INTEGER NOT NULL,             -- dataset_levels.position
    code     VARCHAR NOT NULL,
    trained  BOOLEAN NOT NULL,
    in_hier  BOOLEAN NOT NULL,
    PRIMARY KEY (study_id, position)
);

CREATE TABLE IF NOT EXISTS splits (
    study_id  VARCHAR NOT NULL,
    role      VARCHAR NOT NULL,            -- protocol | tuning | qg:<seed>
    kind      VARCHAR NOT NULL,
    sha256    VARCHAR NOT NULL,
    sizes     JSON NOT NULL,               -- part -> count
    valid     JSON,                        -- strict valid-query counts per level (query/gallery splits)
    params    JSON NOT NULL,
    path      VARCHAR NOT NULL,            -- npz of index arrays under the study folder
    PRIMARY KEY (study_id, role)
);

CREATE TABLE IF NOT EXISTS jobs (
    job_id        VARCHAR PRIMARY KEY,     -- <study>/<kind>-<seed>[-tau]
    study_id      VARCHAR NOT NULL,
    kind          VARCHAR NOT NULL,        -- tune | final | evaluate
    seed          INTEGER NOT NULL,
    tau           DOUBLE,                  -- tuning candidate, null otherwise
    state         VARCHAR NOT NULL,        -- queued | running | finished | failed | cancelled | crashed
    epochs_total  INTEGER NOT NULL,
    epochs_done   INTEGER NOT NULL DEFAULT 0,
    pid           INTEGER,
    pid_start     VARCHAR,                 -- process start time, so a recycled PID is not mistaken for ours
    heartbeat_at  TIMESTAMP,
    attempts      INTEGER NOT NULL DEFAULT 0,
    device        VARCHAR,
    threads       INTEGER,
    error         VARCHAR,                 -- traceback tail of a failed worker
    created_at    TIMESTAMP NOT NULL DEFAULT current_timestamp,
    started_at    TIMESTAMP,
    finished_at   TIMESTAMP,
    executor      VARCHAR,                 -- local | ray: where its last attempt was launched
    node          VARCHAR                  -- where that attempt runs: "local", or the Ray node (host, node id)
);

CREATE TABLE IF NOT EXISTS runs (
    run_id          VARCHAR PRIMARY KEY,   -- <job_id>/<arm>
    job_id          VARCHAR NOT NULL,
    study_id        VARCHAR NOT NULL,
    kind            VARCHAR NOT NULL,
    seed            INTEGER NOT NULL,
    arm             VARCHAR NOT NULL,      -- E_R | H_R | E_S | H_S
    geometry        VARCHAR NOT NULL,
    loss            VARCHAR NOT NULL,
    tau             DOUBLE,
    trainable_params INTEGER,              -- the projector's (the parameter audit compares these)
    init_sha256     VARCHAR,
    final_sha256    VARCHAR,
    updates         INTEGER,
    reload_max_diff DOUBLE,
    best_epoch      INTEGER,
    best_score      DOUBLE,
    max_norm        DOUBLE,                -- hyperbolic cells: largest official-test embedding norm
    ball_radius     DOUBLE,
    norm_bound      DOUBLE,                -- analytic bound tanh(sqrt(c) r) / sqrt(c)
    objective_params INTEGER DEFAULT 0     -- what the objective adds: leaf prototypes, HIER's proxies
);

CREATE TABLE IF NOT EXISTS epochs (
    run_id        VARCHAR NOT NULL,
    epoch         INTEGER NOT NULL,
    train_loss    DOUBLE NOT NULL,
    updates       INTEGER NOT NULL,
    batch_sha256  VARCHAR NOT NULL,
    seconds       DOUBLE,
    PRIMARY KEY (run_id, epoch)
);

CREATE TABLE IF NOT EXISTS val_metrics (
    run_id      VARCHAR NOT NULL,
    epoch       INTEGER NOT NULL,
    aggregation VARCHAR NOT NULL,
    level       VARCHAR NOT NULL,
    metric      VARCHAR NOT NULL,
    value       DOUBLE,
    PRIMARY KEY (run_id, epoch, aggregation, level, metric)
);

CREATE TABLE IF NOT EXISTS metrics (
    study_id     VARCHAR NOT NULL,
    run_id       VARCHAR NOT NULL,
    seed         INTEGER NOT NULL,
    arm          VARCHAR NOT NULL,
    perturbation INTEGER NOT NULL,         -- Q/G seed
    aggregation  VARCHAR NOT NULL,         -- micro | macro
    level        VARCHAR NOT NULL,
    metric       VARCHAR NOT NULL,         -- mAP | R@K | valid_queries | groups
    value        DOUBLE,
    posthoc      BOOLEAN NOT NULL DEFAULT false,  -- re-scored under a non-registered aggregation
    PRIMARY KEY (run_id, perturbation, aggregation, level, metric)
);

CREATE TABLE IF NOT EXISTS tuning (
    study_id  VARCHAR NOT NULL,
    geometry  VARCHAR NOT NULL,
    tau       DOUBLE NOT NULL,
    score     DOUBLE,                      -- the validation hier score (vocabulary.hier_score)
    status    VARCHAR,                     -- winner | runner-up | null
    PRIMARY KEY (study_id, geometry, tau)
);

-- Version 7: each tuning candidate's validation mAP at every hier level (null: no valid query).
CREATE TABLE IF NOT EXISTS tuning_levels (
    study_id  VARCHAR NOT NULL,
    geometry  VARCHAR NOT NULL,
    tau       DOUBLE NOT NULL,
    level     VARCHAR NOT NULL,            -- a level code, in study_levels
    mAP       DOUBLE,
    PRIMARY KEY (study_id, geometry, tau, level)
);

CREATE TABLE IF NOT EXISTS audits (
    study_id   VARCHAR NOT NULL,
    check_name VARCHAR NOT NULL,
    ok         BOOLEAN,                    -- null: pending
    evidence   VARCHAR NOT NULL,
    checked_at TIMESTAMP NOT NULL DEFAULT current_timestamp,
    PRIMARY KEY (study_id, check_name)
);

CREATE TABLE IF NOT EXISTS events (
    job_id  VARCHAR NOT NULL,
    key     VARCHAR NOT NULL,              -- idempotent: replaying a job's events.jsonl rewrites, never duplicates
    kind    VARCHAR NOT NULL,
    payload JSON NOT NULL,
    ts      TIMESTAMP NOT NULL,
    PRIMARY KEY (job_id, key)
);

-- Version 2 --------------------------------------------------------------------------------------------

-- The training taxonomy of a semantic-alignment control (preset controls.taxonomy_shuffle): development
-- nodes re-attached at random at every edge, group sizes kept. Evaluation always reads the true taxonomy.
CREATE TABLE IF NOT EXISTS taxonomy_shuffles (
    study_id     VARCHAR PRIMARY KEY,
    seed         BIGINT NOT NULL,
    sha256       VARCHAR NOT NULL,         -- Taxonomy.sha256 of the training taxonomy
    path         VARCHAR NOT NULL          -- npz (one array per edge, levels.Levels.edge_key) jobs read
);

-- Version 7: the shuffle at each edge, fine to coarse (K-1 rows).
CREATE TABLE IF NOT EXISTS taxonomy_shuffle_edges (
    study_id  VARCHAR NOT NULL,
    position  INTEGER NOT NULL,            -- the child level's dataset_levels.position (1 = leaf)
    edge      VARCHAR NOT NULL,            -- levels.Levels.edge_key: leaf_middle, middle_high, ...
    parents   JSON NOT NULL,               -- the permutation: training parent index per child node
    dev_nodes INTEGER NOT NULL,            -- child nodes with a development sample (the only ones moved)
    fixed     INTEGER NOT NULL,            -- development nodes left under their true parent
    fixed_min INTEGER NOT NULL,            -- the fewest the group sizes allow
    PRIMARY KEY (study_id, position)
);

-- A family: studies of one base preset, each member with its overrides, sharing the training seeds.
CREATE TABLE IF NOT EXISTS families (
    family_id   VARCHAR PRIMARY KEY,
    name        VARCHAR NOT NULL,
    definition  JSON NOT NULL,             -- base preset, members and their overrides, declared contrasts
    sha256      VARCHAR NOT NULL,
    created_at  TIMESTAMP NOT NULL DEFAULT current_timestamp
);

CREATE TABLE IF NOT EXISTS family_members (
    family_id VARCHAR NOT NULL,
    member    VARCHAR NOT NULL,
    position  INTEGER NOT NULL,
    study_id  VARCHAR NOT NULL,
    overrides JSON NOT NULL,               -- dotted key -> value, on top of the base preset
    PRIMARY KEY (family_id, member)
);

-- A replication: the paper's pipeline as a graph of stages (version 4). Each stage row records the key
-- (a hash of its inputs' content hashes) it last finished under, so a re-run skips it and a changed
-- input shows as a stage whose stored key differs from the one computed now.
CREATE TABLE IF NOT EXISTS replication_stages (
    replication_id VARCHAR NOT NULL,
    stage          VARCHAR NOT NULL,
    state          VARCHAR NOT NULL,       -- pending | running | done | failed
    input_key      VARCHAR NOT NULL,       -- sha256 over the stage's inputs when it last started
    outputs        JSON NOT NULL,          -- name -> content hash of what it produced (the dependents' inputs)
    seconds        DOUBLE,                 -- wall time of the finished run (refines the estimate)
    updated_at     TIMESTAMP NOT NULL DEFAULT current_timestamp,
    PRIMARY KEY (replication_id, stage)
);

-- Version 5: the training duration each arm of a study that selects its epoch (training.select_epoch) was
-- frozen at when the study was locked: the candidate epoch with the best mean over seeds of the validation
-- score; every seed of the arm is scored at it.
CREATE TABLE IF NOT EXISTS arm_durations (
    study_id VARCHAR NOT NULL,
    arm      VARCHAR NOT NULL,
    epoch    INTEGER NOT NULL,
    score    DOUBLE NOT NULL,              -- mean over seeds of the validation selection score at epoch
    seeds    INTEGER NOT NULL,
    PRIMARY KEY (study_id, arm)
);

-- Version 6: `replicate`'s time estimate. A calibration is this machine's unit costs (seconds per child
-- start-up, cell-update, scored query x gallery pair, extracted image), keyed by what they depend on (the
-- machine, its cores, torch, the model, the plan's shapes and threads), so another machine or model is
-- measured again; replication_work is each stage's counted work, priced by the calibration it names.
CREATE TABLE IF NOT EXISTS calibrations (
    calibration_key VARCHAR PRIMARY KEY,   -- sha256 over what the unit costs depend on
    described       JSON NOT NULL,         -- those inputs: machine, cores, python, torch, model, shapes
    units           JSON NOT NULL,         -- study.replication.costs.UnitCosts as measured
    measured_at     TIMESTAMP NOT NULL DEFAULT current_timestamp
);

CREATE TABLE IF NOT EXISTS replication_work (
    replication_id  VARCHAR PRIMARY KEY,
    calibration_key VARCHAR NOT NULL,
    work            JSON NOT NULL,         -- stage -> study.replication.costs.StageWork
    updated_at      TIMESTAMP NOT NULL DEFAULT current_timestamp
);
