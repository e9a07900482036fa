-- tp.run: one training command under supervision. Spawns it (tp.proc: own process group, log
-- teed as it arrives, timeout), parses its output live (tp.log.stream), stops it early on NaN
-- loss, OOM, NCCL failure or a stall, samples GPU telemetry when there are GPUs, and writes the
-- unified run record (tp.record) atomically. tp.campaign runs many of these with a journal.
-- docs/campaign.md describes the run table, the abort rules and the record additions.
--
-- This module is the public face; the code lives in private parts of tp.run:
--   tp.run._base        clocks (iso_time, clock) and helpers the parts share
--   tp.run._check       the run table: check, hashed_view, hash, abort_rules
--   tp.run._telemetry   probe_gpus, the telemetry summary of a run
--   tp.run._active      the run object (Active) while it runs: output, live state, abort rules
--   tp.run._record      how a run ends: Active:classify, :build_record, :finalize
--   tp.run._slurm_job   runs launched as Slurm jobs: Active:on_slurm_line, :settle_slurm_job
--   tp.run._start       start, and boot_id / proc_stat (/proc)
--   tp.run._stop        the stop rule: stop a run when its step-time mean is known (a CI)
local fs = require('tp.fs')
local proc = require('tp.proc')
local secrets = require('tp.secrets')
local base = require('tp.run._base')
local checks = require('tp.run._check')
local telemetry = require('tp.run._telemetry')
local start = require('tp.run._start')
local Active = require('tp.run._active')
local stop = require('tp.run._stop')

local mono = base.clock

local M = {}

-- The run table, its hash and the abort rules (tp.run._check).
M.ABORT_DEFAULTS = checks.ABORT_DEFAULTS
M.HASH_SCHEMA = checks.HASH_SCHEMA
M.check = checks.check
M.hashed_view = checks.hashed_view
M.hash = checks.hash
M.abort_rules = checks.abort_rules

-- The stop rule of a run (tp.run._stop, docs/stopping.md): its defaults, its check (raises
-- "<where>stop.<field>: ..."), its description, and a replay of a step-time series through the
-- monitor a live run uses.
M.STOP_DEFAULTS = stop.DEFAULTS
M.stop_rule = stop.check
M.describe_stop = stop.describe
M.replay_stop = stop.replay

-- Clocks (tp.run._base).
M.iso_time = base.iso_time
M.clock = base.clock

-- A process across a restart of tplua (/proc), and starting a run (tp.run._start).
M.boot_id = start.boot_id
M.proc_stat = start.proc_stat
M.start = start.start

-- GPUs (tp.run._telemetry).
M.probe_gpus = telemetry.probe_gpus

---@class tp.run.ExecuteOpts
---@field results? string directory of the record and the log (default '.')
---@field abort? table early-abort rules (default tp.run.ABORT_DEFAULTS)
---@field quiet? boolean no live view (default false)
---@field view? tp.live.View a view to report to (default: a new one unless quiet)
---@field telemetry? boolean sample GPUs when there are some (default true)
---@field telemetry_interval? number seconds between GPU readings (default 1)
---@field kill_grace? number seconds from SIGTERM to SIGKILL (default 5)

--- Runs one run to completion and writes `<results>/<id>.json` and `<results>/<id>.log` (no
--- journal, no lock: tp.campaign adds those). SIGINT or SIGTERM during the run is forwarded
--- to its process group (after a SIGINT, SIGTERM follows within a second, then SIGKILL after
--- `kill_grace`; docs/proc.md) and the outcome says `interrupted`.
---```lua
---local out = tp.run.execute({ id = 'smoke', argv = { 'python3', 'train.py' }, gbs = 8,
---  seq_len = 2048, gpus = 1 }, { results = 'output' })
---print(out.status, out.record and out.record.performance_metrics.tokens_per_second)
---```
---@param run table
---@param opts? tp.run.ExecuteOpts
---@return table outcome see Active:finalize
function M.execute(run, opts)
  opts = opts or {}
  local r = M.check(run, 2)
  local results = opts.results or '.'
  assert(fs.mkdir_p(results))
  local scrubber = secrets.new({ r.env or {} })
  local view = opts.view
  if view == nil and not opts.quiet then
    view = require('tp.run.live').new({ scrub = function(text)
      return (scrubber:string(text))
    end })
  end
  local ctx = {
    results = results, scrubber = scrubber, abort = M.abort_rules(opts.abort),
    gpus = M.probe_gpus(opts), view = view or nil, kill_grace = opts.kill_grace,
    telemetry_interval = opts.telemetry_interval,
  }
  local loop <close> = proc.loop()
  local active = M.start(loop, r, ctx)
  local timer = loop:timer(1, function()
    active:tick(mono())
    if ctx.view then
      ctx.view:tick()
    end
  end)
  -- loop:run keeps its signal handlers installed until the child is gone: SIGINT is forwarded
  -- to the run's group (then SIGTERM, then SIGKILL after the grace) and the exit says
  -- `interrupted`.
  while not active:done() do
    assert(loop:run())
  end
  loop:cancel(timer)
  local outcome = active:finalize()
  if ctx.view then
    ctx.view:close()
  end
  return outcome
end

M.Active = Active

-- The package's modules, loaded on first use: tp.run.campaign, tp.run.preflight, ...
return require('tp').package('tp.run', {
  'campaign', 'live', 'preflight', 'preflight_framework', 'provenance',
}, M)
