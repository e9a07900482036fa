// The GPU libraries: names, search order, dlopen in a child, version and bus id formats (see
// gpu_lib.h).
#include "gpu_lib.h"

#include <dirent.h>
#include <dlfcn.h>
#include <link.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "gpu_child.h"

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
    int n = snprintf(lib->path, sizeof lib->path, "%s", resolved);
    if (n < 0 || (size_t)n >= sizeof lib->path) {
      // A path longer than the report holds is shown cut, and says so.
      memcpy(lib->path + sizeof lib->path - 4, "...", 4);
    }
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
