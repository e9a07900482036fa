-- tp.experiment: definitions, the plan (commands, ids, memory, findings), options, loading
-- recipes, the campaign hand-off and the analysis of recorded runs.
local h = require('helper')
local experiment = require('tp.experiment')
local fs = require('tp.fs')

local RECORDED = 'examples/runs/llama3.1-8b-identical'

local function def(over)
  local d = {
    name = 'spec-llama',
    model = 'llama3.1-8b',
    methodology = 'identical_config',
    platforms = {
      amd = { framework = 'primus', hardware = 'mi300x' },
      nvd = { framework = 'megatron', hardware = 'h100-sxm' },
    },
    training = { seed = 42, mbs = 2, gbs = 64, seq_len = 2048, iters = 500, lr = 3e-4,
                 min_lr = 0, warmup = 50, decay = 'cosine', precision = 'bf16', dataset = 'bc' },
    parallelism = { tp = 1, pp = 1, dp = 8 },
    nodes = 1, gpus_per_node = 8,
    repeats = 3,
  }
  for k, v in pairs(over or {}) do
    d[k] = v
  end
  return d
end

local function raises(d, text)
  local ok, err = pcall(experiment.new, d)
  assert.is_false(ok)
  assert.is_truthy(tostring(err):find(text, 1, true), tostring(err))
end

local function finding(plan, severity, text)
  for _, f in ipairs(plan.findings) do
    if f.severity == severity and f.message:find(text, 1, true) then
      return f
    end
  end
  return nil
end

local function has_arg(argv, a, b)
  for i, x in ipairs(argv) do
    if x == a and (b == nil or argv[i + 1] == b) then
      return true
    end
  end
  return false
end

describe('tp.experiment.new', function()
  it('makes an experiment object', function()
    local e = experiment.new(def())
    assert.is_true(experiment.is_experiment(e))
    assert.are.equal('identical_config', e.methodology.name)
    assert.are.equal('mi300x', e.platforms.amd.hardware.id)
    -- tp.experiment{...} outside a main script only returns the experiment.
    local tp = require('tp')
    assert.is_true(experiment.is_experiment(tp.experiment(def())))
    assert.is_true(experiment.is_experiment(tp.experiment.main(def())))
  end)

  it('names the field of a malformed definition', function()
    raises(def({ colour = 'red' }), "experiment 'spec-llama': colour: unknown field")
    raises(def({ platforms = {} }), "platforms: at least one platform expected")
    raises(def({ platforms = { tpu = { framework = 'megatron' } } }),
      'platforms.tpu: unknown platform (amd, nvd)')
    raises(def({ platforms = { nvd = { framework = 'jax' } } }),
      "platforms.nvd.framework: unknown framework 'jax'")
    raises(def({ platforms = { nvd = { framework = 'megatron', hardware = 'tpu-v5' } } }),
      "platforms.nvd.hardware: no catalog row 'tpu-v5'")
    raises(def({ platforms = { nvd = {} } }), 'platforms.nvd.framework: required')
    raises(def({ repeats = 0 }), 'repeats: positive integer expected, got 0')
    raises(def({ methodology = 'fastest' }), "methodology: unknown methodology 'fastest'")
    local nomodel = def()
    nomodel.model = nil
    raises(nomodel, 'model: required')
    assert.has_error(function()
      experiment.new({ model = 'llama3.1-8b' })
    end, 'tp.experiment: name: non-empty string expected')
  end)

  it('reports config values of the wrong type with the key path', function()
    local d = def()
    d.training.gbs = '64x'
    raises(d, 'training.gbs: integer expected, got string "64x"')
    raises(def({ platforms = { nvd = { framework = 'megatron',
      parallelism = { tp = 'two' } } } }),
      'platforms.nvd.parallelism.tp: integer expected, got string "two"')
  end)

  it('refuses a per-platform override of a fixed key, with both values', function()
    raises(def({ platforms = { amd = { framework = 'primus', training = { lr = 1e-4 } },
                               nvd = { framework = 'megatron' } } }),
      'platforms.amd.training.lr: identical_config fixes training.lr on every platform '
      .. '(experiment: 0.0003, amd: 0.0001)')
    raises(def({ platforms = { amd = { framework = 'primus', parallelism = { tp = 2, dp = 4 } },
                               nvd = { framework = 'megatron' } } }),
      'platforms.amd.parallelism.tp: identical_config fixes parallelism.tp')
    -- maximum_performance lets the parallelism differ but not the algorithm.
    local mp = def({ methodology = 'maximum_performance',
      platforms = { amd = { framework = 'primus', parallelism = { tp = 2, dp = 4 } },
                    nvd = { framework = 'megatron' } } })
    assert.is_true(experiment.is_experiment(experiment.new(mp)))
    raises(def({ methodology = 'maximum_performance',
      platforms = { amd = { framework = 'primus', training = { seq_len = 4096 } },
                    nvd = { framework = 'megatron' } } }),
      'platforms.amd.training.seq_len: maximum_performance fixes training.seq_len')
  end)

  it('checks recipe options', function()
    raises(def({ options = { iters = { desc = 'x', default = 1, key = 'training.iters' } } }),
      "options.iters: '--iters' is a standard flag")
    raises(def({ options = { lrx = { desc = 'x', default = 1 } } }),
      'options.lrx: give key (a unified key path) or apply (a function)')
    raises(def({ options = { lrx = { desc = 'x', default = 1, key = 'training.rate' } } }),
      "options.lrx.key: 'training.rate' is not a unified key path")
  end)
end)

describe('Experiment:plan', function()
  local e = experiment.new(def({ results = 'output/spec-plan' }))
  local plan = e:plan({})

  it('plans both platforms with exact commands and stable ids', function()
    assert.is_true(plan.ok)
    assert.are.same({ 'amd', 'nvd' }, plan.order)
    assert.are.equal(6, #plan.runs)
    local n = plan.platforms.nvd.runs[1]
    assert.are.equal('torchrun', n.argv[1])
    assert.is_true(has_arg(n.argv, '--nproc-per-node', '8'))
    assert.is_true(has_arg(n.argv, '--global-batch-size', '64'))
    assert.is_true(has_arg(n.argv, '--seed', '42'))
    assert.is_truthy(n.command:find('pretrain_gpt.py', 1, true))
    assert.are.equal(experiment.absolute('output/spec-plan/nvd/' .. n.id), n.output)
    local a = plan.platforms.amd.runs[1]
    assert.are.equal('bash', a.argv[1])
    assert.is_truthy(a.files['primus_experiment.yaml']:find('global_batch_size: 64', 1, true))
    assert.are.equal(a.output .. '/primus_experiment.yaml', a.argv[#a.argv])
    assert.are.equal('8', a.env.GPUS_PER_NODE)
    local again = e:plan({})
    for i, r in ipairs(plan.runs) do
      assert.are.equal(r.id, again.runs[i].id)
    end
    assert.are.equal(plan.runs[1].hash, plan.runs[2].hash)
    assert.are.same({ 1, 2, 3 }, { plan.runs[1]['repeat'], plan.runs[2]['repeat'],
      plan.runs[3]['repeat'] })
  end)

  it('gives the flagship runs the ids of the recorded runs #slow', function()
    local flagship = assert(experiment.load('recipes/llama_identical.lua'))
    local fp = flagship:plan({})
    for _, r in ipairs(fp.runs) do
      assert.is_true(fs.is_file(string.format('%s/%s/%s.log', RECORDED, r.platform, r.id)), r.id)
    end
  end)

  it('shows the memory estimate per platform', function()
    assert.are.equal('tight', plan.platforms.nvd.memory.status)
    assert.are.equal('fits', plan.platforms.amd.memory.status)
    assert.is_truthy(finding(plan, 'warning', 'of 80.0 GiB (94%): tight'))
  end)

  it('applies --iters, --repeats, --only and recipe options', function()
    local e2 = experiment.new(def({ options = {
      warm = { desc = 'warm-up', default = 50, key = 'training.warmup' },
      slow = { desc = 'recompute everything', type = 'boolean',
               apply = function(cfg, v)
                 if v then
                   cfg.system = cfg.system or {}
                   cfg.system.recompute = 'full'
                 end
               end },
    } }))
    local p = e2:plan({ iters = 20, warm = 5, repeats = 1, only = 'nvd', slow = true })
    assert.is_true(p.ok)
    assert.are.equal(1, #p.runs)
    local r = p.runs[1]
    assert.are.equal(20, r.config.training.iters)
    assert.are.equal(5, r.config.training.warmup)
    assert.are.equal('full', r.config.system.recompute)
    assert.is_true(has_arg(r.argv, '--train-iters', '20'))
    assert.are_not.equal(plan.platforms.nvd.runs[1].id, r.id)
    local bad = e2:plan({ only = 'tpu' })
    assert.is_false(bad.ok)
    assert.is_truthy(finding(bad, 'error', "--only: no platform 'tpu' in this experiment "
      .. '(it has: amd, nvd)'))
  end)

  it('fails the plan on a broken rule, naming it', function()
    local d = def()
    d.parallelism = { tp = 2, pp = 1, dp = 8 }
    local p = experiment.new(d):plan({})
    assert.is_false(p.ok)
    assert.is_truthy(finding(p, 'error', 'parallelism: tp*pp*cp*dp = 2*1*1*8 = 16, but nodes 1 '
      .. 'x gpus_per_node 8 = 8 GPUs'))
    assert.are.equal(0, #p.runs)
    local w = def()
    w.training.warmup = 50
    local p2 = experiment.new(w):plan({ iters = 20 })
    assert.is_false(p2.ok)
    assert.is_truthy(finding(p2, 'error', 'training.warmup: must be in [0, iters], got 50'))
  end)

  it('catches platforms made different by an option', function()
    local e3 = experiment.new(def({ options = {
      lrx = { desc = 'lr of amd only', default = 1e-4, type = 'number',
              apply = function(cfg, v, platform)
                if platform == 'amd' then
                  cfg.training.lr = v
                end
              end },
    } }))
    local p = e3:plan({})
    assert.is_false(p.ok)
    assert.is_truthy(finding(p, 'error', 'training.lr differs across platforms (amd = 0.0001, '
      .. 'nvd = 0.0003); identical_config fixes it'))
  end)

  it('wraps commands for the chosen launcher', function()
    local p = e:plan({ launcher = 'local' })
    assert.is_false(p.ok)
    assert.is_truthy(finding(p, 'error', 'nvd: --launcher local starts one process, but megatron '
      .. 'needs one per GPU (8 GPUs): use torchrun'))
    local c = e:plan({ launcher = 'container' })
    assert.is_truthy(finding(c, 'error', 'platforms.amd.container.image: required with --launcher '
      .. 'container'))
    local withimg = experiment.new(def({ container = { image = 'rocm/primus:v25' } }))
    local ok = withimg:plan({ launcher = 'container' })
    assert.is_true(ok.ok)
    assert.are.equal('docker', ok.platforms.nvd.runs[1].argv[1])
    assert.is_true(has_arg(ok.platforms.nvd.runs[1].argv, '--gpus', 'all'))
    assert.is_true(has_arg(ok.platforms.amd.runs[1].argv, '--device=/dev/kfd'))
    assert.is_false(e:plan({ launcher = 'pbs' }).ok)
    -- A container mounts the run directory: the configs written there are read inside.
    local run = ok.platforms.amd.runs[1]
    assert.is_true(has_arg(run.argv, '-v', run.output .. ':' .. run.output))
  end)

  it('hands runs over in the shape tp.campaign takes', function()
    local runs = experiment.campaign_runs(plan, 'nvd')
    assert.are.equal(3, #runs)
    assert.are.equal(runs[1].config.paths.output, runs[1].files_dir)
    assert.are.equal('spec-llama', runs[1].experiment)
    assert.are.equal('bc', runs[1].dataset)
    local ok_c, campaign = pcall(require, 'tp.campaign')
    if not ok_c then
      pending('tp.campaign is not available')
      return
    end
    local c = campaign({ results = h.tmpdir(), runs = runs })
    assert.are.equal(3, #c.runs)
  end)

  it('makes a plan JSON and a printout', function()
    local printer = require('tp.plan')
    local data = require('tp.json').decode(printer.json(plan))
    assert.are.equal('tplua.plan/1', data.schema)
    assert.are.equal(3, #data.platforms.nvd.runs)
    local text = printer.format(plan)
    assert.is_truthy(text:find('platform nvd: NVIDIA H100', 1, true))
    assert.is_truthy(text:find('memory per GPU (estimate): weights 15.0', 1, true))
    assert.is_truthy(text:find('$ torchrun --nnodes 1 --nproc-per-node 8', 1, true))
  end)
end)

describe('Experiment:usage and parse_args', function()
  local e = experiment.new(def({ options = {
    warm = { desc = 'warm-up iterations', default = 50, key = 'training.warmup' } } }))

  it('lists the recipe and standard flags with defaults', function()
    local u = e:usage('tplua x.lua')
    assert.is_truthy(u:find('usage: tplua x.lua [flags]', 1, true))
    assert.is_truthy(u:find('--warm N', 1, true))
    assert.is_truthy(u:find('(default 50)', 1, true))
    assert.is_truthy(u:find('--iters N', 1, true))
    assert.is_truthy(u:find('(default 500)', 1, true))
    assert.is_truthy(u:find('--no-prune', 1, true))
  end)

  it('parses flags and refuses unknown ones', function()
    local o = assert(e:parse_args({ '--iters', '10', '--warm=5', '--dry-run' }))
    assert.are.equal(10, o.iters)
    assert.are.equal(5, o.warm)
    assert.is_true(o.dry_run)
    local none, err = e:parse_args({ '--colour', 'red' })
    assert.is_nil(none)
    assert.are.equal("unknown option '--colour'", err)
    local _, err2 = e:parse_args({ '--iters', 'ten' })
    assert.are.equal("option '--iters': integer expected, got 'ten'", err2)
  end)
end)

describe('tp.experiment.load', function()
  it('loads every shipped recipe and example without running it #slow', function()
    for _, path in ipairs({ 'recipes/llama_identical.lua', 'recipes/llama_max_perf.lua',
      'recipes/qwen_identical.lua', 'recipes/qwen_max_perf.lua', 'recipes/sweep_parallelism.lua',
      'examples/custom_sweep.lua', 'examples/custom_methodology.lua',
      'examples/tprimat_config.lua' }) do
      local e, err = experiment.load(path)
      assert.is_truthy(e, err)
      local p = e:plan({ results = h.tmpdir() })
      assert.is_true(p.ok, path)
      assert.is_true(#p.runs > 0, path)
    end
  end)

  it('fails with the file name', function()
    local dir = h.tmpdir()
    local e, err, code = experiment.load(dir .. '/none.lua')
    assert.is_nil(e)
    assert.are.equal('ENOENT', code)
    assert.is_truthy(err:find('none.lua: no such file', 1, true))
    h.write(dir .. '/syntax.lua', 'return tp.experiment{ name = \n')
    local _, err2, code2 = experiment.load(dir .. '/syntax.lua')
    assert.are.equal('EPARSE', code2)
    assert.is_truthy(err2:find('syntax.lua', 1, true))
    h.write(dir .. '/raise.lua', "return require('tp').experiment.main({ name = 'x', "
      .. "model = 'llama3.1-8b', platforms = { nvd = { framework = 'megatron' } }, "
      .. "training = { gbs = '64x' } })\n")
    local _, err3, code3 = experiment.load(dir .. '/raise.lua')
    assert.are.equal('EINVAL', code3)
    assert.is_truthy(err3:find('training.gbs: integer expected, got string "64x"', 1, true))
    h.write(dir .. '/nothing.lua', 'return 42\n')
    local _, err4 = experiment.load(dir .. '/nothing.lua')
    assert.is_truthy(err4:find('the recipe must return tp.experiment{...} (it returned number)',
      1, true))
    local _, err5, code5 = experiment.load(dir)
    assert.are.equal('EINVAL', code5)
    assert.is_truthy(err5:find('is a directory', 1, true))
  end)

  it('accepts a recipe that returns a plain definition table', function()
    local dir = h.tmpdir()
    h.write(dir .. '/plain.lua', "return { name = 'plain', model = 'llama3.1-8b', "
      .. "platforms = { nvd = { framework = 'megatron' } }, training = { mbs = 1, gbs = 8, "
      .. 'seq_len = 1024, iters = 10, lr = 1e-4 } }\n')
    local e = assert(experiment.load(dir .. '/plain.lua'))
    assert.are.equal('plain', e.name)
  end)
end)

describe('analysis of recorded runs', function()
  it('loads the six recorded run records with their platforms #slow', function()
    local found = experiment.load_results(RECORDED)
    assert.are.equal(6, #found.records)
    local n = { amd = 0, nvd = 0 }
    for _, r in ipairs(found.records) do
      n[r._platform] = n[r._platform] + 1
      assert.are.equal(500, #r.records)
      assert.are.equal('completed', r.status)
    end
    assert.are.same({ amd = 3, nvd = 3 }, n)
  end)

  it('compares tokens/s/GPU and loss curves of the two platforms #slow', function()
    local found = experiment.load_results(RECORDED)
    local s = experiment.summarize(found.records, { model = 'llama3.1-8b' })
    assert.are.same({ 'amd', 'nvd' }, s.order)
    local amd, nvd = s.platforms.amd, s.platforms.nvd
    assert.are.equal('primus', amd.framework)
    assert.are.equal('megatron', nvd.framework)
    -- The illustration's steady step times: 1.6121 s (MI300X) and 1.8838 s (H100).
    assert.is_true(math.abs(nvd.tps_mean - 8697.8) / 8697.8 < 0.01)
    assert.is_true(math.abs(amd.tps_mean - 10163.3) / 10163.3 < 0.01)
    assert.is_true(s.ratio.estimate > 1.15 and s.ratio.estimate < 1.19)
    assert.is_true(s.ratio.lo < s.ratio.estimate and s.ratio.estimate < s.ratio.hi)
    assert.is_true(s.ratio.p < 0.01)
    -- Same data, same seed: the loss curves agree within noise.
    assert.are.equal(500, s.loss.common)
    assert.is_true(s.loss.rms < 0.05)
    assert.is_true(math.abs(amd.loss_mean - nvd.loss_mean) < 0.05)
    assert.is_true(nvd.loss_mean > 5.5 and nvd.loss_mean < 7)
    assert.is_true(math.abs(nvd.mfu_mean - 0.41) < 0.01)
  end)

  it('summarises MFU and energy per token as tp.compare does, measured energy first', function()
    local found = experiment.load_results(RECORDED)
    local s = experiment.summarize(found.records, { model = 'llama3.1-8b' })
    local set = assert(require('tp.results').load(RECORDED))
    local cmp = assert(require('tp.compare').compare(set, { metrics = { 'mfu',
      'energy_per_token' }, n_boot = 10 }))
    for _, m in ipairs(cmp.metrics) do
      for _, g in ipairs(m.groups) do
        local mine = s.platforms[g.value][m.name == 'mfu' and 'mfu_mean' or 'energy_mean']
        assert.is_true(math.abs(mine - g.mean) < 1e-12 * g.mean, m.name .. ' ' .. g.value)
      end
    end
    assert.are.equal(cmp.basis.energy.amd, s.platforms.amd.energy_basis)
    assert.is_truthy(s.platforms.amd.energy_basis:find('estimated: 8 GPUs x mi300x', 1, true))
    -- A measured figure wins over the TDP estimate and is labelled so.
    for i, rec in ipairs(found.records) do
      if rec._platform == 'amd' then
        rec.energy_metrics = { joules_per_token = 0.05 + i / 1000 }
      end
    end
    local m = experiment.summarize(found.records, { model = 'llama3.1-8b' })
    assert.are.equal('measured', m.platforms.amd.energy_basis)
    assert.is_true(m.platforms.amd.energy_mean > 0.05 and m.platforms.amd.energy_mean < 0.06)
    local text = {}
    experiment.print_summary(m, { write = function(_, ...)
      for _, v in ipairs({ ... }) do
        text[#text + 1] = v
      end
    end })
    assert.is_truthy(table.concat(text):find('J/token', 1, true))
  end)

  it('builds records on the fly for logs without one, and notes broken files #slow', function()
    local dir = h.tmpdir()
    assert(fs.mkdir_p(dir .. '/amd'))
    local src = RECORDED .. '/amd/amd-primus-e84adbb11776-r1.log'
    h.write(dir .. '/amd/run1.log', h.read(src))
    h.write(dir .. '/broken.json', '{"schema": "tplua.run/1", ')
    local found = experiment.load_results(dir)
    assert.are.equal(1, #found.records)
    assert.are.equal('amd', found.records[1]._platform)
    assert.is_true(found.records[1]._staged)
    local noted = false
    for _, n in ipairs(found.notes) do
      noted = noted or n:find('broken.json: skipped', 1, true) ~= nil
    end
    assert.is_true(noted)
    local none = experiment.load_results(dir .. '/nope')
    assert.are.equal(0, #none.records)
  end)

  it('picks the best configuration of each platform', function()
    local function rec(p, id, tps)
      return { _platform = p, run_id = id, performance_metrics =
        { tokens_per_second_per_gpu = tps } }
    end
    local best = experiment.best_per_platform({
      rec('nvd', 'nvd-megatron-aaa-r1', 100), rec('nvd', 'nvd-megatron-aaa-r2', 110),
      rec('nvd', 'nvd-megatron-bbb-r1', 120), rec('nvd', 'nvd-megatron-bbb-r2', 118),
      rec('amd', 'amd-primus-ccc-r1', 90),
    })
    assert.are.equal('nvd-megatron-bbb', best.nvd.key)
    assert.are.equal(2, best.nvd.configs)
    assert.are.equal(119, best.nvd.tps_mean)
    assert.are.equal('amd-primus-ccc', best.amd.key)
  end)

  it('analyses the recorded runs while the results directory is empty #slow', function()
    local e = assert(experiment.load('recipes/llama_identical.lua'))
    local plan = e:plan({ results = h.tmpdir() .. '/none' })
    local parts = {}
    local sink = { write = function(self, ...)
      for _, s in ipairs({ ... }) do
        parts[#parts + 1] = s
      end
      return self
    end }
    local summary = e:analyse(plan, sink)
    local text = table.concat(parts)
    assert.is_truthy(text:find('analysis: examples/runs/llama3.1-8b-identical (the recorded runs',
      1, true))
    assert.is_truthy(text:find('6 run records (3 amd, 3 nvd)', 1, true))
    assert.is_truthy(text:find('loss curves amd vs nvd: RMS difference', 1, true))
    assert.is_truthy(summary.ratio.estimate > 1)
  end)
end)

describe('maximum_performance analysis', function()
  it('compares the best sweep point of each platform and names its settings #slow', function()
    local e = assert(experiment.load('recipes/llama_max_perf.lua'))
    local results = h.tmpdir()
    local plan = e:plan({ results = results })
    local json = require('tp.json')
    local record = require('tp.record')
    -- Two configurations on nvd (the second slower), one on amd, from the recorded records.
    local nvd, amd = plan.platforms.nvd.runs, plan.platforms.amd.runs
    local function put(src, run, scale)
      local rec = assert(json.load_file(RECORDED .. '/' .. src))
      rec.run_id = run.id
      rec.performance_metrics.tokens_per_second_per_gpu =
        rec.performance_metrics.tokens_per_second_per_gpu * scale
      assert(fs.mkdir_p(results .. '/' .. run.platform))
      assert(record.save(rec, string.format('%s/%s/%s.json', results, run.platform, run.id)))
    end
    put('nvd/nvd-megatron-2b8ed7d97d77-r1.json', nvd[1], 1.0)
    put('nvd/nvd-megatron-2b8ed7d97d77-r2.json', nvd[2], 1.0)
    put('nvd/nvd-megatron-2b8ed7d97d77-r3.json', nvd[3], 0.5)
    put('amd/amd-primus-e84adbb11776-r1.json', amd[1], 1.0)
    local parts = {}
    local sink = { write = function(self, ...)
      for _, s in ipairs({ ... }) do
        parts[#parts + 1] = s
      end
      return self
    end }
    local summary = e:analyse(plan, sink)
    local text = table.concat(parts)
    assert.is_truthy(text:find('best configuration per platform', 1, true))
    assert.is_truthy(text:find('nvd  tp=1 recompute=none mbs=1', 1, true), text)
    assert.is_truthy(text:find('best of 2 configuration(s)', 1, true))
    assert.are.equal(2, #summary.platforms.nvd.records)
    assert.are.equal(1, #summary.platforms.amd.records)
  end)

  it('refuses unknown plan options', function()
    local e = experiment.new(def())
    assert.has_error(function()
      e:plan({ iterations = 3 })
    end, "Experiment:plan: unknown option 'iterations'")
  end)
end)

describe('profiling (the profile field and --profile)', function()
  -- A PATH that holds an executable nsys (and nothing else), for the plan's PATH check.
  local bin = h.tmpdir()
  h.write(bin .. '/nsys', '#!/bin/sh\nexit 0\n')
  assert(os.execute('chmod 755 ' .. h.shquote(bin .. '/nsys')))

  local function one(framework, over)
    local d = def({ results = '/tmp/spec-profile', repeats = 1,
      platforms = { nvd = { framework = framework, env = { PATH = bin } } } })
    for k, v in pairs(over or {}) do
      d[k] = v
    end
    return experiment.new(d)
  end

  local function tail_of(argv, n)
    return table.move(argv, #argv - n + 1, #argv, 1, {})
  end

  it('megatron: the PyTorch profiler window inside torchrun, traces in <run>/profile', function()
    local plan = one('megatron'):plan({ profile = 'torch:5-7' })
    assert.is_true(plan.ok)
    local r = plan.runs[1]
    assert.are.equal('torchrun', r.argv[1])
    assert.are.same({ '--profile', '--use-pytorch-profiler', '--profile-step-start', '4',
      '--profile-step-end', '7', '--profile-ranks', '0', '--tensorboard-dir',
      r.output .. '/profile' }, tail_of(r.argv, 10))
    assert.are.same({ tool = 'torch', steps = { 5, 7 }, output = r.output .. '/profile',
      patterns = { r.output .. '/profile/*.pt.trace.json' } }, r.profile)
    assert.is_truthy(r.notes[#r.notes]:find('profile torch:5-7: traces ', 1, true))
    -- The campaign's run table carries it to the record, with the trace analysis the record
    -- writer runs on the traces (profile.analysis); the plan's own entry is left as it is.
    local cp = experiment.campaign_runs(plan)[1].profile
    assert.are.equal(require('tp.analyse.profiled').summarise, cp.analyse)
    assert.is_nil(r.profile.analyse)
    cp.analyse = nil
    assert.are.same(r.profile, cp)
  end)

  it('primus: the Megatron arguments as primus-cli overrides', function()
    local plan = one('primus', { platforms = { amd = { framework = 'primus' } } })
      :plan({ profile = 'torch:3-4' })
    assert.is_true(plan.ok)
    local argv = plan.runs[1].argv
    assert.are.equal('bash', argv[1])
    assert.is_true(has_arg(argv, '--use_pytorch_profiler', 'True'))
    assert.is_true(has_arg(argv, '--profile_step_start', '2'))
    assert.is_true(has_arg(argv, '--tensorboard_dir', plan.runs[1].output .. '/profile'))
  end)

  it('torchtitan: its profiling section, from the recipe field', function()
    local plan = one('torchtitan', { profile = { tool = 'torch', steps = { 10, 12 } } }):plan({})
    assert.is_true(plan.ok, plan.findings[1] and plan.findings[1].message)
    local argv = plan.runs[1].argv
    assert.is_true(has_arg(argv, '--profiling.enable_profiling'))
    assert.is_true(has_arg(argv, '--profiling.profile_freq', '12'))
    assert.is_true(has_arg(argv, '--profiling.profiler_active', '3'))
  end)

  it('nemo: nsys wraps each process, torchrun runs it with --no-python', function()
    local plan = one('nemo'):plan({ profile = 'nsys' })
    assert.is_true(plan.ok, plan.findings[1] and plan.findings[1].message)
    local r = plan.runs[1]
    assert.is_true(has_arg(r.argv, '--no-python'))
    assert.is_true(has_arg(r.argv, 'nsys', 'profile'))
    assert.is_true(has_arg(r.argv, '-o', r.output .. '/profile/nsys_rank%q{RANK}'))
    assert.are.same({ r.output .. '/profile/nsys_rank<RANK>.nsys-rep',
      r.output .. '/profile/nsys_rank<RANK>.sqlite' }, r.profile.patterns)
    -- The preflight checks the trainer's own command, not the profiler around it.
    assert.are_not.equal('nsys', r.process.argv[1])
  end)

  it('reference: the trainer profiles every rank; nsys brackets the steps', function()
    local d = { model = 'ref-tiny', gpus_per_node = 2, parallelism = { tp = 1, pp = 1, dp = 2 },
      training = { seed = 1, mbs = 2, gbs = 4, seq_len = 32, iters = 8, lr = 1e-3,
        dataset = 'mock' } }
    local plan = one('reference', d):plan({ profile = 'torch:2-3' })
    assert.is_true(plan.ok, plan.findings[1] and plan.findings[1].message)
    local r = plan.runs[1]
    assert.are.same({ '--profile', '--use-pytorch-profiler', '--profile-step-start', '1',
      '--profile-step-end', '3', '--profile-dir', r.output .. '/profile' }, tail_of(r.argv, 8))
    assert.are.same({ r.output .. '/profile/rank<RANK>_trace.json' }, r.profile.patterns)
    local n = one('reference', d):plan({ profile = 'nsys:2-3' }).runs[1]
    assert.is_true(has_arg(n.argv, '--capture-range=cudaProfilerApi'))
    assert.are.same({ '--profile', '--profile-step-start', '1', '--profile-step-end', '3' },
      tail_of(n.argv, 5))
  end)

  it('takes the flag over the platform field, the platform field over the recipe', function()
    local e = one('megatron', { profile = { tool = 'torch', steps = { 2, 3 } },
      platforms = { nvd = { framework = 'megatron', env = { PATH = bin },
        profile = { tool = 'nsys' } } } })
    assert.are.equal('nsys', e:plan({}).runs[1].profile.tool)
    assert.are.same({ 8, 9 }, e:plan({ profile = 'torch:8-9' }).runs[1].profile.steps)
    assert.is_nil(e:plan({ profile = 'none' }).runs[1].profile)
    local off = one('megatron', { profile = { tool = 'torch', steps = { 2, 3 } },
      platforms = { nvd = { framework = 'megatron', profile = false } } })
    assert.is_nil(off:plan({}).runs[1].profile)
  end)

  it('makes what a framework cannot do a plan error naming the platform', function()
    local plan = one('nemo'):plan({ profile = 'rocprofv3:1-2' })
    assert.is_false(plan.ok)
    assert.are.equal("nvd: profile: nemo: rocprofv3: steps cannot be honoured (rocprofv3 has no "
      .. "capture range for NeMo's cudaProfilerStart/Stop); omit steps to trace the whole run",
      finding(plan, 'error', 'nemo').message)
    assert.are.equal('profile', finding(plan, 'error', 'nemo').key)
    assert.are.equal('nvd', finding(plan, 'error', 'nemo').platform)
    assert.are.equal(0, #plan.runs)
    plan = one('megatron'):plan({ profile = 'torch' })
    assert.is_truthy(finding(plan, 'error', 'nvd: profile: megatron: the PyTorch profiler '
      .. 'needs steps'))
  end)

  it('needs the system profiler in PATH (a warning when the runs start elsewhere)', function()
    local e = experiment.new(def({ results = '/tmp/spec-profile', repeats = 1,
      platforms = { nvd = { framework = 'megatron', env = { PATH = '/nonexistent' } } } }))
    local plan = e:plan({ profile = 'nsys' })
    assert.is_false(plan.ok)
    assert.is_truthy(finding(plan, 'error', 'nvd: profile: nsys: not found in PATH '
      .. '(/nonexistent)'))
    plan = e:plan({ profile = 'nsys', launcher = 'container' })
    assert.is_truthy(finding(plan, 'warning', 'not found in PATH (/nonexistent) here; it must '
      .. 'be there in the image'))
    plan = one('megatron'):plan({ profile = 'torch:499-510' })
    assert.is_true(plan.ok)
    assert.is_truthy(finding(plan, 'warning', 'nvd: profile: steps 499-510 end after the last '
      .. 'iteration (500)'))
  end)

  it('refuses a malformed field at creation and a malformed flag as a usage error', function()
    raises(def({ profile = { tool = 'perf' } }),
      "experiment 'spec-llama': profile: tool: one of torch, nsys, rocprofv3 expected, got 'perf'")
    raises(def({ profile = { tool = 'torch', steps = { 3, 2 } } }),
      'profile: steps: { first, last } with 1 <= first <= last expected')
    raises(def({ platforms = { nvd = { framework = 'megatron', profile = 'torch' } } }),
      'platforms.nvd.profile: { tool = ..., steps = { first, last } } or false expected')
    local e = experiment.new(def())
    local o, err = e:parse_args({ '--profile', 'perf:1-2' })
    assert.is_nil(o)
    assert.are.equal("option '--profile': unknown tool 'perf' (torch, nsys, rocprofv3, or none)",
      err)
    o, err = e:parse_args({ '--profile', 'torch:7-5' })
    assert.is_nil(o)
    assert.are.equal("option '--profile': 'torch:7-5': steps must be FIRST-LAST with 1 <= FIRST "
      .. '<= LAST (e.g. torch:5-7)', err)
    assert.is_truthy(e:usage():find('--profile S', 1, true))
    -- Experiment:plan called directly: the same as a plan error.
    assert.is_truthy(finding(e:plan({ profile = 'torch:x' }), 'error', "--profile: 'torch:x'"))
  end)
end)
