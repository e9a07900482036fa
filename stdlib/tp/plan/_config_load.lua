-- tp.plan._config_load: loading an experiment spec from YAML or JSON: ${VAR} expansion, the
-- tprimat-era config.yaml mapping, hoisting settings shared by all platforms, load and load_all.
local keys = require('tp.plan._keys')
local check = require('tp.plan._config_check')

local check_kind, type_error = check.check_kind, check.type_error

local M = {}

-- Re-types a string produced by ${VAR} expansion the way a YAML 1.2 core-schema plain scalar
-- would be typed: "64" -> 64, "3.0e-4" -> 3e-4, "true" -> true. Anything else stays a string.
local function retype(s)
  if s == 'true' then
    return true
  elseif s == 'false' then
    return false
  end
  if s:match('^[-+]?%d+$') then
    return math.tointeger(tonumber(s)) or tonumber(s)
  end
  if s:match('^[-+]?%d*%.?%d+[eE][-+]?%d+$') or s:match('^[-+]?%d+%.%d*$')
    or s:match('^[-+]?%.%d+$') or s:match('^[-+]?%d+%.?%d*[eE][-+]?%d+$') then
    return tonumber(s)
  end
  return s
end

-- Expands ${VAR} / ${VAR:-default} in every string of `doc` (tp.yaml.expand_env) and re-types
-- the strings that held a reference.
local function expand(doc, env)
  local yaml = require('tp.yaml')
  local marked = {}
  local function mark(v, path)
    if type(v) == 'string' and v:find('${', 1, true) then
      marked[path] = true
    elseif type(v) == 'table' then
      for k, x in pairs(v) do
        mark(x, path .. '.' .. tostring(k))
      end
    end
  end
  mark(doc, '$')
  local out, err, code = yaml.expand_env(doc, env)
  if out == nil then
    return nil, err, code
  end
  local function fix(v, path)
    if type(v) == 'string' and marked[path] then
      return retype(v)
    elseif type(v) == 'table' then
      for k, x in pairs(v) do
        v[k] = fix(x, path .. '.' .. tostring(k))
      end
    end
    return v
  end
  return fix(out, '$')
end

-- tprimat's hardware.platforms keys and GPU names -> tplua platform names and catalog ids.
local TPRIMAT_PLATFORM = { nvidia = 'nvd', nvd = 'nvd', amd = 'amd' }
local FRAMEWORKS = { megatron = true, primus = true, nemo = true, torchtitan = true }

local function gpu_model_to_id(name)
  if type(name) ~= 'string' then
    return nil
  end
  local hw = require('tp.catalog.hardware')
  local low = name:lower():gsub('%s+', '-')
  for _, cand in ipairs({ low, low .. '-sxm', (low:gsub('^nvidia%-', '')), (low:gsub('^amd%-',
    '')), (low:gsub('^nvidia%-', '')) .. '-sxm' }) do
    if hw.get(cand) then
      return cand
    end
  end
  return nil
end

-- tprimat model names ("llama3.1_8b") -> tp.models ids ("llama3.1-8b").
local function model_name_to_id(name)
  if type(name) ~= 'string' then
    return nil
  end
  local id = name:lower():gsub('_', '-')
  if require('tp.catalog.models').get(id) then
    return id
  end
  return nil
end

-- A reader over the decoded tprimat document that records typed errors with file key paths.
local function reader(doc, errors)
  local r = {}
  function r.at(path)
    return keys.get(doc, path)
  end
  function r.typed(path, kind, v)
    if v == nil then
      v = keys.get(doc, path)
    end
    if v == nil then
      return nil
    end
    local ok, msg = check_kind(path, kind, v)
    if ok == nil then
      errors[#errors + 1] = msg
      return nil
    end
    return ok
  end
  function r.fail(fmt, ...)
    errors[#errors + 1] = string.format(fmt, ...)
  end
  return r
end

-- Maps a tprimat-era document to one experiment spec per model (see docs/recipes.md, "tprimat
-- config.yaml").
local function from_tprimat(doc, opts)
  local errors = {}
  local r = reader(doc, errors)
  local methodology = opts.methodology or r.typed('experiment.methodology', 'string')
    or 'identical_config'
  -- tprimat called the identical methodology both identical_config and truly_identical.
  local par_key = methodology
  if methodology == 'identical_config' and r.at('parallelism.identical_config') == nil
    and r.at('parallelism.truly_identical') ~= nil then
    par_key = 'truly_identical'
  end
  local training = {
    seed = r.typed('training.general.seed', 'integer'),
    mbs = r.typed('training.data.micro_batch_size', 'integer'),
    gbs = r.typed('training.data.global_batch_size', 'integer'),
    seq_len = r.typed('training.data.seq_length', 'integer'),
    lr = r.typed('training.optimizer.learning_rate', 'number'),
    min_lr = r.typed('training.optimizer.min_learning_rate', 'number'),
    warmup = r.typed('training.optimizer.warmup_steps', 'integer'),
    weight_decay = r.typed('training.optimizer.weight_decay', 'number'),
    beta1 = r.typed('training.optimizer.beta1', 'number'),
    beta2 = r.typed('training.optimizer.beta2', 'number'),
    decay = r.typed('training.optimizer.lr_decay_style', 'string'),
    grad_clip = r.typed('training.optimizer.grad_clip', 'number'),
    precision = r.typed('training.precision.default', 'string'),
  }
  local max_steps = r.typed('training.duration.max_steps', 'integer')
  local train_iters = r.typed('training.duration.train_iters', 'integer')
  if max_steps and train_iters and max_steps ~= train_iters then
    r.fail('training.duration: max_steps %d and train_iters %d disagree (they name the same '
      .. 'number of steps)', max_steps, train_iters)
  end
  training.iters = max_steps or train_iters
  local opt_type = r.typed('training.optimizer.type', 'string')
  if opt_type and opt_type:lower() ~= 'adam' and opt_type:lower() ~= 'adamw' then
    r.fail("training.optimizer.type: '%s' is not supported (the unified config trains with "
      .. 'Adam/AdamW)', opt_type)
  end
  local dataset_path = r.typed('training.data.dataset_path', 'string')
  local tokenizer = r.typed('training.data.tokenizer_path', 'string')
  if dataset_path then
    training.dataset = { path = dataset_path, tokenizer = tokenizer }
  else
    training.dataset = r.typed('training.data.dataset', 'string')
    training.tokenizer = tokenizer
  end
  if r.typed('training.precision.fp8_param', 'boolean') then
    r.fail('training.precision.fp8_param: true has no unified key (FP8 parameter storage is '
      .. 'not expressible); set it to false')
  end
  if training.precision == 'fp8' or r.typed('training.precision.fp8_hybrid', 'boolean') then
    training.precision = 'fp8'
    training.fp8_recipe = r.typed('training.precision.fp8_recipe', 'string') or 'delayed'
  end

  -- Platforms.
  local platforms = {}
  local plats = r.at('hardware.platforms')
  if type(plats) ~= 'table' then
    r.fail('hardware.platforms: table expected (nvidia: {...}, amd: {...})')
    plats = {}
  end
  local gpus = {}
  for _, name in ipairs(keys.sorted_keys(plats)) do
    local prefix = 'hardware.platforms.' .. name
    local pname = TPRIMAT_PLATFORM[name]
    if not pname then
      r.fail("%s: unknown platform '%s' (nvidia, amd)", prefix, name)
    else
      local entry = {}
      local fwname = r.typed(prefix .. '.framework', 'string')
      if not fwname then
        r.fail('%s.framework: required (megatron, primus, nemo or torchtitan)', prefix)
      elseif not FRAMEWORKS[fwname] then
        r.fail("%s.framework: unknown framework '%s' (megatron, primus, nemo, torchtitan)",
          prefix, fwname)
      end
      entry.framework = fwname
      local gpu_model = r.typed(prefix .. '.gpu_model', 'string')
      if gpu_model then
        entry.hardware = gpu_model_to_id(gpu_model)
        if not entry.hardware then
          r.fail("%s.gpu_model: '%s' is not in the GPU catalog (tp.hardware)", prefix, gpu_model)
        end
      end
      local mem = r.typed(prefix .. '.memory_per_gpu_gb', 'number')
      if mem and entry.hardware then
        local row = require('tp.catalog.hardware').get(entry.hardware)
        if math.abs(row.memory_gb - mem) > 0.5 then
          r.fail('%s.memory_per_gpu_gb: %s, but the catalog gives %s GB for %s', prefix,
            tostring(mem), tostring(row.memory_gb), row.id)
        end
      end
      gpus[pname] = r.typed(prefix .. '.num_gpus', 'integer')
      -- platform_optimizations.<name>.
      local po = 'platform_optimizations.' .. name
      local po_t = r.at(po)
      if po_t ~= nil then
        local prec = r.typed(po .. '.precision', 'string')
        local fp8_hybrid = r.typed(po .. '.fp8_hybrid', 'boolean')
        if r.typed(po .. '.fp8_param', 'boolean') then
          r.fail('%s.fp8_param: true has no unified key (FP8 parameter storage is not '
            .. 'expressible); set it to false', po)
        end
        if prec then
          entry.training = entry.training or {}
          entry.training.precision = prec
          if prec == 'fp8' then
            entry.training.fp8_recipe = r.typed(po .. '.fp8_recipe', 'string') or 'delayed'
          end
        elseif fp8_hybrid then
          entry.training = { precision = 'fp8',
                             fp8_recipe = r.typed(po .. '.fp8_recipe', 'string') or 'delayed' }
        end
        local ac = r.typed(po .. '.activation_checkpointing', 'boolean')
        local gc = r.typed(po .. '.gradient_checkpointing', 'boolean')
        if ac ~= nil or gc ~= nil then
          entry.system = { recompute = (ac or gc) and 'full' or 'none' }
        end
        local alloc = r.typed(po .. '.cuda_alloc_conf', 'string')
        if alloc then
          entry.env = { PYTORCH_CUDA_ALLOC_CONF = alloc }
        end
      end
      platforms[pname] = entry
    end
  end
  local gpn
  for _, n in pairs(gpus) do
    if gpn and gpn ~= n then
      r.fail('hardware.platforms.*.num_gpus: the platforms give different GPU counts (%d and '
        .. '%d); a comparison needs the same number of GPUs', gpn, n)
    end
    gpn = n
  end

  local paths = {}
  local primus_dir = r.typed('paths.primus.installation', 'string')
  if primus_dir and platforms.amd and platforms.amd.framework == 'primus' then
    platforms.amd.paths = { framework_dir = primus_dir }
  end
  if r.typed('training.checkpointing.enabled', 'boolean') then
    paths.checkpoints = r.typed('paths.nemo.checkpoint_dir', 'string') or 'checkpoints'
  end
  local results = r.typed('benchmarking.output.directory', 'string')
    or r.typed('paths.tprimat.output_dir', 'string')
  local repeats = r.typed('benchmarking.runs.recommended_num_runs', 'integer')
    or r.typed('benchmarking.runs.default_num_runs', 'integer')

  -- Models and their parallelism.
  local models_t = r.at('models')
  if type(models_t) ~= 'table' or next(models_t) == nil then
    r.fail('models: at least one model expected (llama: {name: llama3.1_8b, ...})')
    models_t = {}
  end
  local specs, order = {}, {}
  local name = r.typed('experiment.name', 'string') or 'experiment'
  for _, key in ipairs(keys.sorted_keys(models_t)) do
    local mp = 'models.' .. key
    local mname = r.typed(mp .. '.name', 'string')
    local id = model_name_to_id(mname)
    if not id then
      r.fail("%s.name: '%s' is not in the model catalog (tp.models: %s)", mp, tostring(mname),
        table.concat(require('tp.catalog.models').ids(), ', '))
    else
      local row = require('tp.catalog.models').get(id)
      for _, f in ipairs({ 'num_layers', 'hidden_size', 'num_attention_heads' }) do
        local v = r.typed(mp .. '.' .. f, 'integer')
        if v and v ~= row[f] then
          r.fail('%s.%s: %d, but %s has %d', mp, f, v, id, row[f])
        end
      end
      local spec = {
        name = string.format('%s: %s, %s', name, id, methodology),
        description = r.typed('experiment.description', 'string'),
        model = id,
        methodology = methodology,
        training = keys.copy(training),
        parallelism = {},
        system = {},
        paths = keys.copy(paths),
        nodes = 1,
        gpus_per_node = gpn or keys.DEFAULT_GPUS_PER_NODE,
        repeats = repeats,
        results = results,
        platforms = {},
      }
      local pp_path = 'parallelism.' .. par_key .. '.' .. key
      local plat_par = r.at(pp_path)
      if plat_par ~= nil and type(plat_par) ~= 'table' then
        r.fail('%s: table expected', pp_path)
        plat_par = nil
      end
      for pname, entry in pairs(platforms) do
        local p_entry = keys.copy(entry)
        local src
        for tname, tp_name in pairs(TPRIMAT_PLATFORM) do
          if tp_name == pname and plat_par and plat_par[tname] ~= nil then
            src = tname
          end
        end
        if plat_par and src then
          local pre = pp_path .. '.' .. src
          p_entry.parallelism = {
            tp = r.typed(pre .. '.tensor_model_parallel_size', 'integer'),
            pp = r.typed(pre .. '.pipeline_model_parallel_size', 'integer'),
            dp = r.typed(pre .. '.data_parallel_size', 'integer'),
          }
          local ga = r.typed(pre .. '.gradient_accumulation_steps', 'integer')
          if ga then
            p_entry.training = p_entry.training or {}
            p_entry.training.ga = ga
          end
        elseif plat_par ~= nil then
          r.fail('%s: no entry for platform %s', pp_path, pname)
        end
        spec.platforms[pname] = p_entry
      end
      -- Settings equal on every platform belong to the common config, so that the methodology
      -- sees them as shared rather than as per-platform overrides.
      M.hoist(spec)
      specs[key] = spec
      order[#order + 1] = key
    end
  end
  if #errors > 0 then
    return nil, errors
  end
  return { format = 'tprimat', specs = specs, order = order }
end

--- Moves every unified key that all platforms of a spec set to the same value from the
--- platforms into the common config (in place). Keys the platforms set differently stay
--- per-platform.
---@param spec table experiment spec {training=, parallelism=, system=, platforms = {...}}
function M.hoist(spec)
  local names = keys.sorted_keys(spec.platforms or {})
  if #names == 0 then
    return
  end
  local equal = keys.equal
  for path in pairs(keys.KEYS) do
    local first = keys.get(spec.platforms[names[1]], path)
    local same = first ~= nil
    for i = 2, #names do
      if not same then
        break
      end
      same = equal(keys.get(spec.platforms[names[i]], path), first)
    end
    if same then
      keys.set(spec, path, keys.copy(first))
      for _, n in ipairs(names) do
        keys.set(spec.platforms[n], path, nil)
      end
    end
  end
  for _, n in ipairs(names) do
    for _, section in ipairs(keys.SECTIONS) do
      local s = spec.platforms[n][section]
      if type(s) == 'table' and next(s) == nil then
        spec.platforms[n][section] = nil
      end
    end
  end
end

local UNIFIED_TOP = {
  name = 'string', description = 'string', methodology = 'string', platforms = 'table',
  repeats = 'integer', results = 'string', recorded = 'string', launcher = 'string',
  timeout = 'number', stop = 'table',
}

-- A YAML file in the unified layout: the experiment spec as a recipe writes it.
local function from_unified(doc)
  local errors = {}
  local spec = {}
  local cfg = {}
  for _, k in ipairs(keys.sorted_keys(doc)) do
    local v = doc[k]
    if UNIFIED_TOP[k] then
      local kind = UNIFIED_TOP[k]
      local ok, msg = check_kind(k, kind == 'table' and 'string' or kind, v)
      if kind == 'table' then
        if type(v) ~= 'table' then
          errors[#errors + 1] = type_error(k, 'table', v)
        else
          spec[k] = v
        end
      elseif ok == nil then
        errors[#errors + 1] = msg
      else
        spec[k] = ok
      end
    else
      cfg[k] = v
    end
  end
  for _, f in ipairs(check.check_types(cfg)) do
    errors[#errors + 1] = f.message
  end
  if #errors > 0 then
    return nil, errors
  end
  for k, v in pairs(cfg) do
    spec[k] = v
  end
  return { format = 'unified', specs = { [spec.model or 'default'] = spec },
           order = { spec.model or 'default' } }
end

--- The largest config file `load` reads (1 MiB): an experiment's config is a few KB.
M.MAX_FILE_SIZE = 1024 * 1024

-- Problems listed in one failure message; the rest are counted.
local MAX_ERRORS = 10

---@class tp.config.LoadOpts
---@field model? string with several models in the file, the one to take (its key, e.g. 'llama',
---  or its tp.models id)
---@field methodology? string override experiment.methodology (tprimat layout)
---@field env? table|function environment for ${VAR} expansion (default os.getenv)

--- Loads an experiment spec (the table tp.experiment takes) from a YAML file (a `.json` file is
--- read as JSON, with JSON's messages; at most MAX_FILE_SIZE bytes): either the unified
--- layout (the keys of a recipe) or the tprimat-era layout, detected by its `hardware`, `models`
--- or `benchmarking` sections. `${VAR}` and `${VAR:-default}` are expanded first, and an
--- expanded value that reads as a number or boolean gets that type. Fails with
--- `nil, '<path>: <key path>: <problem>', code` ('EPARSE' for YAML errors, 'ENOENT' for a
--- missing file or variable, 'ELIMIT' for a file above MAX_FILE_SIZE, 'EINVAL' for values of
--- the wrong type, several problems joined by '; ', the first ten named and the rest counted).
---```lua
---local spec = assert(tp.config.load('examples/tprimat/config.yaml', { model = 'llama' }))
---return tp.experiment.main(spec)
---```
---@param path string
---@param opts? tp.config.LoadOpts
---@return table|nil spec
---@return string? err
---@return string? code
function M.load(path, opts)
  if type(path) ~= 'string' then
    error('tp.config.load: path must be a string, got ' .. type(path), 2)
  end
  opts = opts or {}
  if type(opts) ~= 'table' then
    error('tp.config.load: opts must be a table', 2)
  end
  for k in pairs(opts) do
    if k ~= 'model' and k ~= 'methodology' and k ~= 'env' then
      error(string.format("tp.config.load: unknown option '%s'", tostring(k)), 2)
    end
  end
  local all, err, code = M.load_all(path, opts)
  if not all then
    return nil, err, code
  end
  if opts.model then
    local spec = all.specs[opts.model]
    if not spec then
      for _, key in ipairs(all.order) do
        if all.specs[key].model == opts.model then
          spec = all.specs[key]
        end
      end
    end
    if not spec then
      return nil, string.format("%s: models: no model '%s' (the file has: %s)", path, opts.model,
        table.concat(all.order, ', ')), 'ENOENT'
    end
    return spec
  end
  if #all.order > 1 then
    return nil, string.format('%s: models: the file describes %d models (%s); choose one with '
      .. 'opts.model', path, #all.order, table.concat(all.order, ', ')), 'EINVAL'
  end
  return all.specs[all.order[1]]
end

--- Loads every experiment spec of a YAML file: `{format = 'tprimat'|'unified', specs = {key =
--- spec}, order = {keys}}`. Same failures as load.
---@param path string
---@param opts? tp.config.LoadOpts
---@return table|nil all
---@return string? err
---@return string? code
function M.load_all(path, opts)
  opts = opts or {}
  local doc, err, code
  if path:lower():match('%.json$') then
    doc, err, code = require('tp.json').load_file(path, { max_size = M.MAX_FILE_SIZE })
  else
    doc, err, code = require('tp.yaml').load_file(path, { max_size = M.MAX_FILE_SIZE })
  end
  if doc == nil then
    return nil, err, code
  end
  if type(doc) ~= 'table' or (#doc > 0 and next(doc, #doc) == nil)
    or require('tp.json').is_array(doc) then
    return nil, string.format('%s: a mapping expected at the top level, got %s', path,
      type(doc) == 'table' and 'a list' or type(doc)), 'EINVAL'
  end
  doc, err, code = expand(doc, opts.env)
  if doc == nil then
    return nil, string.format('%s: %s', path, err), code
  end
  if type(doc.schema) == 'string' then
    return nil, string.format("%s: a '%s' document, not an experiment config", path, doc.schema),
      'EINVAL'
  end
  local result, errors
  if doc.hardware ~= nil or doc.models ~= nil or doc.benchmarking ~= nil then
    result, errors = from_tprimat(doc, opts)
  else
    result, errors = from_unified(doc)
  end
  if not result then
    local shown = {}
    for i = 1, math.min(#errors, MAX_ERRORS) do
      shown[i] = path .. ': ' .. errors[i]
    end
    if #errors > MAX_ERRORS then
      shown[#shown + 1] = string.format('%s: ... and %d more problems', path,
        #errors - MAX_ERRORS)
    end
    return nil, table.concat(shown, '; '), 'EINVAL'
  end
  result.source = path
  return result
end

return M
