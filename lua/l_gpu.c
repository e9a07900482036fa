// tp._gpu: GPU probe and telemetry sampler (engine/gpu) for Lua. Plain tables out; the sampler
// is the one resource (tp.GpuSampler: a child process and its pipe).
#include <lauxlib.h>
#include <lua.h>
#include <math.h>
#include <string.h>

#include "gpu.h"
#include "lutil.h"

#define SAMPLER_MT "tp.GpuSampler"

#define PROBE_BOX_MT "tp.GpuProbeBox"
#define LIST_BOX_MT  "tp.GpuListBox"

typedef struct SamplerBox {
  TpGpuSampler *s;  // NULL when closed
} SamplerBox;

// Holds an engine probe result while it is turned into tables, so a raise frees it (__gc).
typedef struct ProbeBox {
  TpGpuProbe p;
  bool live;
} ProbeBox;

static const char *const energy_methods[] = {"none", "counter", "trapezoid"};

// Sets t[key] = s unless s is empty. [t]
static void set_str(lua_State *L, const char *key, const char *s) {
  if (s && s[0]) {
    lua_pushstring(L, s);
    lua_setfield(L, -2, key);
  }
}

// Sets t[key] = v unless v is negative (unknown). [t]
static void set_int(lua_State *L, const char *key, long long v) {
  if (v >= 0) {
    lua_pushinteger(L, (lua_Integer)v);
    lua_setfield(L, -2, key);
  }
}

// Sets t[key] = v unless v is NaN. [t]
static void set_num(lua_State *L, const char *key, double v) {
  if (!isnan(v)) {
    lua_pushnumber(L, v);
    lua_setfield(L, -2, key);
  }
}

// Reads opts.apis (a list of api names) into a bit mask; 0 when absent. Raises on a bad name.
static unsigned check_apis(lua_State *L, int idx) {
  unsigned mask = 0;
  if (lua_isnoneornil(L, idx)) {
    return 0;
  }
  if (lua_getfield(L, idx, "apis") == LUA_TNIL) {
    lua_pop(L, 1);
    return 0;
  }
  luaL_argexpected(L, lua_istable(L, -1), idx, "apis: a list of names");
  lua_Integer n = luaL_len(L, -1);
  for (lua_Integer i = 1; i <= n; i++) {
    lua_rawgeti(L, -1, i);
    const char *name = lua_tostring(L, -1);
    int api = name ? tp_gpu_api_from_name(name) : -1;
    if (api < 0) {
      luaL_error(L, "apis[%d]: unknown api '%s'", (int)i, name ? name : luaL_typename(L, -1));
    }
    mask |= 1u << api;
    lua_pop(L, 1);
  }
  lua_pop(L, 1);
  return mask;
}

// Pushes the lines of `b` as a list. [..., list]
static void push_lines(lua_State *L, const TpBuf *b) {
  lua_newtable(L);
  lua_Integer n = 0;
  size_t pos = 0;
  while (pos < b->len) {
    const char *line = b->data + pos;
    const char *nl = memchr(line, '\n', b->len - pos);
    size_t len = nl ? (size_t)(nl - line) : b->len - pos;
    if (len > 0) {
      lua_pushlstring(L, line, len);
      lua_rawseti(L, -2, ++n);
    }
    pos += len + 1;
  }
}

static void push_backend(lua_State *L, const TpGpuBackend *b) {
  lua_createtable(L, 0, 20);
  lua_pushstring(L, tp_gpu_api_name(b->api));
  lua_setfield(L, -2, "api");
  lua_pushstring(L, tp_gpu_status_name(b->status));
  lua_setfield(L, -2, "status");
  set_str(L, "library", b->library);
  set_str(L, "soname", b->soname);
  set_str(L, "reason", b->reason);
  set_str(L, "call", b->call);
  if (b->code != 0) {
    lua_pushinteger(L, b->code);
    lua_setfield(L, -2, "code");
  }
  set_str(L, "code_name", b->code_name);
  set_str(L, "code_text", b->code_text);
  set_str(L, "driver_version", b->driver_version);
  set_str(L, "runtime_version", b->runtime_version);
  set_str(L, "version", b->version);
  set_str(L, "cuda_version", b->cuda_version);
  set_str(L, "phase", b->phase);
  set_int(L, "device_count", b->device_count);
  lua_pushinteger(L, b->device_errors);
  lua_setfield(L, -2, "device_errors");
  push_lines(L, &b->tried);
  lua_setfield(L, -2, "tried");
  lua_pushlstring(L, b->output.data ? b->output.data : "", b->output.len);
  lua_setfield(L, -2, "output");
  lua_pushnumber(L, b->elapsed_s);
  lua_setfield(L, -2, "elapsed_s");
}

static void push_device(lua_State *L, const TpGpuDevice *d) {
  lua_createtable(L, 0, 26);
  lua_pushstring(L, tp_gpu_api_name(d->api));
  lua_setfield(L, -2, "api");
  lua_pushinteger(L, d->index);
  lua_setfield(L, -2, "index");
  set_str(L, "vendor", d->vendor);
  set_str(L, "name", d->name);
  set_str(L, "arch", d->arch);
  set_str(L, "arch_full", d->arch_full);
  set_int(L, "cc_major", d->cc_major);
  set_int(L, "cc_minor", d->cc_minor);
  if (d->memory_total > 0) {
    lua_pushinteger(L, (lua_Integer)d->memory_total);
    lua_setfield(L, -2, "memory_total");
  }
  set_int(L, "sm_count", d->sm_count);
  set_int(L, "clock_khz", d->clock_khz);
  set_int(L, "memory_clock_khz", d->memory_clock_khz);
  set_int(L, "memory_bus_width", d->memory_bus_width);
  set_str(L, "pci_bus_id", d->pci_bus_id);
  set_str(L, "uuid", d->uuid);
  set_int(L, "power_limit_mw", d->power_limit_mw);
  if (d->memory_used >= 0) {
    lua_pushinteger(L, (lua_Integer)d->memory_used);
    lua_setfield(L, -2, "memory_used");
  }
  set_int(L, "clock_now_khz", d->clock_now_khz);
  set_int(L, "app_clock_khz", d->app_clock_khz);
  if (d->ecc >= 0) {
    lua_pushboolean(L, d->ecc);
    lua_setfield(L, -2, "ecc");
  }
  if (d->persistence >= 0) {
    lua_pushboolean(L, d->persistence);
    lua_setfield(L, -2, "persistence");
  }
  if (d->nprocesses >= 0) {
    // processes = {{pid =, memory =}, ...}: memory absent when the library cannot tell.
    lua_createtable(L, d->nprocesses, 0);
    int k = 0;
    const char *s = d->processes;
    long long pid = 0, bytes = 0;
    int used = 0;
    while (sscanf(s, "%lld:%lld%n", &pid, &bytes, &used) == 2) {
      lua_createtable(L, 0, 2);
      lua_pushinteger(L, (lua_Integer)pid);
      lua_setfield(L, -2, "pid");
      if (bytes >= 0) {
        lua_pushinteger(L, (lua_Integer)bytes);
        lua_setfield(L, -2, "memory");
      }
      lua_rawseti(L, -2, ++k);
      s += used;
    }
    lua_setfield(L, -2, "processes");
    lua_pushinteger(L, d->nprocesses);  // may exceed #processes (a list cut to fit)
    lua_setfield(L, -2, "process_count");
  }
  set_str(L, "error", d->error);
}

static int probebox_gc(lua_State *L) {
  ProbeBox *b = luaL_checkudata(L, 1, PROBE_BOX_MT);
  if (b->live) {
    b->live = false;
    tp_gpu_probe_free(&b->p);
  }
  return 0;
}

// gpu.probe(opts) -> {backends = {name = {...}}, devices = {...}, elapsed_s =} | nil, err, code
// opts: timeout (s, 0 = default), apis (list of names), libpath (':'-separated directories).
static int gpu_probe(lua_State *L) {
  lua_settop(L, 1);
  if (!lua_isnil(L, 1)) {
    luaL_checktype(L, 1, LUA_TTABLE);
  }
  TpGpuProbeOpts o = {0};
  o.timeout_s = tpl_optfield_number(L, 1, "timeout", 0);
  luaL_argcheck(L, o.timeout_s >= 0 && o.timeout_s <= 3600, 1, "timeout out of range");
  o.apis = check_apis(L, 1);
  o.libpath = tpl_optfield_string(L, 1, "libpath", NULL);
  ProbeBox *box = lua_newuserdatauv(L, sizeof *box, 0);  // [opts, box]
  memset(box, 0, sizeof *box);
  luaL_setmetatable(L, PROBE_BOX_MT);
  TpError err = {0};
  if (tp_gpu_probe(&o, &box->p, &err) != 0) {
    return tpl_pusherror(L, &err);
  }
  box->live = true;
  const TpGpuProbe *p = &box->p;
  lua_createtable(L, 0, 3);  // [opts, box, result]
  lua_createtable(L, 0, TP_GPU_API_COUNT);
  for (int i = 0; i < TP_GPU_API_COUNT; i++) {
    push_backend(L, &p->backends[i]);
    lua_setfield(L, -2, tp_gpu_api_name((TpGpuApi)i));
  }
  lua_setfield(L, -2, "backends");
  lua_createtable(L, (int)p->ndevices, 0);
  for (size_t i = 0; i < p->ndevices; i++) {
    push_device(L, &p->devices[i]);
    lua_rawseti(L, -2, (lua_Integer)i + 1);
  }
  lua_setfield(L, -2, "devices");
  lua_pushnumber(L, p->elapsed_s);
  lua_setfield(L, -2, "elapsed_s");
  box->live = false;
  tp_gpu_probe_free(&box->p);
  return 1;
}

static int listbox_gc(lua_State *L) {
  TpGpuList *l = luaL_checkudata(L, 1, LIST_BOX_MT);
  tp_gpu_list_free(l);
  return 0;
}

// gpu.candidates(api, libpath) -> {file, ...}: where the probe looks for `api`, in order.
static int gpu_candidates(lua_State *L) {
  const char *name = luaL_checkstring(L, 1);
  const char *libpath = luaL_optstring(L, 2, NULL);
  int api = tp_gpu_api_from_name(name);
  luaL_argcheck(L, api >= 0, 1, "unknown api");
  TpGpuList *l = lua_newuserdatauv(L, sizeof *l, 0);  // freed by __gc should a push raise
  memset(l, 0, sizeof *l);
  luaL_setmetatable(L, LIST_BOX_MT);
  TpError err = {0};
  if (tp_gpu_candidates((TpGpuApi)api, libpath, l, &err) != 0) {
    tp_gpu_list_free(l);
    return tpl_pusherror(L, &err);
  }
  lua_createtable(L, (int)l->n, 0);
  for (size_t i = 0; i < l->n; i++) {
    lua_pushstring(L, l->items[i]);
    lua_rawseti(L, -2, (lua_Integer)i + 1);
  }
  tp_gpu_list_free(l);
  return 1;
}

// gpu.monotonic() -> seconds on CLOCK_MONOTONIC, the clock of sample.t
static int gpu_monotonic(lua_State *L) {
  lua_pushnumber(L, tp_gpu_monotonic());
  return 1;
}

static SamplerBox *check_sampler(lua_State *L) {
  SamplerBox *b = luaL_checkudata(L, 1, SAMPLER_MT);
  if (!b->s) {
    luaL_error(L, "attempt to use a closed gpu sampler");
  }
  return b;
}

// gpu.sampler(opts) -> GpuSampler | nil, err, code
// opts: interval (s), start_timeout (s), apis ({'nvml', 'rsmi'}), libpath.
static int gpu_sampler(lua_State *L) {
  lua_settop(L, 1);
  if (!lua_isnil(L, 1)) {
    luaL_checktype(L, 1, LUA_TTABLE);
  }
  TpGpuSamplerOpts o = {0};
  o.interval_s = tpl_optfield_number(L, 1, "interval", 1.0);
  luaL_argcheck(L, o.interval_s >= 0.001 && o.interval_s <= 86400, 1, "interval out of range");
  o.start_timeout_s = tpl_optfield_number(L, 1, "start_timeout", 0);
  luaL_argcheck(L, o.start_timeout_s >= 0 && o.start_timeout_s <= 3600, 1,
                "start_timeout out of range");
  o.apis = check_apis(L, 1);
  luaL_argcheck(L, (o.apis & ~((1u << TP_GPU_NVML) | (1u << TP_GPU_RSMI))) == 0, 1,
                "apis: the sampler reads only 'nvml' and 'rsmi'");
  o.libpath = tpl_optfield_string(L, 1, "libpath", NULL);
  SamplerBox *b = lua_newuserdatauv(L, sizeof *b, 0);  // closed until started
  b->s = NULL;
  luaL_setmetatable(L, SAMPLER_MT);
  TpError err = {0};
  if (tp_gpu_sampler_start(&o, &b->s, &err) != 0) {
    b->s = NULL;
    return tpl_pusherror(L, &err);
  }
  return 1;
}

// sampler:poll() -> number of readings collected | nil, err, code
static int sampler_poll(lua_State *L) {
  SamplerBox *b = check_sampler(L);
  TpError err = {0};
  if (tp_gpu_sampler_poll(b->s, &err) != 0) {
    return tpl_pusherror(L, &err);
  }
  size_t n = 0;
  tp_gpu_sampler_samples(b->s, &n);
  lua_pushinteger(L, (lua_Integer)n);
  return 1;
}

// sampler:wait(count, timeout) -> true | nil, err, code: blocks until `count` readings in all
static int sampler_wait(lua_State *L) {
  SamplerBox *b = check_sampler(L);
  lua_Integer count = luaL_checkinteger(L, 2);
  double timeout = luaL_checknumber(L, 3);
  luaL_argcheck(L, count >= 0, 2, "count must not be negative");
  luaL_argcheck(L, timeout >= 0 && timeout <= 86400, 3, "timeout out of range");
  TpError err = {0};
  if (tp_gpu_sampler_wait(b->s, (size_t)count, timeout, &err) != 0) {
    return tpl_pusherror(L, &err);
  }
  lua_pushboolean(L, 1);
  return 1;
}

// sampler:stop() -> true | nil, err, code (idempotent; readings stay available)
static int sampler_stop(lua_State *L) {
  SamplerBox *b = check_sampler(L);
  TpError err = {0};
  if (tp_gpu_sampler_stop(b->s, &err) != 0) {
    return tpl_pusherror(L, &err);
  }
  lua_pushboolean(L, 1);
  return 1;
}

// sampler:running() -> boolean
static int sampler_running(lua_State *L) {
  SamplerBox *b = check_sampler(L);
  lua_pushboolean(L, tp_gpu_sampler_running(b->s));
  return 1;
}

// sampler:devices() -> {{api=, index=, name=, pci_bus_id=, uuid=, memory_total=}, ...}
static int sampler_devices(lua_State *L) {
  SamplerBox *b = check_sampler(L);
  size_t n = 0;
  const TpGpuSamplerDevice *d = tp_gpu_sampler_devices(b->s, &n);
  lua_createtable(L, (int)n, 0);
  for (size_t i = 0; i < n; i++) {
    lua_createtable(L, 0, 6);
    lua_pushstring(L, tp_gpu_api_name(d[i].api));
    lua_setfield(L, -2, "api");
    lua_pushinteger(L, d[i].index);
    lua_setfield(L, -2, "index");
    set_str(L, "name", d[i].name);
    set_str(L, "pci_bus_id", d[i].pci_bus_id);
    set_str(L, "uuid", d[i].uuid);
    if (d[i].memory_total > 0) {
      lua_pushinteger(L, (lua_Integer)d[i].memory_total);
      lua_setfield(L, -2, "memory_total");
    }
    lua_rawseti(L, -2, (lua_Integer)i + 1);
  }
  return 1;
}

// sampler:samples([first]) -> {{t=, wall=, device=, power_w=, ...}, ...} from reading `first`
// (1-based, default 1). Device numbers index sampler:devices(); absent quantities are nil.
static int sampler_samples(lua_State *L) {
  SamplerBox *b = check_sampler(L);
  lua_Integer first = luaL_optinteger(L, 2, 1);
  luaL_argcheck(L, first >= 1, 2, "first reading is 1");
  size_t n = 0;
  const TpGpuSample *x = tp_gpu_sampler_samples(b->s, &n);
  size_t from = (size_t)first - 1;
  lua_createtable(L, from < n ? (int)(n - from) : 0, 0);
  for (size_t i = from; i < n; i++) {
    lua_createtable(L, 0, 9);
    lua_pushnumber(L, x[i].t);
    lua_setfield(L, -2, "t");
    lua_pushnumber(L, x[i].wall);
    lua_setfield(L, -2, "wall");
    lua_pushinteger(L, x[i].device + 1);
    lua_setfield(L, -2, "device");
    set_num(L, "power_w", x[i].power_w);
    set_num(L, "energy_j", x[i].energy_j);
    set_num(L, "memory_used", x[i].memory_used);
    set_num(L, "utilization", x[i].utilization);
    set_num(L, "sm_clock_mhz", x[i].sm_clock_mhz);
    set_num(L, "temperature_c", x[i].temperature_c);
    lua_rawseti(L, -2, (lua_Integer)(i - from) + 1);
  }
  return 1;
}

// sampler:energy(device, t0, t1) -> {joules=, method=, t_first=, t_last=, samples=}
static int sampler_energy(lua_State *L) {
  SamplerBox *b = check_sampler(L);
  size_t nd = 0;
  tp_gpu_sampler_devices(b->s, &nd);
  lua_Integer dev = luaL_checkinteger(L, 2);
  luaL_argcheck(L, dev >= 1 && (size_t)dev <= nd, 2, "no such device");
  double t0 = luaL_optnumber(L, 3, -HUGE_VAL), t1 = luaL_optnumber(L, 4, HUGE_VAL);
  luaL_argcheck(L, t1 >= t0, 4, "window ends before it starts");
  size_t n = 0;
  const TpGpuSample *x = tp_gpu_sampler_samples(b->s, &n);
  TpGpuEnergy e;
  TpError err = {0};
  if (tp_gpu_energy(x, n, (int)dev - 1, t0, t1, &e, &err) != 0) {
    return tpl_pusherror(L, &err);
  }
  lua_createtable(L, 0, 5);
  lua_pushstring(L, energy_methods[e.method]);
  lua_setfield(L, -2, "method");
  lua_pushinteger(L, (lua_Integer)e.nsamples);
  lua_setfield(L, -2, "samples");
  if (e.method != TP_GPU_ENERGY_NONE) {
    lua_pushnumber(L, e.joules);
    lua_setfield(L, -2, "joules");
    lua_pushnumber(L, e.t_first);
    lua_setfield(L, -2, "t_first");
    lua_pushnumber(L, e.t_last);
    lua_setfield(L, -2, "t_last");
  }
  return 1;
}

// sampler:notes() -> string ("" when the child had nothing to say)
static int sampler_notes(lua_State *L) {
  SamplerBox *b = check_sampler(L);
  lua_pushstring(L, tp_gpu_sampler_notes(b->s));
  return 1;
}

// sampler:close() / __gc / __close: stops the child (SIGKILL if it still runs) and frees all.
static int sampler_close(lua_State *L) {
  SamplerBox *b = luaL_checkudata(L, 1, SAMPLER_MT);
  TpGpuSampler *s = b->s;
  b->s = NULL;  // closed before released: a second close does nothing
  tp_gpu_sampler_free(s);
  return 0;
}

static int sampler_tostring(lua_State *L) {
  SamplerBox *b = luaL_checkudata(L, 1, SAMPLER_MT);
  if (!b->s) {
    lua_pushliteral(L, "tp.GpuSampler (closed)");
    return 1;
  }
  size_t nd = 0, ns = 0;
  tp_gpu_sampler_devices(b->s, &nd);
  tp_gpu_sampler_samples(b->s, &ns);
  lua_pushfstring(L, "tp.GpuSampler (%s, %d devices, %d readings)",
                  tp_gpu_sampler_running(b->s) ? "running" : "stopped", (int)nd, (int)ns);
  return 1;
}

static const luaL_Reg sampler_methods[] = {
    {"close", sampler_close},     {"devices", sampler_devices},
    {"energy", sampler_energy},   {"notes", sampler_notes},
    {"poll", sampler_poll},       {"running", sampler_running},
    {"samples", sampler_samples}, {"stop", sampler_stop},
    {"wait", sampler_wait},       {NULL, NULL}};

static const luaL_Reg sampler_meta[] = {{"__close", sampler_close},
                                        {"__gc", sampler_close},
                                        {"__tostring", sampler_tostring},
                                        {NULL, NULL}};

static const luaL_Reg probebox_meta[] = {{"__gc", probebox_gc}, {NULL, NULL}};
static const luaL_Reg listbox_meta[] = {{"__gc", listbox_gc}, {NULL, NULL}};

static const luaL_Reg gpu_funcs[] = {{"candidates", gpu_candidates},
                                     {"monotonic", gpu_monotonic},
                                     {"probe", gpu_probe},
                                     {"sampler", gpu_sampler},
                                     {NULL, NULL}};

int luaopen_tp__gpu(lua_State *L);

int luaopen_tp__gpu(lua_State *L) {
  tpl_newclass(L, SAMPLER_MT, sampler_methods, sampler_meta);
  tpl_newclass(L, PROBE_BOX_MT, NULL, probebox_meta);
  tpl_newclass(L, LIST_BOX_MT, NULL, listbox_meta);
  luaL_newlib(L, gpu_funcs);
  return 1;
}
