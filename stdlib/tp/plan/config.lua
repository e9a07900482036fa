-- tp.config: the unified training config as data: its key paths and types, dotted-path access,
-- merging, validation against the rules of a fair, runnable experiment (with findings that name
-- the key path and what was expected), and loading from YAML, including the tprimat-era
-- config.yaml layout (experiment / hardware / models / training / parallelism /
-- platform_optimizations / benchmarking) with ${VAR:-default} expansion.
-- The unified keys are those of docs/frameworks.md (tp.frameworks.normalize); docs/recipes.md
-- describes the rules and the tprimat mapping.
--
-- This module is the public face; the code lives in private parts of tp.plan:
--   tp.plan._keys          the key paths, kinds, enumerations and the small table helpers
--   tp.plan._config_check  check_types, validate, for_framework
--   tp.plan._config_load   load, load_all, hoist (YAML/JSON, ${VAR}, the tprimat layout)
local keys = require('tp.plan._keys')
local check = require('tp.plan._config_check')
local load = require('tp.plan._config_load')

local M = {}

-- The unified keys (tp.plan._keys).
M.KEYS = keys.KEYS
M.ENUMS = keys.ENUMS
M.SECTIONS = keys.SECTIONS
M.DEFAULT_GPUS_PER_NODE = keys.DEFAULT_GPUS_PER_NODE

-- Small table helpers (tp.plan._keys).
M.copy = keys.copy
M.get = keys.get
M.set = keys.set
M.merge = keys.merge
M.flatten = keys.flatten
M.sorted_keys = keys.sorted_keys
M.show = keys.show

-- Type checking and validation (tp.plan._config_check).
M.check_types = check.check_types
M.validate = check.validate
M.for_framework = check.for_framework

-- Loading YAML (tp.plan._config_load).
M.hoist = load.hoist
M.MAX_FILE_SIZE = load.MAX_FILE_SIZE
M.load = load.load
M.load_all = load.load_all

return M
