-- tp.stack: the software stack of each group side by side from the records' environment, with
-- '-' for records that carry none.
local h = require('helper')
local json = require('tp.json')
local results = require('tp.results')
local stack = require('tp.stack')

local function load(envs)
  local dir = h.tmpdir()
  for i, e in ipairs(envs) do
    h.write(string.format('%s/r%d.json', dir, i), assert(json.encode({ schema = 'tplua.run/1',
      run_id = 'r' .. i, platform = e[1], environment = e[2] })))
  end
  return assert(results.load(dir))
end

describe('tp.stack.table', function()
  it('lists each row per group, the distinct values joined, - for runs that do not say',
    function()
      local set = load({
        { 'nvd', { gpu_stack = { nvidia_driver = '550.54', cuda_runtime = '12.4' },
          python = { python = '3.10.12', torch = '2.5.1', torch_cuda = '12.4',
            torch_nccl = '2.21.5' } } },
        { 'nvd', { gpu_stack = { nvidia_driver = '560.10' }, container = { runtime = 'docker',
          nvidia_pytorch_version = '24.10' } } },
        { 'amd', nil },
      })
      local t = stack.table(set, { order = { 'nvd', 'amd' } })
      assert.are.same({ 'nvd', 'amd' }, t.groups)
      assert.is_true(t.any)
      assert.are.equal(1, t.missing)
      local by = {}
      for _, row in ipairs(t.rows) do
        by[row.label] = row.values
      end
      assert.are.same({ 'NVIDIA 550.54 | NVIDIA 560.10', '-' }, by['GPU driver'])
      assert.are.same({ 'CUDA 12.4 | -', '-' }, by['CUDA / ROCm runtime'])
      assert.are.same({ 'NCCL 2.21.5 (torch) | -', '-' }, by['NCCL / RCCL'])
      assert.are.same({ '2.5.1 (CUDA 12.4) | -', '-' }, by.torch)
      assert.are.same({ 'NGC PyTorch 24.10 | -', '-' }, by['container image'])
      local text = stack.format(t)
      assert.is_truthy(text:find("^software stack by platform %(the records' environment%)\n"))
      assert.is_truthy(text:find('\n  GPU driver           NVIDIA 550.54 | NVIDIA 560.10  -\n', 1,
        true), text)
    end)

  it('says when no record carries an environment', function()
    local t = stack.table(load({ { 'amd', nil }, { 'nvd', nil } }))
    assert.is_false(t.any)
    assert.are.same({ 'amd', 'nvd' }, t.groups)
    assert.is_truthy(stack.format(t):find('the records carry none', 1, true))
    assert.has_error(function()
      stack.table(42)
    end, 'tp.stack.table: result set expected, got number')
  end)
end)
