-- tp.analyse._trace_comm: the collectives of profiler traces (the engine's side array of NCCL and
-- RCCL GPU ops with the message each moved, trace:collectives()): per op its collective, message
-- size, time, algorithm and bus bandwidth (nccl-tests' bus factors, tp.parse.collectives); per
-- rank a table by collective and by message-size bucket; across the ranks of one run each
-- collective instance matched (by process group and sequence number, else by order within its
-- process group), its latency (the shortest of its kernels: the rank that arrived last waited for
-- no one), its arrival skew (last start - first start) and the rank that arrives last most often;
-- per collective, the time lost to skew against the time moving data. docs/collectives.md.
local parse = require('tp.parse.collectives')

local M = {}

-- GB/s from bytes and ns.
local function gbps(bytes, ns)
  if not bytes or not ns or ns <= 0 then
    return nil
  end
  return bytes / ns
end

--- The collectives of one trace: `list` is trace:collectives(), `names` trace:names() with their
--- classes, `world` the trace's world size (distributedInfo). Each op: { ts, dur, step, kind,
--- collective (as the profiler named it), bytes, ranks, algbw, busbw, pg, pg_ranks, seq, rank,
--- dtype, stream, source, name }.
---@return table[]
function M.ops_of(list, names, world)
  local out = {}
  for _, c in ipairs(list) do
    local nm = names[c.name] or {}
    local kind = parse.kind_of(c.collective) or parse.kind_of(nm.name) or 'collective'
    local n = c.group or world
    local bytes
    if c.dtype_size and (c.in_nelems or c.out_nelems) then
      -- nccl-tests' size: the larger buffer (all-gather's output, reduce-scatter's input).
      bytes = math.max(c.in_nelems or 0, c.out_nelems or 0) * c.dtype_size
    end
    local op = { ts = c.ts, dur = c.dur, step = c.step, kind = kind, collective = c.collective,
      bytes = bytes, ranks = n, pg = c.pg, pg_ranks = c.pg_ranks, seq = c.seq, rank = c.rank,
      dtype = c.dtype, stream = c.stream, source = c.source, name = nm.name }
    op.algbw = bytes and gbps(parse.algbw_bytes(kind, bytes, n or 1), c.dur)
    local f = n and parse.bus_factor(kind, n)
    op.busbw = op.algbw and f and op.algbw * f or nil
    out[#out + 1] = op
  end
  return out
end

local function add(agg, op, time)
  agg.count = agg.count + 1
  agg.time = agg.time + time
  if op.bytes then
    agg.sized = agg.sized + 1
    agg.sized_time = agg.sized_time + time
    agg.bytes = agg.bytes + op.bytes
    local f = op.ranks and parse.bus_factor(op.kind, op.ranks)
    if f then
      agg.bus_bytes = agg.bus_bytes + parse.algbw_bytes(op.kind, op.bytes, op.ranks) * f
      agg.alg_bytes = agg.alg_bytes + parse.algbw_bytes(op.kind, op.bytes, op.ranks)
      agg.bw_time = agg.bw_time + time
    end
  end
end

local function new_agg(kind, bucket)
  return { kind = kind, bucket = bucket, count = 0, time = 0, sized = 0, sized_time = 0,
    bytes = 0, bus_bytes = 0, alg_bytes = 0, bw_time = 0 }
end

local function finish(agg)
  agg.algbw = agg.bw_time > 0 and agg.alg_bytes / agg.bw_time or nil
  agg.busbw = agg.bw_time > 0 and agg.bus_bytes / agg.bw_time or nil
  agg.alg_bytes, agg.bus_bytes = nil, nil
  return agg
end

local function bucket_of(bytes)
  if not bytes then
    return -1
  end
  local b = 1
  if bytes < 1 then
    return 0
  end
  while b * 2 <= bytes do
    b = b * 2
  end
  return b
end

--- The table of a list of ops (M.ops_of, or cross-rank instances with `time` their latency):
--- { kinds = { {kind, count, time, bytes, algbw, busbw, ...} }, buckets = { {kind, bucket
--- (bytes: a power of 2; -1 unknown size), ...} } }. Bandwidths are time-weighted: the bytes the
--- ops moved over the time they took.
---@param ops table[]
---@param time_of? fun(op): number  the time an op counts for (default: its dur)
---@return table
function M.table_of(ops, time_of)
  local kinds, korder, buckets = {}, {}, {}
  for _, op in ipairs(ops) do
    local time = time_of and time_of(op) or op.dur
    local k = kinds[op.kind]
    if not k then
      k = new_agg(op.kind)
      kinds[op.kind] = k
      korder[#korder + 1] = op.kind
    end
    add(k, op, time)
    local bkey = op.kind .. '|' .. bucket_of(op.bytes)
    local b = buckets[bkey]
    if not b then
      b = new_agg(op.kind, bucket_of(op.bytes))
      buckets[bkey] = b
    end
    add(b, op, time)
  end
  local out = { kinds = {}, buckets = {} }
  table.sort(korder)
  for _, k in ipairs(korder) do
    out.kinds[#out.kinds + 1] = finish(kinds[k])
  end
  for _, b in pairs(buckets) do
    out.buckets[#out.buckets + 1] = finish(b)
  end
  table.sort(out.buckets, function(x, y)
    if x.kind ~= y.kind then
      return x.kind < y.kind
    end
    return x.bucket < y.bucket
  end)
  return out
end

--- One trace's collectives: { ops, count, table (M.table_of) }.
function M.of_trace(list, names, world)
  local ops = M.ops_of(list, names, world)
  return { ops = ops, count = #ops, table = M.table_of(ops) }
end

-- The process-group key of an op: its name and ranks, '?' when the trace says neither.
local function pg_key(op)
  if not op.pg and not op.pg_ranks then
    return '?'
  end
  return tostring(op.pg or '') .. ' ' .. tostring(op.pg_ranks or '')
end

--- The collectives across the ranks of one run: `ranks` are tp.analyse.trace analyses, each
--- with `collectives` (M.of_trace) and `rank`. Each instance matched across ranks by process
--- group and sequence number (when every op of the group has one on every rank), else by its
--- order within the group. Returns { instances = { {kind, pg, key, bytes, latency, skew,
--- late_rank, ranks = {rank...}, starts, durs} }, kinds = { {kind, instances, data_time,
--- skew_time, mean_skew, max_skew, late_rank, late_count, latency_busbw, late} }, table (by
--- bucket, over latencies), late = { {rank, count} } (the times each rank arrived last),
--- late_rank, late_count, warnings }.
---@param ranks table[]
---@return table
function M.across(ranks)
  local warnings = {}
  local groups, gorder = {}, {}
  local rank_ids = {}
  for i, a in ipairs(ranks) do
    local rk = a.rank or i - 1
    rank_ids[#rank_ids + 1] = rk
    local by_pg = {}
    for _, op in ipairs(a.collectives and a.collectives.ops or {}) do
      local k = pg_key(op)
      by_pg[k] = by_pg[k] or {}
      table.insert(by_pg[k], op)
    end
    for k, ops in pairs(by_pg) do
      table.sort(ops, function(x, y)
        return x.ts < y.ts
      end)
      if not groups[k] then
        groups[k] = {}
        gorder[#gorder + 1] = k
      end
      groups[k][rk] = ops
    end
  end
  table.sort(gorder)
  local instances = {}
  for _, k in ipairs(gorder) do
    local per = groups[k]
    local with_seq, counts = true, {}
    for _, rk in ipairs(rank_ids) do
      local ops = per[rk]
      if ops then
        counts[#counts + 1] = #ops
        for _, op in ipairs(ops) do
          with_seq = with_seq and op.seq ~= nil
        end
      end
    end
    local lo, hi = math.huge, 0
    for _, c in ipairs(counts) do
      lo, hi = math.min(lo, c), math.max(hi, c)
    end
    if lo ~= hi and not with_seq then
      warnings[#warnings + 1] = string.format("process group %s: %d to %d collectives per rank: "
        .. 'matched by order, the instances past %d are left out', k, lo, hi, lo)
    end
    local keyed = {}
    local korder = {}
    for _, rk in ipairs(rank_ids) do
      for j, op in ipairs(per[rk] or {}) do
        local key = with_seq and op.seq or j
        if not keyed[key] then
          keyed[key] = {}
          korder[#korder + 1] = key
        end
        keyed[key][#keyed[key] + 1] = { rank = rk, op = op }
      end
    end
    table.sort(korder)
    for _, key in ipairs(korder) do
      local members = keyed[key]
      if #members >= 2 then
        local inst = { pg = k, key = key, kind = members[1].op.kind, bytes = members[1].op.bytes,
          ranks = {}, starts = {}, durs = {}, n = members[1].op.ranks }
        local first, last, latency, late = math.huge, -math.huge, math.huge, nil
        for _, m in ipairs(members) do
          inst.ranks[#inst.ranks + 1] = m.rank
          inst.starts[#inst.starts + 1] = m.op.ts
          inst.durs[#inst.durs + 1] = m.op.dur
          if m.op.kind ~= inst.kind or m.op.bytes ~= inst.bytes then
            inst.mismatch = true
          end
          first = math.min(first, m.op.ts)
          if m.op.ts > last then
            last, late = m.op.ts, m.rank
          end
          latency = math.min(latency, m.op.dur)
        end
        inst.latency, inst.skew, inst.late_rank = latency, last - first, late
        local wait = 0
        for _, d in ipairs(inst.durs) do
          wait = wait + (d - latency)
        end
        inst.wait = wait / #inst.durs
        instances[#instances + 1] = inst
      end
    end
  end
  local mismatched = 0
  for _, inst in ipairs(instances) do
    mismatched = mismatched + (inst.mismatch and 1 or 0)
  end
  if mismatched > 0 then
    warnings[#warnings + 1] = string.format('%d matched collectives differ across ranks in kind or '
      .. 'message size: the ranks may not be of one run', mismatched)
  end
  -- Per kind.
  local kinds, korder = {}, {}
  local late = {}
  for _, inst in ipairs(instances) do
    local k = kinds[inst.kind]
    if not k then
      k = { kind = inst.kind, instances = 0, data_time = 0, skew_time = 0, skew_sum = 0,
        max_skew = 0, late = {}, bytes = 0, bus_bytes = 0, bw_time = 0 }
      kinds[inst.kind] = k
      korder[#korder + 1] = inst.kind
    end
    k.instances = k.instances + 1
    k.data_time = k.data_time + inst.latency
    k.skew_time = k.skew_time + inst.wait
    k.skew_sum = k.skew_sum + inst.skew
    k.max_skew = math.max(k.max_skew, inst.skew)
    k.late[inst.late_rank] = (k.late[inst.late_rank] or 0) + 1
    late[inst.late_rank] = (late[inst.late_rank] or 0) + 1
    local f = inst.bytes and inst.n and parse.bus_factor(inst.kind, inst.n)
    if f and inst.latency > 0 then
      k.bytes = k.bytes + inst.bytes
      k.bus_bytes = k.bus_bytes + parse.algbw_bytes(inst.kind, inst.bytes, inst.n) * f
      k.bw_time = k.bw_time + inst.latency
    end
  end
  local function most(counts)
    local best, bc
    for rk, c in pairs(counts) do
      if not bc or c > bc or (c == bc and rk < best) then
        best, bc = rk, c
      end
    end
    return best, bc
  end
  local out = { instances = instances, kinds = {}, late = late, warnings = warnings,
    ranks = #rank_ids }
  table.sort(korder)
  for _, kname in ipairs(korder) do
    local k = kinds[kname]
    k.mean_skew = k.skew_sum / k.instances
    k.late_rank, k.late_count = most(k.late)
    k.latency_busbw = k.bw_time > 0 and k.bus_bytes / k.bw_time or nil
    k.skew_share = (k.data_time + k.skew_time) > 0
      and k.skew_time / (k.data_time + k.skew_time) or 0
    k.skew_sum, k.bus_bytes = nil, nil
    out.kinds[#out.kinds + 1] = k
  end
  out.late_rank, out.late_count = most(late)
  -- Counts per rank as lists (JSON has no sparse arrays).
  local function listed(counts)
    local l = {}
    for rk, c in pairs(counts) do
      l[#l + 1] = { rank = rk, count = c }
    end
    table.sort(l, function(a, b)
      return a.rank < b.rank
    end)
    return l
  end
  out.late = listed(late)
  for _, k in ipairs(out.kinds) do
    k.late = listed(k.late)
  end
  -- The bucket table over latencies: the bandwidth the collective reached once every rank was
  -- there.
  local as_ops = {}
  for i, inst in ipairs(instances) do
    as_ops[i] = { kind = inst.kind, bytes = inst.bytes, ranks = inst.n, dur = inst.latency }
  end
  out.table = M.table_of(as_ops)
  return out
end

return M
