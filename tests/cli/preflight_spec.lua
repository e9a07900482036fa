-- Checks before launch (tp.preflight) through `tplua preflight RECIPE` and `tplua run`: GPUs in
-- use by another process (the fake NVML and ROCm SMI list one), a missing framework checkout, a
-- flag the framework's own parser rejects (a stand-in Megatron-LM parser module in a checkout
-- made by the test, real argparse), a version older than the adapter's, missing data and
-- tokenizer, an output directory that cannot be made; --skip-preflight and what the record says.
local h = require('helper')
local json = require('tp.json')

local function has(s, text)
  return s:find(text, 1, true) ~= nil
end

local function fakes(scenario)
  return h.fakes_dir .. '/' .. scenario
end

-- A reference-trainer recipe: 2 ranks on this machine, 4 iterations (a few seconds on CPU).
local function ref_recipe(dir, extra)
  local path = dir .. '/ref.lua'
  h.write(path, string.format([[
local tp = require('tp')
return tp.experiment.main({
  name = 'preflight-ref',
  model = 'ref-tiny',
  platforms = { %s = { framework = 'reference', hardware = %q } },
  gpus_per_node = 2,
  training = { seed = 1, mbs = 2, gbs = 4, seq_len = 32, iters = 4, lr = 3e-3,
               dataset = %s, log_interval = 1 },
  parallelism = { tp = 1, pp = 1, dp = 2 },
  launcher = 'ranks',
  results = %q,
})
]], extra.platform or 'nvd', extra.hardware or 'h100-sxm', extra.dataset or "'mock'",
    extra.results or (dir .. '/out')))
  return path
end

-- A Megatron-LM checkout of the test's own making: pretrain_gpt.py, a version file, and a
-- stand-in of megatron/training/arguments.py whose parse_args is a real argparse parser that
-- knows exactly the flags in flags.txt (a Megatron that lacks one of tplua's flags).
local function megatron_checkout(dir, flags, version)
  require('tp.fs').mkdir_p(dir .. '/megatron/training')
  require('tp.fs').mkdir_p(dir .. '/megatron/core')
  h.write(dir .. '/pretrain_gpt.py', 'raise SystemExit("not for preflight")\n')
  h.write(dir .. '/megatron/__init__.py', '')
  h.write(dir .. '/megatron/training/__init__.py', '')
  h.write(dir .. '/megatron/core/__init__.py', '')
  h.write(dir .. '/megatron/core/package_info.py', string.format(
    "MAJOR = %d\nMINOR = %d\nPATCH = %d\nPRE_RELEASE = ''\n", version[1], version[2],
    version[3]))
  h.write(dir .. '/megatron/training/arguments.py', [[
# Stand-in of Megatron-LM's argument parser for tplua's tests: an argparse parser with the
# flags listed in flags.txt next to the checkout root, nothing else.
import argparse, os, sys

def parse_args(extra_args_provider=None, ignore_unknown_args=False):
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    parser = argparse.ArgumentParser(description="Megatron-LM Arguments", allow_abbrev=False)
    with open(os.path.join(root, "flags.txt")) as f:
        for flag in f.read().split():
            parser.add_argument(flag, nargs="*")
    return parser.parse_args()
]])
  h.write(dir .. '/flags.txt', table.concat(flags, '\n') .. '\n')
end

local function megatron_recipe(dir, framework_dir)
  local path = dir .. '/mega.lua'
  h.write(path, string.format([[
local tp = require('tp')
return tp.experiment.main({
  name = 'preflight-megatron',
  model = 'llama3.2-1b',
  platforms = { nvd = { framework = 'megatron', hardware = 'h100-sxm' } },
  gpus_per_node = 8,
  training = { seed = 1, mbs = 1, gbs = 8, seq_len = 2048, iters = 10, lr = 3e-4,
               dataset = 'mock' },
  parallelism = { tp = 1, pp = 1, dp = 8 },
  paths = { framework_dir = %q },
  results = %q,
})
]], framework_dir, dir .. '/out'))
  return path
end

describe('tplua preflight', function()
  it('reports a GPU in use by another process (NVML) and exits 1', function()
    local dir = h.tmpdir()
    local r = h.run({ 'preflight', ref_recipe(dir, {}) },
      { env = { TPLUA_GPU_LIBPATH = fakes('h100busy') } })
    assert.are.equal(1, r.code, r.stdout .. r.stderr)
    assert.is_true(has(r.stdout, 'error   gpus      GPU 1 (NVIDIA H100 80GB HBM3, 0000:28:00.0) '
      .. 'is in use: pid 4242 (30.0 GiB)'), r.stdout)
    assert.is_true(has(r.stdout, 'fix: wait for those processes to end'), r.stdout)
    assert.is_true(has(r.stdout, 'preflight: FAILED: nothing starts (1 error(s)'), r.stdout)
  end)

  it('reports a GPU in use on AMD (ROCm SMI), as JSON with --json', function()
    local dir = h.tmpdir()
    -- Four GPUs: device 3 (the fourth) is the busy one.
    local path = ref_recipe(dir, { platform = 'amd', hardware = 'mi300x' })
    h.write(path, h.read(path):gsub('gpus_per_node = 2', 'gpus_per_node = 4')
      :gsub('dp = 2', 'dp = 4'):gsub('gbs = 4', 'gbs = 8'))
    local r = h.run({ 'preflight', path, '--json' },
      { env = { TPLUA_GPU_LIBPATH = fakes('mi300xbusy') } })
    assert.are.equal(1, r.code, r.stdout .. r.stderr)
    local rep = assert(json.decode(r.stdout))
    assert.are.equal('amd', rep.platform)
    assert.is_false(rep.ok)
    assert.are.equal(1, rep.errors)
    local f = rep.findings[1]
    assert.are.equal('gpus', f.check)
    assert.are.equal('error', f.severity)
    assert.is_true(has(f.message, 'GPU 3 (AMD Instinct MI300X, 0000:b5:00.0) is in use: pid 4343 '
      .. '(40.0 GiB)'), f.message)
  end)

  it('passes on idle GPUs, and names the wrong GPU model and too few GPUs', function()
    local dir = h.tmpdir()
    local ok = h.run({ 'preflight', ref_recipe(dir, {}) },
      { env = { TPLUA_GPU_LIBPATH = fakes('h100x8') } })
    assert.are.equal(0, ok.code, ok.stdout .. ok.stderr)
    assert.is_true(has(ok.stdout, 'info    gpus      nvd: 2 of 8 NVIDIA H100 80GB HBM3 GPU(s) '
      .. 'used, no other process on them'), ok.stdout)
    assert.is_true(has(ok.stdout, "reference: the framework's parser accepts the"), ok.stdout)
    assert.is_true(has(ok.stdout, 'preflight: passed (0 error(s), 0 warning(s)'), ok.stdout)

    local path = ref_recipe(dir, { hardware = 'a100-sxm' })
    h.write(path, h.read(path):gsub('gpus_per_node = 2', 'gpus_per_node = 16')
      :gsub('dp = 2', 'dp = 16'):gsub('gbs = 4', 'gbs = 32'))
    local bad = h.run({ 'preflight', path }, { env = { TPLUA_GPU_LIBPATH = fakes('h100x8') } })
    assert.are.equal(1, bad.code, bad.stdout .. bad.stderr)
    assert.is_true(has(bad.stdout, 'nvd: the runs need 16 nvidia GPU(s) on this machine, the '
      .. 'probe finds 8'), bad.stdout)
    assert.is_true(has(bad.stdout, "nvd: the recipe says hardware 'a100-sxm', this machine has "
      .. 'NVIDIA H100 80GB HBM3 (h100-sxm)'), bad.stdout)
  end)

  it('reports a missing framework checkout', function()
    local dir = h.tmpdir()
    local r = h.run({ 'preflight', megatron_recipe(dir, dir .. '/no-such-megatron') },
      { env = { TPLUA_GPU_LIBPATH = fakes('h100x8') } })
    assert.are.equal(1, r.code, r.stdout .. r.stderr)
    assert.is_true(has(r.stdout, 'error   framework megatron: ' .. dir .. '/no-such-megatron '
      .. 'does not exist'), r.stdout)
    assert.is_true(has(r.stdout, 'fix: set paths.framework_dir to the checkout of megatron'),
      r.stdout)
  end)

  it('leaves the framework inside a container image to the image (a warning)', function()
    local dir = h.tmpdir()
    local path = megatron_recipe(dir, '/workspace/Megatron-LM')
    h.write(path, h.read(path):gsub("results = ", "container = { image = 'nvcr.io/nvidia/"
      .. "pytorch:25.01-py3' },\n  results = ", 1))
    local r = h.run({ 'preflight', path, '--launcher', 'container' },
      { env = { TPLUA_GPU_LIBPATH = fakes('h100x8') } })
    assert.are.equal(0, r.code, r.stdout .. r.stderr)
    assert.is_true(has(r.stdout, 'warning framework megatron: /workspace/Megatron-LM does not '
      .. 'exist (from this machine; the container image may hold it)'), r.stdout)
    assert.is_true(has(r.stdout, 'preflight: passed (0 error(s), 1 warning(s)'), r.stdout)
  end)

  it("runs Megatron-LM's parser: accepted, then a flag it does not know, then too old", function()
    local dir = h.tmpdir()
    local mdir = dir .. '/Megatron-LM'
    local recipe = megatron_recipe(dir, mdir)
    -- The flags tplua generates, from the plan.
    local p = h.run({ 'plan', recipe, '--json' })
    assert.are.equal(0, p.code, p.stderr)
    local argv = assert(json.decode(p.stdout)).platforms.nvd.runs[1].process.argv
    assert.are.equal(mdir .. '/pretrain_gpt.py', argv[2])
    local flags = {}
    for _, a in ipairs(argv) do
      if a:match('^%-%-') then
        flags[#flags + 1] = a
      end
    end
    assert.is_true(#flags > 20)
    local env = { TPLUA_GPU_LIBPATH = fakes('h100x8') }

    megatron_checkout(mdir, flags, { 0, 13, 0 })
    local ok = h.run({ 'preflight', recipe }, { env = env })
    assert.are.equal(0, ok.code, ok.stdout .. ok.stderr)
    assert.is_true(has(ok.stdout, string.format("megatron: the framework's parser accepts the %d "
      .. 'arguments', #argv - 2)), ok.stdout)
    assert.is_true(has(ok.stdout, 'megatron: version 0.13.0 (megatron/core/package_info.py)'),
      ok.stdout)

    -- A Megatron that does not know --seq-length (as if it were renamed).
    local fewer = {}
    for _, f in ipairs(flags) do
      if f ~= '--seq-length' then
        fewer[#fewer + 1] = f
      end
    end
    assert.are.equal(#flags - 1, #fewer)
    megatron_checkout(mdir, fewer, { 0, 13, 0 })
    local rej = h.run({ 'preflight', recipe }, { env = env })
    assert.are.equal(1, rej.code, rej.stdout .. rej.stderr)
    assert.is_true(has(rej.stdout, "error   arguments megatron: the framework's parser rejects "
      .. 'the arguments: unrecognized arguments: --seq-length 2048'), rej.stdout)

    megatron_checkout(mdir, flags, { 0, 5, 1 })
    local old = h.run({ 'preflight', recipe }, { env = env })
    assert.are.equal(1, old.code, old.stdout .. old.stderr)
    assert.is_true(has(old.stdout, 'megatron: version 0.5.1 (megatron/core/package_info.py) is '
      .. "older than 0.6.0, the oldest tplua's adapter generates arguments for"), old.stdout)
  end)

  it("runs torchtitan's config parser on the generated TOML and overrides", function()
    local dir = h.tmpdir()
    local tdir = dir .. '/torchtitan'
    require('tp.fs').mkdir_p(tdir .. '/torchtitan/config')
    require('tp.fs').mkdir_p(dir .. '/data/c4')
    h.write(tdir .. '/torchtitan/__init__.py', '')
    -- Stand-in of torchtitan's ConfigManager: reads the TOML it is given (it must exist and
    -- name a [job] section) and knows the override flags in flags.txt, nothing else.
    h.write(tdir .. '/torchtitan/config/__init__.py', [[
import argparse, os

class ConfigManager:
    def parse_args(self, args):
        root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
        p = argparse.ArgumentParser(allow_abbrev=False)
        p.add_argument("--job.config_file")
        with open(os.path.join(root, "flags.txt")) as f:
            for flag in f.read().split():
                p.add_argument(flag)
        ns = p.parse_args(args)
        with open(getattr(ns, "job.config_file")) as f:
            if "[job]" not in f.read():
                p.error("the TOML has no [job] section")
        return ns
]])
    local path = dir .. '/tt.lua'
    h.write(path, string.format([[
local tp = require('tp')
return tp.experiment.main({ name = 'preflight-torchtitan', model = 'llama3.1-8b',
  platforms = { nvd = { framework = 'torchtitan', hardware = 'h100-sxm' } },
  gpus_per_node = 8,
  training = { seed = 1, mbs = 1, gbs = 8, seq_len = 2048, iters = 10, lr = 3e-4,
               dataset = 'c4' },
  parallelism = { tp = 1, pp = 1, dp = 8 },
  paths = { framework_dir = %q, data = %q }, results = %q })
]], tdir, dir .. '/data', dir .. '/out'))
    local p = h.run({ 'plan', path, '--json' })
    assert.are.equal(0, p.code, p.stdout .. p.stderr)
    local argv = assert(json.decode(p.stdout)).platforms.nvd.runs[1].process.argv
    local flags = {}
    for _, a in ipairs(argv) do
      if a:match('^%-%-') and a ~= '--job.config_file' then
        flags[#flags + 1] = a
      end
    end
    h.write(tdir .. '/flags.txt', table.concat(flags, '\n') .. '\n')
    local env = { TPLUA_GPU_LIBPATH = fakes('h100x8') }
    local ok = h.run({ 'preflight', path }, { env = env })
    assert.are.equal(0, ok.code, ok.stdout .. ok.stderr)
    assert.is_true(has(ok.stdout, "torchtitan: the framework's parser accepts the"), ok.stdout)
    h.write(tdir .. '/flags.txt', table.concat(flags, '\n', 2) .. '\n')
    local rej = h.run({ 'preflight', path }, { env = env })
    assert.are.equal(1, rej.code, rej.stdout .. rej.stderr)
    assert.is_true(has(rej.stdout, "torchtitan: the framework's parser rejects the arguments: "
      .. 'unrecognized arguments: ' .. flags[1]), rej.stdout)
    -- Its dataset is a directory of text under paths.data, not an indexed dataset.
    os.remove(dir .. '/data/c4')
    local nodata = h.run({ 'preflight', path }, { env = env })
    assert.is_true(has(nodata.stdout, 'error   data      dataset directory ' .. dir
      .. '/data/c4 does not exist'), nodata.stdout)
  end)

  it('reports missing data, a tokenizer that is not local, and unwritable output', function()
    local dir = h.tmpdir()
    local path = ref_recipe(dir, { dataset = string.format(
      "{ path = %q, tokenizer = 'acme/no-such-tokenizer' }", dir .. '/data/none'),
      results = dir .. '/a-file' })
    h.write(dir .. '/a-file', 'in the way\n')
    local r = h.run({ 'preflight', path }, { env = { TPLUA_GPU_LIBPATH = fakes('h100x8'),
      HOME = dir, HF_HOME = dir .. '/hf' } })
    assert.are.equal(1, r.code, r.stdout .. r.stderr)
    assert.is_true(has(r.stdout, 'error   data      dataset ' .. dir .. '/data/none: '), r.stdout)
    assert.is_true(has(r.stdout, "error   tokenizer tokenizer 'acme/no-such-tokenizer' is "
      .. 'neither a local path nor in the Hugging Face cache'), r.stdout)
    assert.is_true(has(r.stdout, 'error   output    results directory ' .. dir .. '/a-file '
      .. 'cannot be made'), r.stdout)

    -- Real files: a dataset made by tplua data synth, the tokenizer in the cache.
    require('tp.fs').mkdir_p(dir .. '/data')
    local s = h.run({ 'data', 'synth', dir .. '/data/none', '--tokens', '5000', '--vocab', '256' })
    assert.are.equal(0, s.code, s.stdout .. s.stderr)
    require('tp.fs').mkdir_p(dir .. '/hf/hub/models--acme--no-such-tokenizer/refs')
    h.write(dir .. '/hf/hub/models--acme--no-such-tokenizer/refs/main', 'abc\n')
    os.remove(dir .. '/a-file')
    local ok = h.run({ 'preflight', path }, { env = { TPLUA_GPU_LIBPATH = fakes('h100x8'),
      HOME = dir, HF_HOME = dir .. '/hf' } })
    assert.are.equal(0, ok.code, ok.stdout .. ok.stderr)
    assert.is_true(has(ok.stdout, 'info    data      ' .. dir .. '/data/none: '), ok.stdout)
    assert.is_true(has(ok.stdout, "tokenizer acme/no-such-tokenizer is cached in " .. dir
      .. '/hf/hub'), ok.stdout)
  end)

  it('is a usage error without a recipe', function()
    local r = h.run({ 'preflight' })
    assert.are.equal(2, r.code)
    assert.is_true(has(r.stderr, 'no RECIPE given'), r.stderr)
  end)
end)

-- A campaign file of fake-trainer runs (tests/tools/fake_trainer): `runs` is the Lua text of the
-- runs' list, where FT is the trainer's path and DIR the test's directory.
local function campaign_file(dir, runs, results)
  local path = dir .. '/campaign.lua'
  h.write(path, string.format([[
local tp = require('tp')
local FT, DIR = %q, %q
return tp.campaign({ name = 'preflight-campaign', results = %q, runs = %s })
]], h.tools_dir .. '/fake_trainer', dir, results or (dir .. '/out'), runs))
  return path
end

describe('tplua preflight CAMPAIGN', function()
  -- No GPU library: this machine has no GPU, whatever it really has.
  local function no_gpu()
    return { TPLUA_GPU_LIBPATH = h.tmpdir() }
  end

  it('passes examples/smoke.lua here: python3, the reference trainer, no GPU needed', function()
    local dir = h.tmpdir()
    local r = h.run({ 'preflight', 'examples/smoke.lua', '--results', dir .. '/out' },
      { cwd = h.source_dir, env = no_gpu() })
    assert.are.equal(0, r.code, r.stdout .. r.stderr)
    assert.is_true(has(r.stdout, 'preflight: run smoke-2ranks (ranks)\n'), r.stdout)
    assert.is_true(has(r.stdout, "info    arguments reference: the framework's parser accepts "
      .. 'the 56 arguments'), r.stdout)
    assert.is_true(has(r.stdout, 'info    gpus      run smoke-2ranks: no GPU here: the reference '
      .. 'trainer runs on the CPU (gloo)'), r.stdout)
    assert.is_true(has(r.stdout, 'info    output    ' .. dir .. '/out: writable, '), r.stdout)
    assert.is_true(has(r.stdout, 'preflight: passed (0 error(s), 0 warning(s)'), r.stdout)
    -- The same file with --json: one report per run.
    local j = h.run({ 'preflight', 'examples/smoke.lua', '--results', dir .. '/out', '--json' },
      { cwd = h.source_dir, env = no_gpu() })
    assert.are.equal(0, j.code, j.stdout .. j.stderr)
    local rep = assert(json.decode(j.stdout))
    assert.is_true(rep.ok)
    assert.are.equal('reference trainer smoke test', rep.campaign)
    assert.are.equal(1, #rep.runs)
    assert.are.equal('smoke-2ranks', rep.runs[1].run)
    assert.are.equal('ranks', rep.runs[1].launcher)
  end)

  it('names what examples/smoke.lua misses: its interpreter, idle GPUs', function()
    local dir = h.tmpdir()
    local env = no_gpu()
    env.TPLUA_PYTHON = dir .. '/no-python3'
    local r = h.run({ 'preflight', 'examples/smoke.lua', '--results', dir .. '/out' },
      { cwd = h.source_dir, env = env })
    assert.are.equal(1, r.code, r.stdout .. r.stderr)
    assert.is_true(has(r.stdout, 'error   framework reference: the interpreter ' .. dir
      .. '/no-python3 does not exist or cannot be executed'), r.stdout)
    assert.is_true(has(r.stdout, 'preflight: FAILED: nothing starts (1 error(s)'), r.stdout)
    -- With GPUs here the reference trainer uses them: two idle ones pass, a busy one fails.
    local ok = h.run({ 'preflight', 'examples/smoke.lua', '--results', dir .. '/out' },
      { cwd = h.source_dir, env = { TPLUA_GPU_LIBPATH = fakes('h100x8') } })
    assert.are.equal(0, ok.code, ok.stdout .. ok.stderr)
    assert.is_true(has(ok.stdout, 'info    gpus      run smoke-2ranks: 2 of 8 NVIDIA H100 80GB '
      .. 'HBM3 GPU(s) used, no other process on them'), ok.stdout)
    local busy = h.run({ 'preflight', 'examples/smoke.lua', '--results', dir .. '/out' },
      { cwd = h.source_dir, env = { TPLUA_GPU_LIBPATH = fakes('h100busy') } })
    assert.are.equal(1, busy.code, busy.stdout .. busy.stderr)
    assert.is_true(has(busy.stdout, 'error   gpus      GPU 1 (NVIDIA H100 80GB HBM3, 0000:28:00.0) '
      .. 'is in use: pid 4242 (30.0 GiB)'), busy.stdout)
  end)

  it('names the absent sbatch of examples/slurm_smoke.lua', function()
    local dir = h.tmpdir()
    -- An empty PATH: no Slurm client (tplua and the trainer's python3 are absolute paths).
    local r = h.run({ 'preflight', 'examples/slurm_smoke.lua' }, { cwd = h.source_dir,
      env = { PATH = h.tmpdir(), TPLUA_SMOKE_DIR = dir } })
    assert.are.equal(1, r.code, r.stdout .. r.stderr)
    assert.is_true(has(r.stdout, 'preflight: run slurm-smoke-2x2 (slurm)'), r.stdout)
    assert.is_true(has(r.stdout, 'error   slurm     sbatch is not found in PATH: the jobs cannot '
      .. 'be submitted from this machine'), r.stdout)
    -- The framework is the compute nodes' business; its parser still runs here.
    assert.is_true(has(r.stdout, "info    arguments reference: the framework's parser accepts"),
      r.stdout)
  end)

  it('names a missing interpreter, a missing data file and unwritable output, run by run',
    function()
    local dir = h.tmpdir()
    h.write(dir .. '/a-file', 'in the way\n')
    local path = campaign_file(dir, [[{
  { id = 'nointerp', argv = { 'python9.9', DIR .. '/train.py' } },
  { id = 'nodata', argv = { FT, '--megatron-gen', '3', '--data-path', '0.5', DIR .. '/data/c4',
    '0.5', DIR .. '/data/wiki' } },
  { id = 'fine', argv = { FT, '--megatron-gen', '3' }, gpus = 4 },
}]], dir .. '/a-file/out')
    local r = h.run({ 'preflight', path }, { env = no_gpu() })
    assert.are.equal(1, r.code, r.stdout .. r.stderr)
    local out = r.stdout
    assert.is_true(has(out, 'preflight: run nointerp (local)\n'
      .. '  error   framework nointerp: the entry script ' .. dir .. '/train.py is missing\n'),
      out)
    assert.is_true(has(out, 'error   framework nointerp: the interpreter python9.9 is not found '
      .. 'in PATH'), out)
    assert.is_true(has(out, 'error   data      dataset ' .. dir .. '/data/c4: '), out)
    assert.is_true(has(out, 'error   data      dataset ' .. dir .. '/data/wiki: '), out)
    assert.is_true(has(out, 'error   output    results directory ' .. dir .. '/a-file/out '
      .. 'cannot be made'), out)
    assert.is_true(has(out, 'info    gpus      run fine: no GPU here, and its command is none of '
      .. 'the frameworks tplua knows: GPUs not checked'), out)
    assert.is_true(has(out, 'preflight: campaign: 0 of 3 run(s) passed; FAILED: nothing starts'),
      out)

    -- The data made, the output elsewhere: those runs pass; the interpreter is still missing.
    require('tp.fs').mkdir_p(dir .. '/data')
    for _, name in ipairs({ 'c4', 'wiki' }) do
      local s = h.run({ 'data', 'synth', dir .. '/data/' .. name, '--tokens', '5000',
        '--vocab', '256' })
      assert.are.equal(0, s.code, s.stdout .. s.stderr)
    end
    local ok = h.run({ 'preflight', path, '--results', dir .. '/out' }, { env = no_gpu() })
    assert.are.equal(1, ok.code, ok.stdout .. ok.stderr)
    assert.is_true(has(ok.stdout, 'info    data      ' .. dir .. '/data/wiki: '), ok.stdout)
    assert.is_true(has(ok.stdout, 'preflight: campaign: 2 of 3 run(s) passed; FAILED'),
      ok.stdout)

    -- A results directory that exists but takes no file (/proc's are made by the kernel only).
    local ro = h.run({ 'preflight', path, '--results', '/proc/1' }, { env = no_gpu() })
    assert.are.equal(1, ro.code, ro.stdout .. ro.stderr)
    assert.is_true(has(ro.stdout, 'error   output    results directory /proc/1 is not writable'),
      ro.stdout)
  end)

  it('checks the GPUs of a run that asks for them on a GPU platform', function()
    local dir = h.tmpdir()
    local path = campaign_file(dir, [[{
  { id = 'eight', argv = { FT, '--megatron-gen', '3' }, gpus = 8, platform = 'nvd',
    hardware = 'h100-sxm' },
}]])
    local none = h.run({ 'preflight', path }, { env = no_gpu() })
    assert.are.equal(1, none.code, none.stdout .. none.stderr)
    assert.is_true(has(none.stdout, 'error   gpus      run eight needs 8 nvidia GPU(s) on this '
      .. 'machine, the probe finds 0'), none.stdout)
    local ok = h.run({ 'preflight', path }, { env = { TPLUA_GPU_LIBPATH = fakes('h100x8') } })
    assert.are.equal(0, ok.code, ok.stdout .. ok.stderr)
    assert.is_true(has(ok.stdout, 'run eight: 8 of 8 NVIDIA H100 80GB HBM3 GPU(s) used'),
      ok.stdout)
  end)
end)

describe('tplua run CAMPAIGN and the preflight', function()
  it('starts nothing when a check fails; --skip-preflight starts; the records say which',
    function()
    local dir = h.tmpdir()
    local env = { TPLUA_GPU_LIBPATH = h.tmpdir() }
    local path = campaign_file(dir, [[{
  { id = 'r1', argv = { FT, '--megatron-gen', '3', '--lines-per-sec', '1000' },
    parser = 'megatron', gbs = 64, seq_len = 1024,
    config = { model = 'llama3.1-8b', training = { dataset = { path = DIR .. '/data/c4' } } } },
}]])
    local fs = require('tp.fs')
    local r = h.run({ 'run', path, '--results', dir .. '/a' }, { env = env })
    assert.are.equal(1, r.code, r.stdout .. r.stderr)
    assert.is_true(has(r.stdout, 'preflight: run r1 (local)'), r.stdout)
    assert.is_true(has(r.stdout, 'error   data      dataset ' .. dir .. '/data/c4: '), r.stdout)
    assert.is_true(has(r.stdout, 'run: the preflight found errors: nothing started '
      .. '(--skip-preflight starts anyway)'), r.stdout)
    -- Nothing started: no journal, no log.
    assert.is_false(fs.exists(dir .. '/a/journal.jsonl'))
    assert.is_false(fs.exists(dir .. '/a/r1.log'))

    local s = h.run({ 'run', path, '--results', dir .. '/a', '--skip-preflight' }, { env = env })
    assert.are.equal(0, s.code, s.stdout .. s.stderr)
    assert.is_true(has(s.stdout, 'run: --skip-preflight: the checks before launch are skipped'),
      s.stdout)
    local rec = assert(json.load_file(dir .. '/a/r1.json'))
    assert.are.equal('completed', rec.status)
    assert.are.same({ skipped = true, reason = '--skip-preflight' }, rec.preflight)

    -- The data made: the checks pass, the run starts, its record keeps the summary.
    fs.mkdir_p(dir .. '/data')
    local d = h.run({ 'data', 'synth', dir .. '/data/c4', '--tokens', '5000', '--vocab', '256' })
    assert.are.equal(0, d.code, d.stdout .. d.stderr)
    local ok = h.run({ 'run', path, '--results', dir .. '/b' }, { env = env })
    assert.are.equal(0, ok.code, ok.stdout .. ok.stderr)
    assert.is_true(has(ok.stdout, 'info    data      ' .. dir .. '/data/c4: '), ok.stdout)
    assert.is_true(has(ok.stdout, 'preflight: passed (0 error(s), 0 warning(s)'), ok.stdout)
    rec = assert(json.load_file(dir .. '/b/r1.json'))
    assert.is_true(rec.preflight.ok)
    assert.are.equal(0, rec.preflight.errors)
    -- Run again: nothing is left to start, so nothing is checked.
    local again = h.run({ 'run', path, '--results', dir .. '/b' }, { env = env })
    assert.are.equal(0, again.code, again.stdout .. again.stderr)
    assert.is_false(has(again.stdout, 'preflight:'), again.stdout)
  end)
end)

describe('tplua run and the preflight #slow', function()
  local missing = h.torch_missing()
  if missing then
    it('starts nothing when the preflight fails', function()
      pending(missing)
    end)
    return
  end

  it('starts nothing on a busy GPU; --skip-preflight starts and the record says so', function()
    local dir = h.tmpdir()
    local path = ref_recipe(dir, {})
    local busy = { TPLUA_GPU_LIBPATH = fakes('h100busy') }
    local r = h.run({ 'run', path }, { env = busy })
    assert.are.equal(1, r.code, r.stdout .. r.stderr)
    assert.is_true(has(r.stdout, 'is in use: pid 4242'), r.stdout)
    assert.is_true(has(r.stdout, 'run: the preflight found errors: nothing started'), r.stdout)
    assert.are.same({}, require('tp.fs').glob(dir .. '/out/*.json'))

    local s = h.run({ 'run', path, '--skip-preflight' }, { env = busy })
    assert.are.equal(0, s.code, s.stdout .. s.stderr)
    assert.is_true(has(s.stdout, 'run: --skip-preflight: the checks before launch are skipped'),
      s.stdout)
    local recs = require('tp.fs').glob(dir .. '/out/*.json')
    assert.are.equal(1, #recs)
    local rec = assert(json.load_file(recs[1]))
    assert.are.equal('completed', rec.status)
    assert.are.same({ skipped = true, reason = '--skip-preflight' }, rec.preflight)
    assert.are.equal('tplua.run/2', rec.schema)
    -- The GPUs' state at the start is in the environment: power limit, clocks, ECC.
    local st = rec.environment.gpu_state
    assert.are.equal(1, #st)
    assert.are.same({ 1, 2, 3, 4, 5, 6, 7, 8 }, st[1].devices)
    assert.are.equal(700, st[1].power_limit_w)
    assert.are.equal(1980, st[1].app_clock_mhz)
    assert.is_true(st[1].ecc)
    assert.is_true(st[1].persistence)
  end)

  it('runs after a passing preflight, whose summary the record keeps', function()
    local dir = h.tmpdir()
    local r = h.run({ 'run', ref_recipe(dir, {}) },
      { env = { TPLUA_GPU_LIBPATH = fakes('h100x8') } })
    assert.are.equal(0, r.code, r.stdout .. r.stderr)
    assert.is_true(has(r.stdout, 'preflight: passed'), r.stdout)
    local recs = require('tp.fs').glob(dir .. '/out/*.json')
    local rec = assert(json.load_file(recs[1]))
    assert.is_true(rec.preflight.ok)
    assert.are.equal(0, rec.preflight.errors)
    assert.truthy(rec.preflight.at:match('^%d%d%d%d%-%d%d%-%d%dT'))
  end)
end)
