// GPU probe orchestration: where each library is looked for, one child process per library,
// the line-based report a child writes back, and helpers shared with the sampler.
//
// Report format (one line per fact, written by engine/gpu_probe.c, parsed here):
//   b<TAB>key<TAB>value     a fact about the library (status, library, reason, ...)
//   <n><TAB>key<TAB>value   a fact about its device n (0 <= n < TP_GPU_DEVICES_MAX)
//   end                     the child finished; a report without it was cut short
// Values escape '\\' '\n' '\t' '\r' as \\ \n \t \r and other control bytes as \xHH.
#include "gpu_internal.h"

#include <dirent.h>
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <link.h>
#include <limits.h>
#include <math.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/pidfd.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define DEFAULT_TIMEOUT_S 20.0

static const char *const api_names[TP_GPU_API_COUNT] = {"nvml", "cuda", "cudart", "hip",
                                                        "rsmi", "nccl", "rccl"};

const char *tp_gpu_api_name(TpGpuApi api) {
  return (unsigned)api < TP_GPU_API_COUNT ? api_names[api] : "?";
}

int tp_gpu_api_from_name(const char *name) {
  for (int i = 0; i < TP_GPU_API_COUNT; i++) {
    if (strcmp(name, api_names[i]) == 0) {
      return i;
    }
  }
  return -1;
}

const char *tp_gpu_status_name(TpGpuStatus status) {
  switch (status) {
    case TP_GPU_OK:
      return "ok";
    case TP_GPU_ABSENT:
      return "absent";
    case TP_GPU_NODEVICE:
      return "no_device";
    case TP_GPU_FAILED:
      return "error";
    case TP_GPU_TIMEOUT:
      return "timeout";
    case TP_GPU_CRASHED:
      return "crashed";
  }
  return "?";
}

static int status_from_name(const char *s) {
  for (int st = TP_GPU_OK; st <= TP_GPU_CRASHED; st++) {
    if (strcmp(s, tp_gpu_status_name((TpGpuStatus)st)) == 0) {
      return st;
    }
  }
  return -1;
}

double tp_gpu_monotonic(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

// ---------------------------------------------------------------------------------------------
// Version formats

void tp_gpu_format_cuda_version(int v, char *out, size_t outsz) {
  // 1000 * major + 10 * minor [CUDA 13.0 cuda_runtime_api.h, doc of cudaRuntimeGetVersion].
  if (v <= 0) {
    snprintf(out, outsz, "%s", "");
    return;
  }
  snprintf(out, outsz, "%d.%d", v / 1000, (v % 1000) / 10);
}

void tp_gpu_format_hip_version(int v, char *out, size_t outsz) {
  // HIP_VERSION = major * 10000000 + minor * 100000 + patch [Debian 12 hip/hip_version.h].
  if (v <= 0) {
    snprintf(out, outsz, "%s", "");
    return;
  }
  snprintf(out, outsz, "%d.%d.%d", v / 10000000, (v / 100000) % 100, v % 100000);
}

void tp_gpu_format_nccl_version(int v, char *out, size_t outsz) {
  // NVIDIA/nccl src/nccl.h.in, NCCL_VERSION(X,Y,Z): X*1000 + Y*100 + Z up to 2.8, then
  // X*10000 + Y*100 + Z; pytorch torch/csrc/distributed/c10d/NCCLUtils.cpp getNcclVersion
  // decodes it by the same split at 10000. RCCL keeps NCCL's encoding.
  if (v <= 0) {
    snprintf(out, outsz, "%s", "");
    return;
  }
  int div = v >= 10000 ? 10000 : 1000;
  snprintf(out, outsz, "%d.%d.%d", v / div, (v % div) / 100, v % 100);
}

int tp_gpu_pci_normalize(const char *in, char *out, size_t outsz) {
  // "domain:bus:device.function" in hex; NVML pads the domain to 8 digits, CUDA and HIP to 4
  // [nvml.h nvmlPciInfo_t.busId; CUDA cudaDeviceGetPCIBusId doc
  // "[domain]:[bus]:[device].[function]"].
  unsigned long dom = 0, bus = 0, dev = 0, fn = 0;
  int used = 0;
  if (outsz > 0) {
    out[0] = '\0';
  }
  if (!in || sscanf(in, "%lx:%lx:%lx.%lx%n", &dom, &bus, &dev, &fn, &used) != 4 ||
      in[used] != '\0' || dom > 0xffffffffUL || bus > 0xff || dev > 0x1f || fn > 7) {
    return TP_EINVAL;
  }
  snprintf(out, outsz, "%04lx:%02lx:%02lx.%lx", dom, bus, dev, fn);
  return 0;
}

// ---------------------------------------------------------------------------------------------
// Escaping and report lines

int tp_gpu_escape(TpBuf *b, const char *s, size_t len) {
  for (size_t i = 0; i < len; i++) {
    unsigned char c = (unsigned char)s[i];
    int rc;
    if (c == '\\') {
      rc = tp_buf_append(b, "\\\\", 2);
    } else if (c == '\n') {
      rc = tp_buf_append(b, "\\n", 2);
    } else if (c == '\t') {
      rc = tp_buf_append(b, "\\t", 2);
    } else if (c == '\r') {
      rc = tp_buf_append(b, "\\r", 2);
    } else if (c < 0x20 || c == 0x7f) {
      rc = tp_buf_printf(b, "\\x%02x", c);
    } else {
      rc = tp_buf_append(b, &s[i], 1);
    }
    if (rc != 0) {
      return rc;
    }
  }
  return 0;
}

static int hexval(char c) {
  if (c >= '0' && c <= '9') {
    return c - '0';
  }
  if (c >= 'a' && c <= 'f') {
    return c - 'a' + 10;
  }
  if (c >= 'A' && c <= 'F') {
    return c - 'A' + 10;
  }
  return -1;
}

int tp_gpu_unescape(const char *s, size_t len, char *out, size_t outsz) {
  size_t o = 0;
  for (size_t i = 0; i < len; i++) {
    char c = s[i];
    if (c == '\\') {
      if (i + 1 >= len) {
        return -1;
      }
      char e = s[++i];
      if (e == '\\') {
        c = '\\';
      } else if (e == 'n') {
        c = '\n';
      } else if (e == 't') {
        c = '\t';
      } else if (e == 'r') {
        c = '\r';
      } else if (e == 'x' && i + 2 < len && hexval(s[i + 1]) >= 0 && hexval(s[i + 2]) >= 0) {
        c = (char)(hexval(s[i + 1]) * 16 + hexval(s[i + 2]));
        i += 2;
      } else {
        return -1;
      }
    }
    if (c == '\0') {
      return -1;  // a value never carries NUL: the fields are C strings
    }
    if (o + 1 < outsz) {
      out[o++] = c;
    }
  }
  if (outsz > 0) {
    out[o] = '\0';
  }
  return 0;
}

void tp_gpu_emit(int fd, int device, const char *key, const char *fmt, ...) {
  char value[1024];
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(value, sizeof value, fmt, ap);
  va_end(ap);
  if (n < 0) {
    return;
  }
  size_t vlen = (size_t)n < sizeof value ? (size_t)n : sizeof value - 1;
  TpBuf line = {0};
  int rc = device < 0 ? tp_buf_printf(&line, "b\t%s\t", key)
                      : tp_buf_printf(&line, "%d\t%s\t", device, key);
  if (rc == 0) {
    rc = tp_gpu_escape(&line, value, vlen);
  }
  if (rc == 0) {
    rc = tp_buf_append(&line, "\n", 1);
  }
  if (rc == 0) {
    size_t off = 0;
    while (off < line.len) {
      ssize_t w = write(fd, line.data + off, line.len - off);
      if (w < 0 && errno == EINTR) {
        continue;
      }
      if (w <= 0) {
        break;
      }
      off += (size_t)w;
    }
  }
  tp_buf_free(&line);
}

// ---------------------------------------------------------------------------------------------
// Lists and library search

void tp_gpu_list_free(TpGpuList *l) {
  for (size_t i = 0; i < l->n; i++) {
    free(l->items[i]);
  }
  free(l->items);
  l->items = NULL;
  l->n = 0;
  l->cap = 0;
}

static bool list_has(const TpGpuList *l, const char *s) {
  for (size_t i = 0; i < l->n; i++) {
    if (strcmp(l->items[i], s) == 0) {
      return true;
    }
  }
  return false;
}

// Appends a copy of `s` unless it is already there. Returns 0 or TP_ENOMEM.
static int list_add(TpGpuList *l, const char *s) {
  if (list_has(l, s)) {
    return 0;
  }
  if (l->n == l->cap) {
    size_t cap = l->cap ? l->cap * 2 : 16;
    char **items = realloc(l->items, cap * sizeof *items);
    if (!items) {
      return TP_ENOMEM;
    }
    l->items = items;
    l->cap = cap;
  }
  char *copy = strdup(s);
  if (!copy) {
    return TP_ENOMEM;
  }
  l->items[l->n++] = copy;
  return 0;
}

// Parses "12.4.1" into up to 4 numbers; returns the count, or 0 when `s` is not such a version.
static int parse_version(const char *s, long v[4]) {
  int n = 0;
  while (*s) {
    if (n == 4 || *s < '0' || *s > '9') {
      return 0;
    }
    char *end = NULL;
    v[n++] = strtol(s, &end, 10);
    s = end;
    if (*s == '.') {
      s++;
      if (*s == '\0') {
        return 0;
      }
    } else if (*s != '\0') {
      return 0;
    }
  }
  return n;
}

typedef struct VersionedDir {
  long v[4];
  int nv;
  char *path;
} VersionedDir;

static int versioned_cmp_desc(const void *a, const void *b) {
  const VersionedDir *x = a, *y = b;
  for (int i = 0; i < 4; i++) {
    long xi = i < x->nv ? x->v[i] : -1, yi = i < y->nv ? y->v[i] : -1;
    if (xi != yi) {
      return xi > yi ? -1 : 1;
    }
  }
  return strcmp(x->path, y->path);
}

int tp_gpu_versioned_dirs(const char *parent, const char *prefix, const char *suffix,
                          TpGpuList *out, TpError *err) {
  DIR *d = opendir(parent);
  if (!d) {
    return 0;
  }
  size_t plen = strlen(prefix);
  VersionedDir *found = NULL;
  size_t n = 0, cap = 0;
  int rc = 0;
  struct dirent *e;
  while ((e = readdir(d)) != NULL) {
    VersionedDir vd = {0};
    if (strncmp(e->d_name, prefix, plen) != 0 || e->d_name[plen] != '-') {
      continue;
    }
    vd.nv = parse_version(e->d_name + plen + 1, vd.v);
    if (vd.nv == 0) {
      continue;
    }
    char path[PATH_MAX];
    int len = snprintf(path, sizeof path, "%s/%s%s", parent, e->d_name, suffix);
    struct stat st;
    if (len < 0 || (size_t)len >= sizeof path || stat(path, &st) != 0 || !S_ISDIR(st.st_mode)) {
      continue;
    }
    if (n == cap) {
      size_t ncap = cap ? cap * 2 : 8;
      VersionedDir *nf = realloc(found, ncap * sizeof *nf);
      if (!nf) {
        rc = TP_ENOMEM;
        break;
      }
      found = nf;
      cap = ncap;
    }
    vd.path = strdup(path);
    if (!vd.path) {
      rc = TP_ENOMEM;
      break;
    }
    found[n++] = vd;
  }
  closedir(d);
  if (rc == 0 && n > 1) {
    qsort(found, n, sizeof *found, versioned_cmp_desc);
  }
  for (size_t i = 0; i < n; i++) {
    if (rc == 0) {
      rc = list_add(out, found[i].path);
    }
    free(found[i].path);
  }
  free(found);
  if (rc != 0) {
    return tp_error_set(err, rc, "gpu library search: out of memory");
  }
  return 0;
}

// Sonames, newest first [GPU_PROBING.md §2: CUDA 13 header soname libcudart.so.13; Debian
// libcudart11.0 ships libcudart.so.11.0; ROCm sonames follow the ROCm / rocm_smi package major;
// nvml.h: libnvidia-ml.so.1; NCCL's libnccl.so.2; RCCL's CMake gives SOVERSION 1].
static const char *const sonames_nvml[] = {"libnvidia-ml.so.1", NULL};
static const char *const sonames_cuda[] = {"libcuda.so.1", NULL};
static const char *const sonames_cudart[] = {"libcudart.so.13", "libcudart.so.12",
                                             "libcudart.so.11.0", "libcudart.so", NULL};
static const char *const sonames_hip[] = {"libamdhip64.so.7", "libamdhip64.so.6",
                                          "libamdhip64.so.5", "libamdhip64.so", NULL};
static const char *const sonames_rsmi[] = {"librocm_smi64.so.7", "librocm_smi64.so.6",
                                           "librocm_smi64.so.5", "librocm_smi64.so.1",
                                           "librocm_smi64.so",   NULL};
static const char *const sonames_nccl[] = {"libnccl.so.2", "libnccl.so", NULL};
static const char *const sonames_rccl[] = {"librccl.so.1", "librccl.so", NULL};

const char *const *tp_gpu_sonames(TpGpuApi api) {
  switch (api) {
    case TP_GPU_NVML:
      return sonames_nvml;
    case TP_GPU_CUDA:
      return sonames_cuda;
    case TP_GPU_CUDART:
      return sonames_cudart;
    case TP_GPU_HIP:
      return sonames_hip;
    case TP_GPU_RSMI:
      return sonames_rsmi;
    case TP_GPU_NCCL:
      return sonames_nccl;
    case TP_GPU_RCCL:
      return sonames_rccl;
    case TP_GPU_API_COUNT:
      break;
  }
  return sonames_nvml;
}

static const char *api_override_env(TpGpuApi api) {
  static const char *const names[TP_GPU_API_COUNT] = {"TPLUA_NVML", "TPLUA_CUDA", "TPLUA_CUDART",
                                                      "TPLUA_HIP",  "TPLUA_RSMI", "TPLUA_NCCL",
                                                      "TPLUA_RCCL"};
  return (unsigned)api < TP_GPU_API_COUNT ? names[api] : "TPLUA_NVML";
}

// Which toolkit tree holds the library: 'c' CUDA, 'r' ROCm, 0 none. The driver's own libraries
// (libcuda, NVML) are never taken from a toolkit: the toolkit ships only stubs of them
// [GPU_PROBING.md §2, §8: the stub libcuda returns error 34].
static char api_tree(TpGpuApi api) {
  switch (api) {
    case TP_GPU_CUDART:
    case TP_GPU_NCCL:
      return 'c';
    case TP_GPU_HIP:
    case TP_GPU_RSMI:
    case TP_GPU_RCCL:
      return 'r';
    case TP_GPU_NVML:
    case TP_GPU_CUDA:
    case TP_GPU_API_COUNT:
      break;
  }
  return 0;
}

// Adds "<root>/<sub>" for each sub-directory name that exists.
static int add_tree_dirs(TpGpuList *dirs, const char *root, char tree) {
  static const char *const cuda_subs[] = {"lib64", "lib", "targets/x86_64-linux/lib", NULL};
  static const char *const rocm_subs[] = {"lib", "lib64", NULL};
  const char *const *subs = tree == 'c' ? cuda_subs : rocm_subs;
  for (size_t i = 0; subs[i]; i++) {
    char path[PATH_MAX];
    int len = snprintf(path, sizeof path, "%s/%s", root, subs[i]);
    struct stat st;
    if (len > 0 && (size_t)len < sizeof path && stat(path, &st) == 0 && S_ISDIR(st.st_mode)) {
      if (list_add(dirs, path) != 0) {
        return TP_ENOMEM;
      }
    }
  }
  return 0;
}

// Splits a ':'-separated list of directories into `dirs` (empty entries skipped).
static int add_path_list(TpGpuList *dirs, const char *list) {
  const char *p = list;
  while (*p) {
    const char *colon = strchr(p, ':');
    size_t len = colon ? (size_t)(colon - p) : strlen(p);
    if (len > 0 && len < PATH_MAX) {
      char dir[PATH_MAX];
      memcpy(dir, p, len);
      dir[len] = '\0';
      if (list_add(dirs, dir) != 0) {
        return TP_ENOMEM;
      }
    }
    p += len;
    if (*p == ':') {
      p++;
    }
  }
  return 0;
}

int tp_gpu_candidates(TpGpuApi api, const char *libpath, TpGpuList *out, TpError *err) {
  const char *const *sonames = tp_gpu_sonames(api);
  bool restricted = libpath && libpath[0];
  TpGpuList dirs = {0};
  int rc = 0;
  const char *override = getenv(api_override_env(api));
  if (override && override[0]) {
    rc = list_add(out, override);
  }
  char tree = api_tree(api);
  if (rc == 0 && restricted) {
    rc = add_path_list(&dirs, libpath);
  }
  // Toolkit trees: the ones the environment names, then the default install locations. A
  // restricted search (libpath) looks nowhere else, so tests and users get exactly what they ask.
  static const char *const cuda_envs[] = {"CUDA_HOME", "CUDA_PATH", NULL};
  static const char *const rocm_envs[] = {"ROCM_PATH", "HIP_PATH", NULL};
  const char *const *envs = tree == 'c' ? cuda_envs : tree == 'r' ? rocm_envs : NULL;
  TpGpuList tree_dirs = {0};
  for (size_t i = 0; rc == 0 && !restricted && envs && envs[i]; i++) {
    const char *root = getenv(envs[i]);
    if (root && root[0]) {
      rc = add_tree_dirs(&tree_dirs, root, tree);
    }
  }
  if (rc == 0 && tree && !restricted) {
    // Default install locations: /usr/local/cuda (the toolkit's own symlink) and
    // /usr/local/cuda-X.Y; /opt/rocm and /opt/rocm-X.Y.Z [GPU_PROBING.md §2].
    const char *parent = tree == 'c' ? "/usr/local" : "/opt";
    const char *name = tree == 'c' ? "cuda" : "rocm";
    char root[64];
    snprintf(root, sizeof root, "%s/%s", parent, name);
    rc = add_tree_dirs(&tree_dirs, root, tree);
    TpGpuList roots = {0};
    if (rc == 0) {
      rc = tp_gpu_versioned_dirs(parent, name, "", &roots, err);
    }
    for (size_t i = 0; rc == 0 && i < roots.n; i++) {
      rc = add_tree_dirs(&tree_dirs, roots.items[i], tree);
    }
    tp_gpu_list_free(&roots);
  }
  // Newest soname first everywhere: an older runtime is only a fallback (GPU_PROBING.md §8).
  for (size_t s = 0; rc == 0 && sonames[s]; s++) {
    if (restricted) {
      for (size_t d = 0; rc == 0 && d < dirs.n; d++) {
        char path[PATH_MAX];
        int len = snprintf(path, sizeof path, "%s/%s", dirs.items[d], sonames[s]);
        if (len > 0 && (size_t)len < sizeof path) {
          rc = list_add(out, path);
        }
      }
    } else {
      rc = list_add(out, sonames[s]);
    }
    for (size_t d = 0; rc == 0 && d < tree_dirs.n; d++) {
      char path[PATH_MAX];
      int len = snprintf(path, sizeof path, "%s/%s", tree_dirs.items[d], sonames[s]);
      if (len > 0 && (size_t)len < sizeof path) {
        rc = list_add(out, path);
      }
    }
  }
  tp_gpu_list_free(&dirs);
  tp_gpu_list_free(&tree_dirs);
  if (rc != 0) {
    return tp_error_set(err, TP_ENOMEM, "gpu library search: out of memory");
  }
  return 0;
}

int tp_gpu_open_begin(TpGpuOpenIter *it, TpGpuApi api, const char *libpath) {
  memset(it, 0, sizeof *it);
  it->api = api;
  it->phase_fd = -1;
  return tp_gpu_candidates(api, libpath, &it->cands, NULL);
}

static const char *base_name(const char *path) {
  const char *slash = strrchr(path, '/');
  return slash ? slash + 1 : path;
}

bool tp_gpu_open_next(TpGpuOpenIter *it, TpGpuLib *lib) {
  while (it->next < it->cands.n) {
    const char *cand = it->cands.items[it->next++];
    bool is_path = strchr(cand, '/') != NULL;
    if (is_path && access(cand, F_OK) != 0) {
      continue;  // not there: summarised by the caller as "not found"
    }
    if (it->phase_fd >= 0) {
      tp_gpu_emit(it->phase_fd, -1, "phase", "dlopen %s", cand);
    }
    dlerror();
    void *h = dlopen(cand, RTLD_NOW | RTLD_LOCAL);
    if (!h) {
      const char *msg = dlerror();
      // A bare soname the loader cannot find reads "<soname>: cannot open shared object file";
      // any other message (a missing dependency, a wrong ELF class) is worth reporting.
      size_t clen = strlen(cand);
      bool missing = !is_path && msg && strncmp(msg, cand, clen) == 0 &&
                     strstr(msg + clen, "No such file or directory") != NULL;
      if (!missing) {
        tp_buf_printf(&it->tried, "%s: %s\n", cand, msg ? msg : "dlopen failed");
      }
      continue;
    }
    char resolved[PATH_MAX] = "";
    struct link_map *lm = NULL;
    if (dlinfo(h, RTLD_DI_LINKMAP, &lm) == 0 && lm && lm->l_name && lm->l_name[0]) {
      if (!realpath(lm->l_name, resolved)) {
        snprintf(resolved, sizeof resolved, "%s", lm->l_name);
      }
    } else {
      snprintf(resolved, sizeof resolved, "%s", cand);
    }
    if (list_has(&it->seen, resolved)) {
      continue;  // the same file under another name; already asked
    }
    if (list_add(&it->seen, resolved) != 0) {
      continue;
    }
    memset(lib, 0, sizeof *lib);
    lib->handle = h;
    snprintf(lib->soname, sizeof lib->soname, "%s", base_name(cand));
    snprintf(lib->path, sizeof lib->path, "%s", resolved);
    return true;
  }
  return false;
}

void tp_gpu_open_end(TpGpuOpenIter *it) {
  tp_gpu_list_free(&it->cands);
  tp_gpu_list_free(&it->seen);
  tp_buf_free(&it->tried);
}

void *tp_gpu_sym(const TpGpuLib *lib, const char *name) {
  return lib->handle ? dlsym(lib->handle, name) : NULL;
}

// ---------------------------------------------------------------------------------------------
// Children

pid_t tp_gpu_fork(int (*fn)(void *), void *arg, int out_fd, int fd3, int fd4, TpError *err) {
  pid_t pid = fork();
  if (pid < 0) {
    return tp_error_errno(err, "gpu probe: fork");
  }
  if (pid > 0) {
    setpgid(pid, pid);  // also done by the child; whichever runs first wins the race
    return pid;
  }
  // Child. Only this thread exists here; it runs one probe and _exits.
  setpgid(0, 0);
  sigset_t none;
  sigemptyset(&none);
  sigprocmask(SIG_SETMASK, &none, NULL);
  for (int sig = 1; sig < NSIG; sig++) {
    if (sig != SIGKILL && sig != SIGSTOP) {
      signal(sig, SIG_DFL);
    }
  }
  // Move the descriptors we keep above 4 first, so dup2 never clobbers one of them.
  int keep[3] = {out_fd, fd3, fd4};
  for (int i = 0; i < 3; i++) {
    if (keep[i] >= 0 && keep[i] <= 4) {
      int moved = fcntl(keep[i], F_DUPFD, 5);
      if (moved < 0) {
        _exit(125);
      }
      keep[i] = moved;
    }
  }
  int devnull = open("/dev/null", O_RDONLY);
  if (devnull < 0 || dup2(devnull, 0) < 0 || dup2(keep[0], 1) < 0 || dup2(keep[0], 2) < 0 ||
      dup2(keep[1], 3) < 0 || (keep[2] >= 0 && dup2(keep[2], 4) < 0)) {
    _exit(125);
  }
  int first_closed = keep[2] >= 0 ? 5 : 4;
  if (close_range((unsigned)first_closed, ~0U, 0) != 0) {
    long max = sysconf(_SC_OPEN_MAX);
    if (max < 0 || max > 65536) {
      max = 65536;
    }
    for (int fd = first_closed; fd < max; fd++) {
      close(fd);
    }
  }
  // A program the library may start must not inherit the report pipes.
  fcntl(3, F_SETFD, FD_CLOEXEC);
  if (keep[2] >= 0) {
    fcntl(4, F_SETFD, FD_CLOEXEC);
  }
  _exit(fn(arg));
}

int tp_gpu_reap(pid_t pid, double deadline, int *status, bool *killed) {
  *killed = false;
  *status = 0;
  int pidfd = pidfd_open(pid, 0);
  for (;;) {
    pid_t r = waitpid(pid, status, WNOHANG);
    if (r == pid) {
      break;
    }
    if (r < 0 && errno == EINTR) {
      continue;
    }
    if (r < 0) {
      if (pidfd >= 0) {
        close(pidfd);
      }
      return -1;  // ECHILD: someone else reaped it
    }
    double left = deadline - tp_gpu_monotonic();
    if (left <= 0 || *killed) {
      if (!*killed) {
        kill(-pid, SIGKILL);
        kill(pid, SIGKILL);
        *killed = true;
        deadline = tp_gpu_monotonic() + 5.0;  // grace for the kernel to deliver SIGKILL
        continue;
      }
      if (left <= 0) {
        if (pidfd >= 0) {
          close(pidfd);
        }
        return -1;  // stuck in the kernel (uninterruptible); left behind
      }
    }
    if (pidfd >= 0) {
      struct pollfd p = {.fd = pidfd, .events = POLLIN};
      int ms = (int)(left * 1000.0) + 1;
      poll(&p, 1, ms);
    } else {
      // No pidfd (old kernel): a blocking wait is the only portable way left.
      r = waitpid(pid, status, 0);
      if (r == pid) {
        break;
      }
    }
  }
  if (pidfd >= 0) {
    close(pidfd);
  }
  return 0;
}

void tp_gpu_describe_status(int status, char *out, size_t outsz) {
  if (WIFSIGNALED(status)) {
    int sig = WTERMSIG(status);
    const char *name = sigabbrev_np(sig);
    snprintf(out, outsz, "killed by signal %d (SIG%s)", sig, name ? name : "?");
  } else if (WIFEXITED(status)) {
    snprintf(out, outsz, "exit status %d", WEXITSTATUS(status));
  } else {
    snprintf(out, outsz, "wait status 0x%x", (unsigned)status);
  }
}

// ---------------------------------------------------------------------------------------------
// Report parsing

void tp_gpu_probe_init(TpGpuProbe *p) {
  memset(p, 0, sizeof *p);
  for (int i = 0; i < TP_GPU_API_COUNT; i++) {
    TpGpuBackend *b = &p->backends[i];
    b->api = (TpGpuApi)i;
    b->status = TP_GPU_ABSENT;
    b->device_count = -1;
  }
}

void tp_gpu_probe_free(TpGpuProbe *p) {
  for (int i = 0; i < TP_GPU_API_COUNT; i++) {
    tp_buf_free(&p->backends[i].tried);
    tp_buf_free(&p->backends[i].output);
  }
  free(p->devices);
  memset(p, 0, sizeof *p);
}

static TpGpuDevice *device_slot(TpGpuProbe *p, TpGpuApi api, int index) {
  for (size_t i = 0; i < p->ndevices; i++) {
    if (p->devices[i].api == api && p->devices[i].index == index) {
      return &p->devices[i];
    }
  }
  if (p->ndevices == p->cap) {
    size_t cap = p->cap ? p->cap * 2 : 16;
    TpGpuDevice *d = realloc(p->devices, cap * sizeof *d);
    if (!d) {
      return NULL;
    }
    p->devices = d;
    p->cap = cap;
  }
  TpGpuDevice *d = &p->devices[p->ndevices++];
  memset(d, 0, sizeof *d);
  d->api = api;
  d->index = index;
  d->cc_major = d->cc_minor = -1;
  d->sm_count = d->clock_khz = d->memory_clock_khz = d->memory_bus_width = -1;
  d->power_limit_mw = -1;
  d->memory_used = -1;
  d->clock_now_khz = d->app_clock_khz = -1;
  d->ecc = d->persistence = d->nprocesses = -1;
  return d;
}

// Parses a decimal integer value in [lo, hi]. Returns 0 or -1.
static int parse_int(const char *s, long long lo, long long hi, long long *out) {
  if (!*s) {
    return -1;
  }
  char *end = NULL;
  errno = 0;
  long long v = strtoll(s, &end, 10);
  if (errno != 0 || *end != '\0' || v < lo || v > hi) {
    return -1;
  }
  *out = v;
  return 0;
}

// Copies `src` into `dst`, cut to fit; fields of a report may be longer than their slot.
static void copy_cut(char *dst, size_t dstsz, const char *src) {
  size_t n = strlen(src);
  if (n >= dstsz) {
    n = dstsz - 1;
  }
  memcpy(dst, src, n);
  dst[n] = '\0';
}

static void append_joined(char *dst, size_t dstsz, const char *sep, const char *s) {
  size_t len = strlen(dst);
  if (len + 1 >= dstsz) {
    return;
  }
  if (len > 0) {
    copy_cut(dst + len, dstsz - len, sep);
    len = strlen(dst);
  }
  copy_cut(dst + len, dstsz - len, s);
}

static int backend_field(TpGpuBackend *b, const char *key, const char *value) {
  long long v = 0;
#define STR_FIELD(name)                                                                            \
  if (strcmp(key, #name) == 0) {                                                                   \
    copy_cut(b->name, sizeof b->name, value);                                                      \
    return 0;                                                                                      \
  }
  STR_FIELD(library)
  STR_FIELD(soname)
  STR_FIELD(reason)
  STR_FIELD(call)
  STR_FIELD(code_name)
  STR_FIELD(code_text)
  STR_FIELD(driver_version)
  STR_FIELD(runtime_version)
  STR_FIELD(version)
  STR_FIELD(cuda_version)
  STR_FIELD(phase)
#undef STR_FIELD
  if (strcmp(key, "status") == 0) {
    int st = status_from_name(value);
    if (st < 0) {
      return -1;
    }
    b->status = (TpGpuStatus)st;
    return 0;
  }
  if (strcmp(key, "code") == 0) {
    if (parse_int(value, -2147483648LL, 4294967295LL, &v) != 0) {
      return -1;
    }
    b->code = (int)v;  // ROCm SMI's 0xFFFFFFFF reads as -1
    return 0;
  }
  if (strcmp(key, "device_count") == 0) {
    if (parse_int(value, -1, 1000000, &v) != 0) {
      return -1;
    }
    b->device_count = (int)v;
    return 0;
  }
  if (strcmp(key, "tried") == 0) {
    if (tp_buf_append(&b->tried, value, strlen(value)) != 0 ||
        tp_buf_append(&b->tried, "\n", 1) != 0) {
      return -2;
    }
    return 0;
  }
  return -1;
}

static int device_field(TpGpuDevice *d, const char *key, const char *value) {
  long long v = 0;
#define STR_FIELD(name)                                                                            \
  if (strcmp(key, #name) == 0) {                                                                   \
    copy_cut(d->name, sizeof d->name, value);                                                      \
    return 0;                                                                                      \
  }
  STR_FIELD(vendor)
  STR_FIELD(name)
  STR_FIELD(arch)
  STR_FIELD(arch_full)
  STR_FIELD(uuid)
#undef STR_FIELD
#define INT_FIELD(name, lo, hi)                                                                    \
  if (strcmp(key, #name) == 0) {                                                                   \
    if (parse_int(value, lo, hi, &v) != 0) {                                                       \
      return -1;                                                                                   \
    }                                                                                              \
    d->name = (int)v;                                                                              \
    return 0;                                                                                      \
  }
  INT_FIELD(cc_major, -1, 1000)
  INT_FIELD(cc_minor, -1, 1000)
  INT_FIELD(sm_count, -1, 1000000)
  INT_FIELD(clock_khz, -1, 1000000000)
  INT_FIELD(memory_clock_khz, -1, 1000000000)
  INT_FIELD(memory_bus_width, -1, 1000000)
  INT_FIELD(power_limit_mw, -1, 1000000000)
  INT_FIELD(clock_now_khz, -1, 1000000000)
  INT_FIELD(app_clock_khz, -1, 1000000000)
  INT_FIELD(ecc, -1, 1)
  INT_FIELD(persistence, -1, 1)
  INT_FIELD(nprocesses, -1, 1000000)
#undef INT_FIELD
  if (strcmp(key, "memory_used") == 0) {
    if (parse_int(value, -1, (long long)1 << 60, &v) != 0) {
      return -1;
    }
    d->memory_used = (int64_t)v;
    return 0;
  }
  if (strcmp(key, "process") == 0) {
    // "pid bytes": one line per process, kept as "pid:bytes" words.
    long long pid = 0, bytes = 0;
    char extra = 0;
    if (sscanf(value, "%lld %lld %c", &pid, &bytes, &extra) != 2 || pid < 0 || bytes < -1) {
      return -1;
    }
    char word[48];
    snprintf(word, sizeof word, "%lld:%lld", pid, bytes);
    if (strlen(d->processes) + strlen(word) + 2 <= sizeof d->processes) {  // whole words only
      append_joined(d->processes, sizeof d->processes, " ", word);
    }
    return 0;
  }
  if (strcmp(key, "memory_total") == 0) {
    if (parse_int(value, 0, (long long)1 << 60, &v) != 0) {
      return -1;
    }
    d->memory_total = (uint64_t)v;
    return 0;
  }
  if (strcmp(key, "pci_bus_id") == 0) {
    // A malformed id is kept out of the normalised field but not fatal.
    if (tp_gpu_pci_normalize(value, d->pci_bus_id, sizeof d->pci_bus_id) != 0) {
      append_joined(d->error, sizeof d->error, "; ", "unreadable PCI bus id");
    }
    return 0;
  }
  if (strcmp(key, "error") == 0) {
    append_joined(d->error, sizeof d->error, "; ", value);
    return 0;
  }
  return -1;
}

int tp_gpu_probe_parse(TpGpuProbe *p, TpGpuApi api, const char *data, size_t len,
                       const char *subject, TpError *err) {
  if ((unsigned)api >= TP_GPU_API_COUNT) {
    return tp_error_set(err, TP_EINVAL, "%s: unknown api %d", subject, (int)api);
  }
  if (len > TP_GPU_REPORT_MAX) {
    return tp_error_set(err, TP_ELIMIT, "%s: report of %zu bytes exceeds %u", subject, len,
                        TP_GPU_REPORT_MAX);
  }
  TpGpuBackend *b = &p->backends[api];
  size_t pos = 0;
  int lineno = 0;
  bool ended = false;
  while (pos < len) {
    lineno++;
    const char *line = data + pos;
    const char *nl = memchr(line, '\n', len - pos);
    if (!nl) {
      return tp_error_set(err, TP_EPARSE, "%s: line %d: truncated (no newline)", subject, lineno);
    }
    size_t llen = (size_t)(nl - line);
    pos += llen + 1;
    if (ended) {
      return tp_error_set(err, TP_EPARSE, "%s: line %d: data after 'end'", subject, lineno);
    }
    if (llen == 3 && memcmp(line, "end", 3) == 0) {
      ended = true;
      continue;
    }
    if (memchr(line, '\0', llen)) {
      return tp_error_set(err, TP_EPARSE, "%s: line %d: NUL byte", subject, lineno);
    }
    const char *t1 = memchr(line, '\t', llen);
    const char *t2 = t1 ? memchr(t1 + 1, '\t', (size_t)(line + llen - (t1 + 1))) : NULL;
    if (!t1 || !t2) {
      return tp_error_set(err, TP_EPARSE, "%s: line %d: expected <tag>\\t<key>\\t<value>", subject,
                          lineno);
    }
    char tag[16], key[32], value[1024];
    size_t taglen = (size_t)(t1 - line), keylen = (size_t)(t2 - t1 - 1);
    if (taglen == 0 || taglen >= sizeof tag || keylen == 0 || keylen >= sizeof key) {
      return tp_error_set(err, TP_EPARSE, "%s: line %d: bad tag or key", subject, lineno);
    }
    memcpy(tag, line, taglen);
    tag[taglen] = '\0';
    memcpy(key, t1 + 1, keylen);
    key[keylen] = '\0';
    if (tp_gpu_unescape(t2 + 1, (size_t)(line + llen - (t2 + 1)), value, sizeof value) != 0) {
      return tp_error_set(err, TP_EPARSE, "%s: line %d: bad escape in value of '%s'", subject,
                          lineno, key);
    }
    int rc;
    if (strcmp(tag, "b") == 0) {
      rc = backend_field(b, key, value);
    } else {
      long long idx = 0;
      if (parse_int(tag, 0, TP_GPU_DEVICES_MAX - 1, &idx) != 0) {
        return tp_error_set(err, TP_EPARSE, "%s: line %d: bad device index '%s'", subject, lineno,
                            tag);
      }
      TpGpuDevice *d = device_slot(p, api, (int)idx);
      if (!d) {
        return tp_error_set(err, TP_ENOMEM, "%s: out of memory", subject);
      }
      rc = device_field(d, key, value);
    }
    if (rc == -2) {
      return tp_error_set(err, TP_ENOMEM, "%s: out of memory", subject);
    }
    if (rc != 0) {
      return tp_error_set(err, TP_EPARSE, "%s: line %d: bad field '%s' = '%.60s'", subject, lineno,
                          key, value);
    }
  }
  if (!ended) {
    return tp_error_set(err, TP_EPARSE, "%s: report ends before 'end' (line %d)", subject, lineno);
  }
  b->device_errors = 0;
  for (size_t i = 0; i < p->ndevices; i++) {
    if (p->devices[i].api == api && p->devices[i].error[0]) {
      b->device_errors++;
    }
  }
  return 0;
}

// ---------------------------------------------------------------------------------------------
// The probe

typedef struct ChildArg {
  TpGpuApi api;
  const char *libpath;
} ChildArg;

static int probe_child_main(void *arg) {
  const ChildArg *a = arg;
  tp_gpu_probe_child(a->api, a->libpath, 3);
  static const char end[] = "end\n";
  ssize_t w = write(3, end, sizeof end - 1);
  return w == (ssize_t)(sizeof end - 1) ? 0 : 1;
}

typedef struct Running {
  TpGpuApi api;
  pid_t pid;
  int rfd;    // report pipe, read end; -1 once at EOF
  int outfd;  // memfd with the child's stdout/stderr
  TpBuf report;
  bool overflow;
  double started, ended;
} Running;

// Reads what is available on r->rfd; closes it at EOF. Returns 0, or -errno.
static int drain(Running *r) {
  char buf[16384];
  for (;;) {
    ssize_t n = read(r->rfd, buf, sizeof buf);
    if (n > 0) {
      if (r->report.len + (size_t)n > TP_GPU_REPORT_MAX) {
        r->overflow = true;
      } else if (tp_buf_append(&r->report, buf, (size_t)n) != 0) {
        return TP_ENOMEM;
      }
      continue;
    }
    if (n == 0) {
      close(r->rfd);
      r->rfd = -1;
      r->ended = tp_gpu_monotonic();
      return 0;
    }
    if (errno == EINTR) {
      continue;
    }
    if (errno == EAGAIN || errno == EWOULDBLOCK) {
      return 0;
    }
    return -errno;
  }
}

// Copies at most TP_GPU_OUTPUT_MAX bytes of the child's captured output into `b`.
static void collect_output(int fd, TpBuf *b) {
  off_t size = lseek(fd, 0, SEEK_END);
  if (size <= 0) {
    return;
  }
  size_t want = (size_t)size < TP_GPU_OUTPUT_MAX ? (size_t)size : TP_GPU_OUTPUT_MAX;
  if (tp_buf_reserve(b, want) != 0) {
    return;
  }
  ssize_t n = pread(fd, b->data + b->len, want, 0);
  if (n > 0) {
    b->len += (size_t)n;
  }
  if ((size_t)size > want) {
    tp_buf_printf(b, "\n[%jd more bytes not kept]\n", (intmax_t)size - (intmax_t)want);
  }
}

static void finish_one(TpGpuProbe *p, Running *r, double deadline, bool timed_out) {
  TpGpuBackend *b = &p->backends[r->api];
  int status = 0;
  bool killed = false;
  int reaped = tp_gpu_reap(r->pid, timed_out ? 0.0 : deadline, &status, &killed);
  if (r->ended == 0) {
    r->ended = tp_gpu_monotonic();
  }
  char subject[64];
  snprintf(subject, sizeof subject, "%s probe", tp_gpu_api_name(r->api));
  TpError perr = {0};
  int prc = r->overflow ? tp_error_set(&perr, TP_ELIMIT, "%s: report larger than %u bytes", subject,
                                       TP_GPU_REPORT_MAX)
                        : tp_gpu_probe_parse(p, r->api, r->report.data ? r->report.data : "",
                                             r->report.len, subject, &perr);
  collect_output(r->outfd, &b->output);
  b->elapsed_s = r->ended - r->started;
  if (prc == 0 && !timed_out) {
    return;
  }
  const char *during = b->phase[0] ? b->phase : "start-up";
  const char *lib = b->soname[0] ? b->soname : subject;
  if (timed_out) {
    b->status = TP_GPU_TIMEOUT;
    snprintf(b->reason, sizeof b->reason, "%s: no answer within %.1f s during %s (child killed)",
             lib, deadline - r->started, during);
    return;
  }
  b->status = TP_GPU_CRASHED;
  bool abnormal = reaped == 0 && !(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  if (abnormal) {
    char how[96];
    tp_gpu_describe_status(status, how, sizeof how);
    snprintf(b->reason, sizeof b->reason, "%s: probe child %s during %s", lib, how, during);
  } else {
    snprintf(b->reason, sizeof b->reason, "%s: malformed probe report: %s", lib, perr.msg);
  }
}

int tp_gpu_probe(const TpGpuProbeOpts *opts, TpGpuProbe *out, TpError *err) {
  TpGpuProbeOpts o = opts ? *opts : (TpGpuProbeOpts){0};
  double timeout = o.timeout_s > 0 ? o.timeout_s : DEFAULT_TIMEOUT_S;
  unsigned apis = o.apis ? o.apis : (1u << TP_GPU_API_COUNT) - 1;
  const char *libpath = o.libpath ? o.libpath : getenv("TPLUA_GPU_LIBPATH");
  tp_gpu_probe_init(out);
  double t0 = tp_gpu_monotonic();
  double deadline = t0 + timeout;
  Running run[TP_GPU_API_COUNT];
  size_t nrun = 0;
  int rc = 0;
  for (int api = 0; api < TP_GPU_API_COUNT; api++) {
    if (!(apis & (1u << api))) {
      continue;
    }
    int pfd[2];
    if (pipe2(pfd, O_CLOEXEC) != 0) {
      rc = tp_error_errno(err, "gpu probe: pipe");
      break;
    }
    int outfd = memfd_create("tplua-gpu-probe", MFD_CLOEXEC);
    if (outfd < 0) {
      rc = tp_error_errno(err, "gpu probe: memfd_create");
      close(pfd[0]);
      close(pfd[1]);
      break;
    }
    ChildArg arg = {(TpGpuApi)api, libpath};
    Running *r = &run[nrun];
    memset(r, 0, sizeof *r);
    r->api = (TpGpuApi)api;
    r->outfd = outfd;
    r->rfd = pfd[0];
    r->started = tp_gpu_monotonic();
    r->pid = tp_gpu_fork(probe_child_main, &arg, outfd, pfd[1], -1, err);
    close(pfd[1]);
    if (r->pid < 0) {
      rc = r->pid;
      close(pfd[0]);
      close(outfd);
      break;
    }
    fcntl(r->rfd, F_SETFL, fcntl(r->rfd, F_GETFL) | O_NONBLOCK);
    nrun++;
  }
  if (rc != 0) {
    deadline = tp_gpu_monotonic();  // give up on the children already started
  }
  // Collect the reports until every pipe reaches EOF or the deadline passes.
  for (;;) {
    struct pollfd pfds[TP_GPU_API_COUNT];
    Running *who[TP_GPU_API_COUNT];
    nfds_t n = 0;
    for (size_t i = 0; i < nrun; i++) {
      if (run[i].rfd >= 0) {
        pfds[n] = (struct pollfd){.fd = run[i].rfd, .events = POLLIN};
        who[n++] = &run[i];
      }
    }
    double left = deadline - tp_gpu_monotonic();
    if (n == 0 || left <= 0) {
      break;
    }
    int ready = poll(pfds, n, (int)(left * 1000.0) + 1);
    if (ready < 0 && errno != EINTR) {
      if (rc == 0) {
        rc = tp_error_errno(err, "gpu probe: poll");
      }
      break;
    }
    for (nfds_t i = 0; ready > 0 && i < n; i++) {
      if (pfds[i].revents) {
        int drc = drain(who[i]);
        if (drc != 0 && rc == 0) {
          rc = tp_error_set(err, drc, "gpu probe: reading %s report: %s",
                            tp_gpu_api_name(who[i]->api),
                            drc == TP_ENOMEM ? "out of memory" : strerror(-drc));
        }
        if (drc != 0) {
          close(who[i]->rfd);
          who[i]->rfd = -1;
        }
      }
    }
  }
  for (size_t i = 0; i < nrun; i++) {
    bool timed_out = run[i].rfd >= 0;
    if (timed_out) {
      drain(&run[i]);  // whatever arrived last names the phase it hung in
      if (run[i].rfd >= 0) {
        close(run[i].rfd);
        run[i].rfd = -1;
      }
    }
    finish_one(out, &run[i], deadline, timed_out);
    close(run[i].outfd);
    tp_buf_free(&run[i].report);
  }
  out->elapsed_s = tp_gpu_monotonic() - t0;
  if (rc != 0) {
    tp_gpu_probe_free(out);
    tp_gpu_probe_init(out);
  }
  return rc;
}
