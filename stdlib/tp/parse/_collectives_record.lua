-- tp.parse._collectives_record: the run record of nccl-tests or rccl-tests output parsed by
-- tp.parse.collectives: schema tplua.run/2, kind "collective_bench", a `collectives` section with
-- each table's rows (docs/record.md, docs/collectives.md).
local M = {}

--- The version of the reader, kept in each record's source.parser_version.
M.VERSION = '1'

-- What the record keeps of a row's section: the figures, not their text.
local function section_of(c)
  if not c then
    return nil
  end
  return { time_us = c.time_us, algbw = c.algbw, busbw = c.busbw, wrong = c.wrong,
    inconsistent = c.inconsistent or nil, i_min = c.i_min, i_max = c.i_max, i_p99 = c.i_p99,
    i_cv = c.i_cv }
end

-- The platform of a GPU name or a tool.
local function platform_of(gpu, tool)
  local g = (gpu or ''):lower()
  if g:find('amd', 1, true) or g:find('instinct', 1, true) or g:find('radeon', 1, true)
    or tool == 'rccl-tests' then
    return 'amd'
  end
  if g:find('nvidia', 1, true) or g:find('^[ahbgl]%d%d%d?') or g:find('tesla', 1, true) then
    return 'nvd'
  end
  return nil
end

--- The run record of a parsed nccl-tests or rccl-tests output: schema tplua.run/2 with
--- `kind = "collective_bench"` and a `collectives` section (docs/record.md). `opts` carries the
--- run's identity and source as tp.parse.record's does: platform, hardware (a tp.hardware id),
--- run_id, experiment, repeat, path, size_bytes, sha256, command, exit_status, started_at,
--- finished_at.
---@param parsed table M.parse's result
---@param opts? table
---@return table record
function M.record(parsed, opts)
  opts = opts or {}
  local json = require('tp.json')
  local null = json.null
  local first = parsed.tests[1] or {}
  local gpu = first.gpu
  local hardware = opts.hardware
  if not hardware and gpu then
    local row = require('tp.catalog.hardware').match({ name = gpu })
    hardware = row and row.id or nil
  end
  local diagnostics = json.array()
  local failed, complete = false, true
  local tests = json.array()
  for i, t in ipairs(parsed.tests) do
    local rows = json.array()
    local wrong = 0
    for j, r in ipairs(t.rows) do
      rows[j] = { size = r.size, count = r.count, type = r.type, redop = r.redop or null,
        root = r.root or null, cycle = r.cycle, line = r.line, out = section_of(r.out) or null,
        ['in'] = section_of(r['in']) or null }
      for _, sec in ipairs({ 'out', 'in' }) do
        if r[sec] and (r[sec].wrong or 0) > 0 then
          wrong = wrong + 1
        end
      end
    end
    if wrong > 0 then
      failed = true
      diagnostics[#diagnostics + 1] = { kind = 'wrong_results', severity = 'error', line = null,
        message = string.format('%s: %d figures with wrong elements (#wrong > 0)', t.collective,
          wrong) }
    end
    if (t.oob or 0) > 0 then
      failed = true
      diagnostics[#diagnostics + 1] = { kind = 'out_of_bounds', severity = 'error', line = null,
        message = string.format('%s: %d out-of-bounds values', t.collective, t.oob) }
    end
    if not t.avg_busbw then
      complete = false
    end
    for _, w in ipairs(t.warnings) do
      diagnostics[#diagnostics + 1] = { kind = 'busbw_check', severity = 'warning', line = null,
        message = w }
    end
    tests[i] = { collective = t.collective, collective_source = t.collective_source,
      program = t.program or null, command = t.command or null, ranks = t.ranks or null,
      hosts = t.hosts or null, gpu = t.gpu or null, dtype = t.dtype, redop = t.redop or null,
      root = t.root or null, params = t.params or null, cycles = t.cycles,
      avg_busbw = t.avg_busbw or null, out_of_bounds = t.oob or null,
      checked = t.checked or null, consistent = t.consistent or null,
      devices = #t.devices > 0 and t.devices or json.array(), rows = rows }
  end
  for _, w in ipairs(parsed.warnings) do
    diagnostics[#diagnostics + 1] = { kind = 'truncated', severity = 'warning', line = null,
      message = w }
    complete = false
  end
  local status = failed and 'failed' or (complete and 'completed' or 'unknown')
  local rec = {
    schema = 'tplua.run/2',
    kind = 'collective_bench',
    platform = opts.platform or platform_of(gpu, parsed.tool) or null,
    framework = parsed.tool,
    format = parsed.tool,
    model = null, dataset = null, methodology = null,
    ['repeat'] = opts['repeat'] or null,
    run_id = opts.run_id or null,
    experiment = opts.experiment or null,
    gpu_info = gpu and { device_name = gpu, device_count = first.ranks or null,
      hardware = hardware or null } or null,
    status = status,
    outcome = failed and 'crash' or (complete and 'completed' or 'truncated'),
    diagnostics = diagnostics,
    collectives = {
      tool = parsed.tool, tool_version = parsed.tool_version or null,
      library = parsed.library or null, library_version = parsed.library_version or null,
      hip_version = parsed.hip_version or null, rocm_version = parsed.rocm_version or null,
      tests = tests,
    },
    records = json.array(), iterations = json.array(), step_times = json.array(),
    loss_values = json.array(), learning_rates = json.array(),
    training_config = { num_gpus = first.ranks or null }, performance_metrics = {},
    memory_metrics = {}, args = {}, params = null,
    source = { path = opts.path or parsed.path, sha256 = opts.sha256 or null,
      size_bytes = opts.size_bytes or null, parser = 'tp.parse.collectives',
      parser_version = M.VERSION, command = opts.command or first.command or null,
      exit_status = opts.exit_status or null, started_at = opts.started_at or null,
      finished_at = opts.finished_at or null },
  }
  return rec
end

return M
