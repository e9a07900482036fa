-- tp.analyse._trace_idle: why the GPU is idle, summarised from the engine's figures (tp._trace
-- breakdown: each step's idle time per cause, launch figures and stream queues; HTA's idle-time
-- breakdown per stream): the mean of the steady steps, the launch figures of the steady steps
-- together, each stream's queue over them, and the same across ranks. docs/trace.md, "Why the
-- GPU is idle".

local M = {}

--- The causes of idle time, in the order they are shown, with what each means.
M.CAUSES = { 'host', 'sync', 'dataloader', 'latency', 'other' }

M.LABELS = {
  host = 'host launch',
  sync = 'synchronisation',
  dataloader = 'dataloader',
  latency = 'launch latency',
  other = 'other',
}

M.MEANING = {
  host = 'the launch call of the op that ends the gap started after the GPU went idle',
  sync = 'the same, while the host was blocked in a synchronisation or a blocking copy',
  dataloader = 'the same, while the dataloader ran',
  latency = 'the op was queued before the gap, and the gap is shorter than the threshold',
  other = 'the op was queued before the gap, a longer gap (another stream, an event)',
}

--- The mean idle time per cause (ns) over `steps` (each with its `cause`).
---@param steps table[]
---@return table<string, number>
function M.mean_causes(steps)
  local m = {}
  for _, c in ipairs(M.CAUSES) do
    local s = 0
    for _, st in ipairs(steps) do
      s = s + ((st.cause and st.cause[c]) or 0)
    end
    m[c] = #steps > 0 and s / #steps or 0
  end
  return m
end

-- Launch figures with their shares and means, as the text and the JSON show them.
local function launch_view(l)
  if not l or (l.count or 0) == 0 then
    return { count = 0 }
  end
  local v = {}
  for k, x in pairs(l) do
    v[k] = x
  end
  v.shorter_share = l.shorter / l.count
  v.cpu_mean = l.cpu / l.count
  v.gpu_mean = l.gpu / l.count
  v.delay_mean = l.delay_sum / l.count
  return v
end

M.launch_view = launch_view

--- Each stream's queue over the steady steps: { stream, mean (time-weighted over their windows),
--- max, empty (share of their time with nothing queued) }, by stream.
---@param steps table[]
---@return table[]
function M.queues(steps)
  local by, order = {}, {}
  local total = 0
  for _, st in ipairs(steps) do
    total = total + st.window
    for _, q in ipairs(st.queue or {}) do
      local e = by[q.stream]
      if not e then
        e = { stream = q.stream, area = 0, max = 0, empty = 0 }
        by[q.stream] = e
        order[#order + 1] = e
      end
      e.area = e.area + q.mean * st.window
      e.max = math.max(e.max, q.max)
      e.empty = e.empty + q.empty
    end
  end
  local out = {}
  for i, e in ipairs(order) do
    out[i] = { stream = e.stream, mean = total > 0 and e.area / total or 0, max = e.max,
      empty = total > 0 and e.empty / total or nil }
  end
  table.sort(out, function(x, y)
    return x.stream < y.stream
  end)
  return out
end

--- The idle part of one trace's analysis: the mean causes of the steady steps, the threshold,
--- the launch figures of the steady steps together, the streams' queues, and HTA's per-stream
--- breakdown of the whole trace.
---@param b table the engine's breakdown
---@param steady table[] the steady steps
---@return table
function M.summary(b, steady)
  local hta = {}
  for i, h in ipairs(b.hta_idle or {}) do
    hta[i] = { stream = h.stream, ops = h.ops, host = h.host, kernel = h.kernel, other = h.other }
  end
  return { gap = b.gap, causes = M.mean_causes(steady), launch = launch_view(b.launch),
    queues = M.queues(steady), hta = hta }
end

--- The mean causes over ranks (each rank's `idle.causes`), nil when none has any.
---@param ranks table[] analyses
---@return table|nil
function M.mean_of_ranks(ranks)
  local with = {}
  for _, a in ipairs(ranks) do
    if a.gpu and a.idle then
      with[#with + 1] = a.idle.causes
    end
  end
  if #with == 0 then
    return nil
  end
  local m = {}
  for _, c in ipairs(M.CAUSES) do
    local s = 0
    for _, x in ipairs(with) do
      s = s + x[c]
    end
    m[c] = s / #with
  end
  return m
end

--- The largest cause of a table of causes: its name and value (nil when all are 0).
---@param causes table<string, number>
---@return string|nil, number
function M.largest(causes)
  local best, v = nil, 0
  for _, c in ipairs(M.CAUSES) do
    if (causes[c] or 0) > v then
      best, v = c, causes[c]
    end
  end
  return best, v
end

return M
