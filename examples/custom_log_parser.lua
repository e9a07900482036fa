-- A custom log parser: teaches tp.log a training log format it does not know (here the made-up
-- "nanotrain" trainer of examples/logs/nanotrain.log), then turns the log into a run record
-- with the same metrics as every other framework (tokens/s from global batch x sequence length
-- / step time over the steady-state window, never the trainer's own figure).
--   tplua examples/custom_log_parser.lua [LOG]
local tp = require('tp')

-- Line shape: "[nanotrain] step 3/12 loss=10.6312 lr=9.00e-05 gnorm=5.102 step_ms=401.5
-- tok/s/dev=20404". detect() sees lines with escapes and launcher prefixes already removed.
tp.log.register({
  name = 'nanotrain',
  version = '1',
  detect = function(line)
    return line:find('^%[nanotrain%] step %d+/%d+ ') ~= nil
  end,
  line = function(line, rec)
    local step, total = line:match('^%[nanotrain%] step (%d+)/(%d+) ')
    if not step then
      return false
    end
    rec.iteration = tonumber(step)
    rec.train_iters = tonumber(total)
    rec.loss = tonumber(line:match(' loss=(%S+)'))
    rec.lr = tonumber(line:match(' lr=(%S+)'))
    rec.grad_norm = tonumber(line:match(' gnorm=(%S+)'))
    local ms = tonumber(line:match(' step_ms=(%S+)'))
    rec.step_time_s = ms and ms / 1000
    rec.tokens_per_s_per_gpu = tonumber(line:match(' tok/s/dev=(%S+)'))
    return true
  end,
})

local here = debug.getinfo(1, 'S').source:match('^@(.*)/[^/]*$') or '.'
local path = arg and arg[1] or (here .. '/logs/nanotrain.log')
local log = assert(tp.log.parse(path))
-- The trainer states its batch and GPU count on its first line; tp.record needs them to compute
-- tokens/s (they are not in the iteration lines).
local rec = tp.record.from_log(log, { path = path, gbs = 32, seq_len = 2048, gpus = 8,
                                      model = 'llama3.2-1b' })
local pm = rec.performance_metrics
print(string.format('%s: format %s, %d records, status %s', path, rec.format, #rec.records,
  rec.status))
print(string.format('steady state from iteration %s (%s), mean step time %.4f s',
  tostring(pm.steady_state.first_iteration), pm.steady_state.method, pm.avg_step_time_seconds))
print(string.format('tokens/s/GPU %.1f (the trainer printed %.1f)', pm.tokens_per_second_per_gpu,
  pm.framework_tokens_per_second_per_gpu))
print(string.format('loss %.4f -> %.4f', rec.loss_values[1], rec.loss_values[#rec.loss_values]))
