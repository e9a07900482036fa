-- tp.launch.container: runs a command inside a container image with docker, podman or
-- apptainer, with the GPUs of one vendor, host IPC and network, mounts and environment.
--
-- GPU access:
--  * NVIDIA with docker: `--gpus all` (docker run reference, NVIDIA Container Toolkit);
--    with podman: `--device nvidia.com/gpu=all` (a CDI device name, NVIDIA Container Toolkit
--    "Support for Container Device Interface"); with apptainer: `--nv`.
--  * AMD with docker/podman: `--device=/dev/kfd --device=/dev/dri --group-add video
--    --security-opt seccomp=unconfined` (ROCm documentation, "Running ROCm Docker
--    containers"); with apptainer: `--rocm`.
-- Environment: a variable whose name holds TOKEN, KEY, SECRET or PASSWORD never appears with
-- its value on the command line. docker/podman get `-e NAME` (the value is read from the
-- launching process's environment, which keeps it); apptainer gets it as APPTAINERENV_NAME in
-- the launching environment (Apptainer docs, "Environment and Metadata"), and runs with
-- --cleanenv so nothing else leaks in. Other variables are passed inline (-e NAME=value,
-- --env NAME=value) so the printed command is complete.

local launch = require('tp.launch')

local M = {}

local OPTS = {
  runtime = 'string', image = 'string', vendor = 'string', mounts = 'table',
  shm_size = 'string', ipc_host = 'boolean', network_host = 'boolean', workdir = 'string',
  name = 'string', extra_args = 'table', executable = 'string',
}

local function mounts_of(list)
  local out = {}
  for i, m in ipairs(list or {}) do
    local src, dst, ro
    if type(m) == 'string' then
      src, dst, ro = m:match('^([^:]+):([^:]+):?(r?o?)$')
      if not src or (ro ~= '' and ro ~= 'ro') then
        error(string.format("launch.container: mounts[%d] '%s' must be 'src:dst' or "
          .. "'src:dst:ro'", i, m), 3)
      end
      ro = ro == 'ro'
    elseif type(m) == 'table' then
      src, dst, ro = m[1] or m.src, m[2] or m.dst, m.ro or m[3] == 'ro'
      if type(src) ~= 'string' or type(dst) ~= 'string' then
        error(string.format('launch.container: mounts[%d] must be { src, dst, ro = bool }', i),
          3)
      end
      if src:find(':') or dst:find(':') then
        error(string.format("launch.container: mounts[%d]: paths must not contain ':'", i), 3)
      end
    else
      error(string.format('launch.container: mounts[%d] must be a string or table', i), 3)
    end
    out[#out + 1] = src .. ':' .. dst .. (ro and ':ro' or '')
  end
  return out
end

local function oci(out, opts, runtime, mounts)
  local argv = { opts.executable or runtime, 'run', '--rm' }
  local function add(...)
    for _, a in ipairs({ ... }) do
      argv[#argv + 1] = a
    end
  end
  if opts.name then
    add('--name', opts.name)
  end
  if opts.ipc_host ~= false then
    add('--ipc=host')
  end
  if opts.network_host ~= false then
    add('--network=host')
  end
  add('--shm-size=' .. (opts.shm_size or '64g'))
  if opts.vendor == 'nvidia' then
    if runtime == 'docker' then
      add('--gpus', 'all')
    else
      add('--device', 'nvidia.com/gpu=all')
    end
  else
    add('--device=/dev/kfd', '--device=/dev/dri', '--group-add', 'video', '--security-opt',
      'seccomp=unconfined')
  end
  for _, m in ipairs(mounts) do
    add('-v', m)
  end
  if opts.workdir then
    add('-w', opts.workdir)
  end
  local outer_env = {}
  for _, k in ipairs(launch._sorted(out.env)) do
    if launch.is_secret(k) then
      add('-e', k)
      outer_env[k] = out.env[k]
    else
      add('-e', k .. '=' .. out.env[k])
    end
  end
  return argv, outer_env
end

local function apptainer(out, opts, mounts)
  for _, k in ipairs({ 'shm_size', 'ipc_host', 'network_host', 'name' }) do
    if opts[k] ~= nil then
      error(string.format('launch.container: option %s cannot be expressed with apptainer '
        .. '(it shares the host IPC namespace, /dev/shm and network)', k), 3)
    end
  end
  local argv = { opts.executable or 'apptainer', 'exec', '--cleanenv',
                 opts.vendor == 'nvidia' and '--nv' or '--rocm' }
  for _, m in ipairs(mounts) do
    argv[#argv + 1] = '--bind'
    argv[#argv + 1] = m
  end
  if opts.workdir then
    argv[#argv + 1] = '--pwd'
    argv[#argv + 1] = opts.workdir
  end
  local outer_env = {}
  for _, k in ipairs(launch._sorted(out.env)) do
    if launch.is_secret(k) then
      outer_env['APPTAINERENV_' .. k] = out.env[k]
    else
      argv[#argv + 1] = '--env'
      argv[#argv + 1] = k .. '=' .. out.env[k]
    end
  end
  return argv, outer_env
end

--- Wraps a command to run inside a container. Composes with torchrun: wrap the torchrun
--- command to run torchrun inside the container.
---```lua
---local cmd = tp.launch.compose(megatron.build(config), {
---  { 'torchrun', { nproc_per_node = 8 } },
---  { 'container', { runtime = 'docker', image = 'nvcr.io/nvidia/pytorch:25.01-py3',
---                   vendor = 'nvidia', mounts = { '/data:/data:ro' } } },
---})
---```
---@param cmd table  { argv, env, cwd?, ... }
---@param opts table  { runtime = 'docker'|'podman'|'apptainer', image, vendor = 'nvidia'|'amd',
---  mounts? = { 'src:dst[:ro]' | { src, dst, ro = bool } }, shm_size = '64g', ipc_host = true,
---  network_host = true, workdir? (default: cmd.cwd), name?, extra_args? = { ... } (placed
---  before the image), executable? (path of the runtime binary) }
---@return table cmd
function M.wrap(cmd, opts)
  local out = launch._copy(cmd, 'launch.container')
  opts = launch._check_opts(opts, OPTS, 'launch.container')
  local runtime = opts.runtime or 'docker'
  if runtime ~= 'docker' and runtime ~= 'podman' and runtime ~= 'apptainer' then
    error("launch.container: option runtime must be docker, podman or apptainer, got '"
      .. runtime .. "'", 2)
  end
  if type(opts.image) ~= 'string' or opts.image == '' then
    error('launch.container: option image is required', 2)
  end
  if opts.vendor ~= 'nvidia' and opts.vendor ~= 'amd' then
    error("launch.container: option vendor must be 'nvidia' or 'amd', got "
      .. tostring(opts.vendor), 2)
  end
  local o = {}
  for k, v in pairs(opts) do
    o[k] = v
  end
  o.workdir = opts.workdir or out.cwd
  local mounts = mounts_of(opts.mounts)
  local argv, outer_env
  if runtime == 'apptainer' then
    argv, outer_env = apptainer(out, o, mounts)
  else
    argv, outer_env = oci(out, o, runtime, mounts)
  end
  for i, a in ipairs(opts.extra_args or {}) do
    if type(a) ~= 'string' then
      error(string.format('launch.container: extra_args[%d] must be a string', i), 2)
    end
    argv[#argv + 1] = a
  end
  argv[#argv + 1] = opts.image
  for _, a in ipairs(out.argv) do
    argv[#argv + 1] = a
  end
  out.argv = argv
  out.env = outer_env
  -- The working directory now applies inside the container.
  out.cwd = nil
  out.container = runtime
  return out
end

return M
