// Unit tests of engine/gpu: formats, report parsing (good and hostile input), library search
// order, the probe against the fake libraries of tests/fakes (and the real ones installed here),
// telemetry sampling and the energy integral.
#include <dlfcn.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "check.h"
#include "gpu.h"
#include "gpu_child.h"

static char fakes[1024];

static const TpGpuDevice *find_dev(const TpGpuProbe *p, TpGpuApi api, int index) {
  for (size_t i = 0; i < p->ndevices; i++) {
    if (p->devices[i].api == api && p->devices[i].index == index) {
      return &p->devices[i];
    }
  }
  return NULL;
}

static size_t count_devs(const TpGpuProbe *p, TpGpuApi api) {
  size_t n = 0;
  for (size_t i = 0; i < p->ndevices; i++) {
    n += p->devices[i].api == api;
  }
  return n;
}

static const char *buf_str(TpBuf *b) {
  const char *s = tp_buf_cstr(b);
  return s ? s : "";
}

static int probe_scenario(const char *scenario, double timeout, TpGpuProbe *p) {
  char dir[1200];
  snprintf(dir, sizeof dir, "%s/%s", fakes, scenario);
  TpGpuProbeOpts o = {.timeout_s = timeout, .libpath = dir};
  TpError err = {0};
  int rc = tp_gpu_probe(&o, p, &err);
  if (rc != 0) {
    fprintf(stderr, "probe %s: %s\n", scenario, err.msg);
  }
  return rc;
}

static void test_names(void) {
  for (int i = 0; i < TP_GPU_API_COUNT; i++) {
    CHECK_INT(tp_gpu_api_from_name(tp_gpu_api_name((TpGpuApi)i)), i);
  }
  CHECK_INT(tp_gpu_api_from_name("opencl"), -1);
  CHECK_STR(tp_gpu_status_name(TP_GPU_NODEVICE), "no_device");
  CHECK_STR(tp_gpu_status_name(TP_GPU_FAILED), "error");
}

static void test_formats(void) {
  char s[64];
  CHECK_INT(tp_gpu_pci_normalize("00000000:18:00.0", s, sizeof s), 0);
  CHECK_STR(s, "0000:18:00.0");
  CHECK_INT(tp_gpu_pci_normalize("0000:C1:1F.7", s, sizeof s), 0);
  CHECK_STR(s, "0000:c1:1f.7");
  CHECK_INT(tp_gpu_pci_normalize("0000:18:00", s, sizeof s), TP_EINVAL);
  CHECK_STR(s, "");
  CHECK_INT(tp_gpu_pci_normalize("0000:100:00.0", s, sizeof s), TP_EINVAL);
  CHECK_INT(tp_gpu_pci_normalize("0000:18:00.0 trailing", s, sizeof s), TP_EINVAL);
  CHECK_INT(tp_gpu_pci_normalize("", s, sizeof s), TP_EINVAL);
  tp_gpu_format_cuda_version(12020, s, sizeof s);
  CHECK_STR(s, "12.2");
  tp_gpu_format_cuda_version(13000, s, sizeof s);
  CHECK_STR(s, "13.0");
  tp_gpu_format_cuda_version(0, s, sizeof s);
  CHECK_STR(s, "");
  tp_gpu_format_hip_version(50221153, s, sizeof s);
  CHECK_STR(s, "5.2.21153");
  tp_gpu_format_hip_version(60241134, s, sizeof s);
  CHECK_STR(s, "6.2.41134");
  tp_gpu_format_nccl_version(22809, s, sizeof s);
  CHECK_STR(s, "2.28.9");
  tp_gpu_format_nccl_version(2708, s, sizeof s);
  CHECK_STR(s, "2.7.8");
}

static void test_parse_good(void) {
  static const char report[] = "b\tphase\tcudaGetDeviceCount\n"
                               "b\tlibrary\t/opt/x/libcudart.so.12\n"
                               "b\ttried\t/opt/x/libcudart.so.13: error 35\n"
                               "b\ttried\tsecond line\n"
                               "0\tname\tGPU \\\\ with \\ttab and \\x01 byte\n"
                               "0\tpci_bus_id\t00000000:2A:00.0\n"
                               "0\tsm_count\t132\n"
                               "0\tmemory_total\t85520809984\n"
                               "0\tmemory_used\t1073741824\n"
                               "0\tecc\t1\n"
                               "0\tpersistence\t0\n"
                               "0\tclock_now_khz\t345000\n"
                               "0\tnprocesses\t2\n"
                               "0\tprocess\t4242 32212254720\n"
                               "0\tprocess\t17 -1\n"
                               "1\terror\tfirst failure\n"
                               "1\terror\tsecond failure\n"
                               "b\tcode\t4294967295\n"
                               "b\tdevice_count\t2\n"
                               "b\tstatus\tok\n"
                               "end\n";
  TpGpuProbe p;
  tp_gpu_probe_init(&p);
  TpError err = {0};
  CHECK_INT(tp_gpu_probe_parse(&p, TP_GPU_CUDART, report, sizeof report - 1, "t", &err), 0);
  TpGpuBackend *b = &p.backends[TP_GPU_CUDART];
  CHECK_INT(b->status, TP_GPU_OK);
  CHECK_STR(b->library, "/opt/x/libcudart.so.12");
  CHECK_STR(buf_str(&b->tried), "/opt/x/libcudart.so.13: error 35\nsecond line\n");
  CHECK_INT(b->code, -1);
  CHECK_INT(b->device_count, 2);
  CHECK_INT(b->device_errors, 1);
  const TpGpuDevice *d0 = find_dev(&p, TP_GPU_CUDART, 0);
  const TpGpuDevice *d1 = find_dev(&p, TP_GPU_CUDART, 1);
  CHECK(d0 && d1);
  if (d0 && d1) {
    CHECK_STR(d0->name, "GPU \\ with \ttab and \x01 byte");
    CHECK_STR(d0->pci_bus_id, "0000:2a:00.0");
    CHECK_INT(d0->sm_count, 132);
    CHECK_INT((long long)d0->memory_total, 85520809984LL);
    CHECK_INT(d0->clock_khz, -1);
    CHECK_INT(d0->memory_used, 1073741824LL);
    CHECK_INT(d0->ecc, 1);
    CHECK_INT(d0->persistence, 0);
    CHECK_INT(d0->clock_now_khz, 345000);
    CHECK_INT(d0->app_clock_khz, -1);
    CHECK_INT(d0->nprocesses, 2);
    CHECK_STR(d0->processes, "4242:32212254720 17:-1");
    CHECK_STR(d1->error, "first failure; second failure");
    CHECK_INT(d1->nprocesses, -1);  // not reported: unknown, not idle
    CHECK_INT(d1->memory_used, -1);
  }
  tp_gpu_probe_free(&p);
}

// Each hostile report must be refused with the given code and a message containing `want`.
static void parse_bad(const char *data, size_t len, int code, const char *want) {
  TpGpuProbe p;
  tp_gpu_probe_init(&p);
  TpError err = {0};
  int rc = tp_gpu_probe_parse(&p, TP_GPU_HIP, data, len, "hip probe", &err);
  CHECK_INT(rc, code);
  CHECK(strstr(err.msg, want) != NULL);
  if (!strstr(err.msg, want)) {
    fprintf(stderr, "  message was: %s\n", err.msg);
  }
  tp_gpu_probe_free(&p);
}

static void test_parse_bad(void) {
#define BAD(s, code, want) parse_bad(s, sizeof s - 1, code, want)
  BAD("b\tstatus\tok\n", TP_EPARSE, "report ends before 'end'");
  BAD("b\tstatus\tok\nend", TP_EPARSE, "line 2: truncated");
  BAD("end\nb\tstatus\tok\n", TP_EPARSE, "line 2: data after 'end'");
  BAD("b status ok\nend\n", TP_EPARSE, "line 1: expected");
  BAD("b\tstatus\tfine\nend\n", TP_EPARSE, "line 1: bad field 'status'");
  BAD("b\tcolour\tred\nend\n", TP_EPARSE, "bad field 'colour'");
  BAD("99999\tname\tx\nend\n", TP_EPARSE, "bad device index '99999'");
  BAD("-1\tname\tx\nend\n", TP_EPARSE, "bad device index '-1'");
  BAD("0\tsm_count\t12x\nend\n", TP_EPARSE, "bad field 'sm_count'");
  BAD("0\tmemory_total\t-5\nend\n", TP_EPARSE, "bad field 'memory_total'");
  BAD("0\tprocess\t12\nend\n", TP_EPARSE, "bad field 'process'");
  BAD("0\tprocess\t12 34 56\nend\n", TP_EPARSE, "bad field 'process'");
  BAD("0\tprocess\t-3 34\nend\n", TP_EPARSE, "bad field 'process'");
  BAD("0\tecc\t2\nend\n", TP_EPARSE, "bad field 'ecc'");
  BAD("0\tmemory_used\tlots\nend\n", TP_EPARSE, "bad field 'memory_used'");
  BAD("b\tdevice_count\t99999999999999999999\nend\n", TP_EPARSE, "bad field 'device_count'");
  BAD("0\tname\tbad \\q escape\nend\n", TP_EPARSE, "bad escape");
  BAD("0\tname\ttrailing \\\nend\n", TP_EPARSE, "bad escape");
  BAD("0\tname\tnul \\x00 byte\nend\n", TP_EPARSE, "bad escape");
  BAD("0\tname\tshort \\x4\nend\n", TP_EPARSE, "bad escape");
  BAD("b\tstat\0us\tok\nend\n", TP_EPARSE, "line 1: NUL byte");
  BAD("\x7f"
      "ELF\x02\x01\x01\n\n\n",
      TP_EPARSE, "line 1");
  BAD("\ttag\tmissing\nend\n", TP_EPARSE, "bad tag or key");
#undef BAD
  // A report larger than the limit is refused before it is read.
  size_t big = (1u << 20) + 10;
  char *huge = malloc(big);
  CHECK(huge != NULL);
  if (huge) {
    memset(huge, 'x', big);
    parse_bad(huge, big, TP_ELIMIT, "exceeds");
    free(huge);
  }
  // An over-long value is cut to its field, not overflowed.
  TpBuf b = {0};
  tp_buf_printf(&b, "0\tname\t");
  for (int i = 0; i < 900; i++) {
    tp_buf_append(&b, "n", 1);
  }
  tp_buf_printf(&b, "\nend\n");
  TpGpuProbe p;
  tp_gpu_probe_init(&p);
  TpError err = {0};
  CHECK_INT(tp_gpu_probe_parse(&p, TP_GPU_HIP, b.data, b.len, "hip probe", &err), 0);
  CHECK_INT(strlen(p.devices[0].name), sizeof p.devices[0].name - 1);
  tp_gpu_probe_free(&p);
  tp_buf_free(&b);
}

static void test_escape_roundtrip(void) {
  const char raw[] = "a\\b\nc\td\re\x01\x1f\x7f end";
  TpBuf b = {0};
  CHECK_INT(tp_gpu_escape(&b, raw, sizeof raw - 1), 0);
  CHECK(memchr(b.data, '\n', b.len) == NULL);
  CHECK(memchr(b.data, '\t', b.len) == NULL);
  char out[64];
  CHECK_INT(tp_gpu_unescape(b.data, b.len, out, sizeof out), 0);
  CHECK_STR(out, raw);
  tp_buf_free(&b);
}

static void mkdirs(const char *root, const char *rel) {
  char path[1024];
  snprintf(path, sizeof path, "%s/%s", root, rel);
  for (char *p = path + strlen(root) + 1; *p; p++) {
    if (*p == '/') {
      *p = '\0';
      mkdir(path, 0755);
      *p = '/';
    }
  }
  mkdir(path, 0755);
}

static void test_search(void) {
  char root[] = "/tmp/tplua-gpu-test.XXXXXX";
  CHECK(mkdtemp(root) != NULL);
  mkdirs(root, "cuda-11.8");
  mkdirs(root, "cuda-12.4");
  mkdirs(root, "cuda-12.10");
  mkdirs(root, "cuda-13.0");
  mkdirs(root, "cuda-12.x");
  mkdirs(root, "cuda-");
  mkdirs(root, "cudafoo-1.0");
  char file[1100];
  snprintf(file, sizeof file, "%s/cuda-14.0", root);
  FILE *f = fopen(file, "w");
  if (f) {
    fclose(f);
  }
  TpGpuList l = {0};
  TpError err = {0};
  CHECK_INT(tp_gpu_versioned_dirs(root, "cuda", "", &l, &err), 0);
  CHECK_INT(l.n, 4);
  const char *want[] = {"cuda-13.0", "cuda-12.10", "cuda-12.4", "cuda-11.8"};
  for (size_t i = 0; i < 4 && i < l.n; i++) {
    const char *slash = strrchr(l.items[i], '/');
    CHECK_STR(slash ? slash + 1 : l.items[i], want[i]);
  }
  tp_gpu_list_free(&l);
  CHECK_INT(tp_gpu_versioned_dirs("/nonexistent-dir", "cuda", "", &l, &err), 0);
  CHECK_INT(l.n, 0);

  // Restricted search: each soname in each directory and nowhere else (not even CUDA_HOME);
  // the override variable goes first.
  mkdirs(root, "tk/lib64");
  char tk[1100];
  snprintf(tk, sizeof tk, "%s/tk", root);
  setenv("CUDA_HOME", tk, 1);
  setenv("TPLUA_CUDART", "/explicit/libcudart.so", 1);
  CHECK_INT(tp_gpu_candidates(TP_GPU_CUDART, "/a::/b", &l, &err), 0);
  CHECK_INT(l.n, 1 + 4 * 2);
  if (l.n >= 5) {
    CHECK_STR(l.items[0], "/explicit/libcudart.so");
    CHECK_STR(l.items[1], "/a/libcudart.so.13");
    CHECK_STR(l.items[2], "/b/libcudart.so.13");
    CHECK_STR(l.items[3], "/a/libcudart.so.12");
    CHECK_STR(l.items[8], "/b/libcudart.so");
  }
  tp_gpu_list_free(&l);
  unsetenv("TPLUA_CUDART");
  // System search: the loader first, then the toolkit named by CUDA_HOME, per soname.
  CHECK_INT(tp_gpu_candidates(TP_GPU_CUDART, NULL, &l, &err), 0);
  CHECK(l.n >= 8);
  if (l.n >= 3) {
    CHECK_STR(l.items[0], "libcudart.so.13");
    char want_tk[1200];
    snprintf(want_tk, sizeof want_tk, "%s/lib64/libcudart.so.13", tk);
    CHECK_STR(l.items[1], want_tk);
    bool found12 = false;
    for (size_t i = 2; i < l.n; i++) {
      found12 = found12 || strcmp(l.items[i], "libcudart.so.12") == 0;
      // No stubs directory is ever a candidate.
      CHECK(strstr(l.items[i], "/stubs/") == NULL);
    }
    CHECK(found12);
  }
  tp_gpu_list_free(&l);
  // The driver's libraries never come from a toolkit (it holds only stubs).
  CHECK_INT(tp_gpu_candidates(TP_GPU_CUDA, NULL, &l, &err), 0);
  CHECK_INT(l.n, 1);
  if (l.n == 1) {
    CHECK_STR(l.items[0], "libcuda.so.1");
  }
  tp_gpu_list_free(&l);
  // Unrestricted: the loader first (bare sonames).
  CHECK_INT(tp_gpu_candidates(TP_GPU_HIP, NULL, &l, &err), 0);
  CHECK(l.n >= 4);
  if (l.n >= 1) {
    CHECK_STR(l.items[0], "libamdhip64.so.7");
  }
  tp_gpu_list_free(&l);
  unsetenv("CUDA_HOME");
  char cmd[1200];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", root);
  CHECK_INT(system(cmd), 0);
}

static void test_probe_h100(void) {
  TpGpuProbe p;
  if (probe_scenario("h100x8", 10, &p) != 0) {
    CHECK(0);
    return;
  }
  TpGpuBackend *rt = &p.backends[TP_GPU_CUDART];
  CHECK_INT(rt->status, TP_GPU_OK);
  CHECK(strstr(rt->library, "h100x8/libcudart.so.12") != NULL);
  CHECK_STR(rt->runtime_version, "12.2");
  CHECK_STR(rt->driver_version, "12.2");
  // The CUDA 13 runtime answered 35 (driver too old) and was passed over for the older one.
  CHECK(strstr(buf_str(&rt->tried), "libcudart.so.13: cudaGetDeviceCount: error 35 "
                                    "(cudaErrorInsufficientDriver)") != NULL);
  CHECK_INT(rt->device_count, 8);
  CHECK_INT(count_devs(&p, TP_GPU_CUDART), 8);
  for (int i = 0; i < 8; i++) {
    const TpGpuDevice *d = find_dev(&p, TP_GPU_CUDART, i);
    CHECK(d != NULL);
    if (!d) {
      continue;
    }
    CHECK_STR(d->name, "NVIDIA H100 80GB HBM3");  // _v2 layout, not the legacy symbol
    CHECK_STR(d->vendor, "nvidia");
    CHECK_STR(d->arch, "sm_90");
    CHECK_INT(d->sm_count, 132);
    CHECK_INT(d->clock_khz, 1980000);
    CHECK_INT((long long)d->memory_total, 85520809984LL);
    char pci[32];
    snprintf(pci, sizeof pci, "0000:%02x:00.0", 0x18 + 0x10 * i);
    CHECK_STR(d->pci_bus_id, pci);
    CHECK(strncmp(d->uuid, "GPU-", 4) == 0 && strlen(d->uuid) == 40);
    CHECK_STR(d->error, "");
  }
  TpGpuBackend *nv = &p.backends[TP_GPU_NVML];
  CHECK_INT(nv->status, TP_GPU_OK);
  CHECK_STR(nv->driver_version, "535.161.08");
  CHECK_STR(nv->cuda_version, "12.2");
  CHECK_INT(count_devs(&p, TP_GPU_NVML), 8);
  const TpGpuDevice *n0 = find_dev(&p, TP_GPU_NVML, 0), *c0 = find_dev(&p, TP_GPU_CUDART, 0);
  if (n0 && c0) {
    CHECK_STR(n0->pci_bus_id, c0->pci_bus_id);  // NVML's 8-digit domain normalised
    CHECK_STR(n0->uuid, c0->uuid);
    CHECK_INT(n0->power_limit_mw, 700000);
    CHECK_STR(n0->arch, "sm_90");
  }
  CHECK_INT(p.backends[TP_GPU_NCCL].status, TP_GPU_OK);
  CHECK_STR(p.backends[TP_GPU_NCCL].version, "2.21.5");
  CHECK_INT(p.backends[TP_GPU_CUDA].status, TP_GPU_ABSENT);
  CHECK(strstr(p.backends[TP_GPU_CUDA].reason, "libcuda.so.1: not found") != NULL);
  CHECK_INT(p.backends[TP_GPU_HIP].status, TP_GPU_ABSENT);
  CHECK(p.elapsed_s < 2.0);
  tp_gpu_probe_free(&p);
}

static void test_probe_mi300x(void) {
  TpGpuProbe p;
  if (probe_scenario("mi300x8", 10, &p) != 0) {
    CHECK(0);
    return;
  }
  TpGpuBackend *hip = &p.backends[TP_GPU_HIP];
  CHECK_INT(hip->status, TP_GPU_OK);
  CHECK_STR(hip->runtime_version, "6.2.41134");
  CHECK_INT(count_devs(&p, TP_GPU_HIP), 8);
  const TpGpuDevice *d = find_dev(&p, TP_GPU_HIP, 7);
  CHECK(d != NULL);
  if (d) {
    CHECK_STR(d->name, "AMD Instinct MI300X");
    CHECK_STR(d->vendor, "amd");
    CHECK_STR(d->arch, "gfx942");  // read at the R0600 offset
    CHECK_STR(d->arch_full, "gfx942:sramecc+:xnack-");
    CHECK_INT(d->sm_count, 304);
    CHECK_INT(d->cc_major, 9);
    CHECK_INT(d->cc_minor, 4);
    CHECK_STR(d->pci_bus_id, "0000:f5:00.0");
    CHECK_STR(d->uuid, "GPU-000000005eef0007");
  }
  // What the runtime printed is kept as data.
  CHECK(strstr(buf_str(&hip->output), "fake hip: runtime starting") != NULL);
  CHECK(strstr(buf_str(&hip->output), "fake hip: stdout chatter") != NULL);
  TpGpuBackend *rsmi = &p.backends[TP_GPU_RSMI];
  CHECK_INT(rsmi->status, TP_GPU_OK);
  CHECK_STR(rsmi->version, "7.3.0");
  CHECK_STR(rsmi->driver_version, "6.8.5");
  const TpGpuDevice *r = find_dev(&p, TP_GPU_RSMI, 7);
  if (r && d) {
    CHECK_STR(r->pci_bus_id, d->pci_bus_id);
    CHECK_INT(r->power_limit_mw, 750000);
  }
  CHECK_STR(p.backends[TP_GPU_RCCL].version, "2.20.5");
  tp_gpu_probe_free(&p);
}

static void test_probe_mixed(void) {
  TpGpuProbe p;
  if (probe_scenario("mixed", 10, &p) != 0) {
    CHECK(0);
    return;
  }
  CHECK_INT(p.backends[TP_GPU_CUDA].status, TP_GPU_OK);
  CHECK_STR(p.backends[TP_GPU_CUDA].driver_version, "12.4");
  CHECK_INT(count_devs(&p, TP_GPU_CUDA), 2);
  const TpGpuDevice *a = find_dev(&p, TP_GPU_CUDA, 1);
  if (a) {
    CHECK_STR(a->name, "NVIDIA A100-SXM4-80GB");
    CHECK_STR(a->arch, "sm_80");
    CHECK_INT(a->sm_count, 108);
    CHECK_STR(a->pci_bus_id, "0000:17:00.0");
  }
  CHECK_INT(p.backends[TP_GPU_CUDART].status, TP_GPU_ABSENT);
  CHECK_INT(p.backends[TP_GPU_HIP].status, TP_GPU_OK);
  CHECK_INT(count_devs(&p, TP_GPU_HIP), 4);
  const TpGpuDevice *m = find_dev(&p, TP_GPU_HIP, 3);
  if (m) {
    CHECK_STR(m->arch, "gfx90a");  // HIP 5: plain symbol, R0000 offset
    CHECK_INT(m->sm_count, 110);
  }
  CHECK_INT(p.backends[TP_GPU_RSMI].status, TP_GPU_OK);
  CHECK_STR(p.backends[TP_GPU_RSMI].version, "1.0.0");
  CHECK_INT(count_devs(&p, TP_GPU_NVML), 2);
  tp_gpu_probe_free(&p);
}

static void test_probe_errmid(void) {
  TpGpuProbe p;
  if (probe_scenario("errmid", 10, &p) != 0) {
    CHECK(0);
    return;
  }
  TpGpuBackend *rt = &p.backends[TP_GPU_CUDART];
  CHECK_INT(rt->status, TP_GPU_OK);
  CHECK_INT(count_devs(&p, TP_GPU_CUDART), 4);
  CHECK_INT(rt->device_errors, 1);
  const TpGpuDevice *bad = find_dev(&p, TP_GPU_CUDART, 2);
  const TpGpuDevice *good = find_dev(&p, TP_GPU_CUDART, 3);
  if (bad && good) {
    CHECK(strstr(bad->error, "cudaDeviceGetAttribute(16): error 999") != NULL);
    CHECK(strstr(bad->error, "cudaDeviceGetPCIBusId: error 999") != NULL);
    CHECK_STR(bad->pci_bus_id, "");
    CHECK_INT(bad->sm_count, -1);
    CHECK_STR(bad->name, "NVIDIA H100 80GB HBM3");  // what did answer is kept
    CHECK_STR(good->error, "");
    CHECK_INT(good->sm_count, 132);
  }
  TpGpuBackend *hip = &p.backends[TP_GPU_HIP];
  CHECK_INT(hip->status, TP_GPU_CRASHED);
  CHECK(strstr(hip->reason, "killed by signal 6 (SIGABRT) during hipDeviceGetName(1)") != NULL);
  CHECK(strstr(buf_str(&hip->output), "device 1 fell off the bus") != NULL);
  tp_gpu_probe_free(&p);
}

static void test_probe_hang(void) {
  TpGpuProbe p;
  double t0 = tp_gpu_monotonic();
  if (probe_scenario("hang", 0.5, &p) != 0) {
    CHECK(0);
    return;
  }
  double took = tp_gpu_monotonic() - t0;
  TpGpuBackend *hip = &p.backends[TP_GPU_HIP];
  CHECK_INT(hip->status, TP_GPU_TIMEOUT);
  CHECK(strstr(hip->reason, "no answer within 0.5 s during hipGetDeviceCount") != NULL);
  CHECK(took >= 0.45 && took < 5.0);
  // The other libraries answered although one hung.
  CHECK_INT(p.backends[TP_GPU_NVML].status, TP_GPU_OK);
  CHECK_INT(count_devs(&p, TP_GPU_NVML), 8);
  tp_gpu_probe_free(&p);
}

static void test_probe_stub(void) {
  TpGpuProbe p;
  if (probe_scenario("stub", 10, &p) != 0) {
    CHECK(0);
    return;
  }
  TpGpuBackend *cu = &p.backends[TP_GPU_CUDA];
  CHECK_INT(cu->status, TP_GPU_FAILED);
  CHECK_INT(cu->code, 34);
  CHECK_STR(cu->code_name, "CUDA_ERROR_STUB_LIBRARY");
  CHECK(strstr(cu->reason, "stub library") != NULL);
  tp_gpu_probe_free(&p);
}

// The real libraries of this machine (Debian's HIP 5.2.3 and ROCm SMI, the CUDA 13 toolkit)
// when they are installed; without them the checks are reported as skipped.
static void test_probe_real(void) {
  void *h = dlopen("libamdhip64.so.5", RTLD_NOW | RTLD_LOCAL);
  TpGpuProbe p;
  TpGpuProbeOpts o = {.libpath = "", .apis = (1u << TP_GPU_HIP) | (1u << TP_GPU_RSMI)};
  TpError err = {0};
  if (!h) {
    printf("skipped: libamdhip64.so.5 not installed\n");
  } else {
    CHECK_INT(tp_gpu_probe(&o, &p, &err), 0);
    TpGpuBackend *hip = &p.backends[TP_GPU_HIP];
    // No /dev/kfd: hipGetDeviceCount answers hipErrorNoDevice (GPU_PROBING.md §8).
    CHECK_INT(hip->status, TP_GPU_FAILED);
    CHECK_INT(hip->code, 100);
    CHECK_STR(hip->code_name, "hipErrorNoDevice");
    CHECK_INT(count_devs(&p, TP_GPU_HIP), 0);
    TpGpuBackend *rsmi = &p.backends[TP_GPU_RSMI];
    if (rsmi->status == TP_GPU_ABSENT) {
      printf("skipped: librocm_smi64 not installed\n");
    } else if (rsmi->status == TP_GPU_CRASHED &&
               strstr(buf_str(&rsmi->output), "real___cxa_throw") != NULL) {
      // ROCm SMI throws a C++ exception internally; ASan in a C program without libstdc++
      // cannot intercept it and aborts the child (which the probe reports as a crash).
      printf("skipped: sanitizer build cannot intercept C++ exceptions of ROCm SMI\n");
    } else {
      CHECK_INT(rsmi->status, TP_GPU_FAILED);
      CHECK_INT(rsmi->code, 8);  // RSMI_STATUS_INIT_ERROR, and its stderr kept as data
      CHECK_STR(rsmi->code_name, "RSMI_STATUS_INIT_ERROR");
      CHECK(strstr(buf_str(&rsmi->output), "rsmi_init") != NULL);
    }
    CHECK(p.elapsed_s < 1.0);
    tp_gpu_probe_free(&p);
    dlclose(h);
  }
  // A toolkit runtime off the loader path, found through CUDA_HOME: a copy of the fake CUDA 12
  // runtime in <tree>/lib64 answers (after any system CUDA 13 runtime refused for lack of a
  // driver). System search, as users run it.
  char tree[] = "/tmp/tplua-gpu-tk.XXXXXX";
  CHECK(mkdtemp(tree) != NULL);
  mkdirs(tree, "lib64");
  char cmd[3000];
  snprintf(cmd, sizeof cmd, "cp '%s/h100x8/libcudart.so.12' '%s/lib64/'", fakes, tree);
  CHECK_INT(system(cmd), 0);
  setenv("CUDA_HOME", tree, 1);
  o = (TpGpuProbeOpts){.apis = 1u << TP_GPU_CUDART};
  CHECK_INT(tp_gpu_probe(&o, &p, &err), 0);
  TpGpuBackend *rt = &p.backends[TP_GPU_CUDART];
  CHECK(strncmp(rt->library, tree, strlen(tree)) == 0);
  CHECK_INT(rt->status, TP_GPU_OK);
  CHECK_INT(count_devs(&p, TP_GPU_CUDART), 8);
  tp_gpu_probe_free(&p);
  unsetenv("CUDA_HOME");
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", tree);
  CHECK_INT(system(cmd), 0);
  // The CUDA 13 toolkit of this machine, where there is one: found (loader path or
  // /usr/local/cuda*), and without a driver it answers 35.
  struct stat st;
  if (stat("/usr/local/cuda-13.0/lib64/libcudart.so.13", &st) != 0) {
    printf("skipped: no CUDA 13 toolkit at /usr/local/cuda-13.0\n");
    return;
  }
  CHECK_INT(tp_gpu_probe(&o, &p, &err), 0);
  rt = &p.backends[TP_GPU_CUDART];
  CHECK(strncmp(rt->library, "/usr/local/cuda-13.0/", 21) == 0);
  CHECK_STR(rt->runtime_version, "13.0");
  if (access("/dev/nvidiactl", F_OK) != 0) {
    CHECK_INT(rt->status, TP_GPU_FAILED);
    CHECK_INT(rt->code, 35);
    CHECK_STR(rt->code_name, "cudaErrorInsufficientDriver");
  }
  tp_gpu_probe_free(&p);
}

static void wait_samples(TpGpuSampler *s, size_t want) {
  TpError err = {0};
  CHECK_INT(tp_gpu_sampler_wait(s, want, 10.0, &err), 0);
}

static void sampler_scenario(const char *scenario, size_t ndev, double p0, double step,
                             TpGpuEnergyMethod method, double temp0, double clock_mhz) {
  char dir[1200];
  snprintf(dir, sizeof dir, "%s/%s", fakes, scenario);
  TpGpuSamplerOpts o = {.interval_s = 0.02, .libpath = dir};
  TpGpuSampler *s = NULL;
  TpError err = {0};
  int rc = tp_gpu_sampler_start(&o, &s, &err);
  CHECK_INT(rc, 0);
  if (rc != 0) {
    fprintf(stderr, "sampler %s: %s\n", scenario, err.msg);
    return;
  }
  CHECK(tp_gpu_sampler_running(s));
  size_t nd = 0;
  const TpGpuSamplerDevice *devs = tp_gpu_sampler_devices(s, &nd);
  CHECK_INT(nd, ndev);
  wait_samples(s, ndev * 6);
  CHECK_INT(tp_gpu_sampler_stop(s, &err), 0);
  CHECK(!tp_gpu_sampler_running(s));
  CHECK_INT(tp_gpu_sampler_stop(s, &err), 0);  // idempotent
  size_t n = 0;
  const TpGpuSample *x = tp_gpu_sampler_samples(s, &n);
  CHECK(n >= ndev * 6);
  for (size_t d = 0; d < nd; d++) {
    CHECK(devs[d].pci_bus_id[0] != '\0');
    CHECK(devs[d].memory_total > 0);
    TpGpuEnergy e;
    CHECK_INT(tp_gpu_energy(x, n, (int)d, 0, 1e12, &e, &err), 0);
    CHECK_INT(e.method, method);
    CHECK(e.nsamples >= 6);
    double watts = p0 + step * (double)(devs[d].index);
    // Constant power: the energy over the readings is power x time, whichever the method.
    CHECK_NUM(e.joules, watts * (e.t_last - e.t_first), 1e-3);
    for (size_t i = 0; i < n; i++) {
      if (x[i].device == (int)d) {
        CHECK_NUM(x[i].power_w, watts, 1e-9);
        CHECK_NUM(x[i].temperature_c, temp0 + devs[d].index, 1e-9);
        CHECK_NUM(x[i].sm_clock_mhz, clock_mhz, 1e-9);
        CHECK(x[i].memory_used > 0 && x[i].utilization > 0);
        CHECK(x[i].wall > 1.6e9);
        break;
      }
    }
  }
  tp_gpu_sampler_free(s);
}

static void test_sampler(void) {
  sampler_scenario("h100x8", 8, 400.0, 10.0, TP_GPU_ENERGY_COUNTER, 40.0, 1755.0);
  sampler_scenario("mi300x8", 8, 600.0, 1.0, TP_GPU_ENERGY_COUNTER, 70.0, 2100.0);
  // Mixed: NVML A100s with a counter and ROCm SMI 5 devices without (trapezoid), checked apart.
  char dir[1200];
  snprintf(dir, sizeof dir, "%s/mixed", fakes);
  TpGpuSamplerOpts o = {.interval_s = 0.02, .libpath = dir, .apis = 1u << TP_GPU_RSMI};
  TpGpuSampler *s = NULL;
  TpError err = {0};
  CHECK_INT(tp_gpu_sampler_start(&o, &s, &err), 0);
  if (s) {
    wait_samples(s, 4 * 6);
    CHECK_INT(tp_gpu_sampler_stop(s, &err), 0);
    size_t n = 0;
    const TpGpuSample *x = tp_gpu_sampler_samples(s, &n);
    TpGpuEnergy e;
    CHECK_INT(tp_gpu_energy(x, n, 3, 0, 1e12, &e, &err), 0);
    CHECK_INT(e.method, TP_GPU_ENERGY_TRAPEZOID);
    CHECK_NUM(e.joules, 603.0 * (e.t_last - e.t_first), 1e-9);
    CHECK_NUM(x[0].temperature_c, 50.0, 1e-9);   // edge sensor: the old variant has no junction
    CHECK_NUM(x[0].sm_clock_mhz, 2100.0, 1e-9);  // 5.x rsmi_frequencies_t layout
    CHECK(strstr(tp_gpu_sampler_notes(s), "energy counter not available") != NULL);
    tp_gpu_sampler_free(s);
  }
  // Nothing to sample: a clear error naming each library's answer.
  char empty[] = "/tmp/tplua-gpu-empty.XXXXXX";
  CHECK(mkdtemp(empty) != NULL);
  o = (TpGpuSamplerOpts){.libpath = empty};
  s = NULL;
  CHECK_INT(tp_gpu_sampler_start(&o, &s, &err), TP_ENOGPU);
  CHECK(s == NULL);
  CHECK(strstr(err.msg, "no device to sample") != NULL);
  CHECK(strstr(err.msg, "nvml: libnvidia-ml.so.1: not found") != NULL);
  rmdir(empty);
  // Waiting for more readings than can come in time ends with a timeout, not a hang.
  snprintf(dir, sizeof dir, "%s/h100x8", fakes);
  o = (TpGpuSamplerOpts){.interval_s = 10.0, .libpath = dir};
  CHECK_INT(tp_gpu_sampler_start(&o, &s, &err), 0);
  double t0 = tp_gpu_monotonic();
  CHECK_INT(tp_gpu_sampler_wait(s, 1000, 0.2, &err), TP_ETIMEOUT);
  CHECK(tp_gpu_monotonic() - t0 < 2.0);
  CHECK(strstr(err.msg, "of 1000 readings after 0.2 s") != NULL);
  // Freeing a running sampler kills its child.
  tp_gpu_sampler_free(s);
}

static void test_energy(void) {
  TpGpuSample x[6];
  for (int i = 0; i < 6; i++) {
    x[i] = (TpGpuSample){
        .t = 10.0 + i, .device = 0, .power_w = 100.0 + 10.0 * i, .energy_j = 1000.0 + 105.0 * i};
  }
  TpGpuEnergy e;
  TpError err = {0};
  CHECK_INT(tp_gpu_energy(x, 6, 0, 0, 100, &e, &err), 0);
  CHECK_INT(e.method, TP_GPU_ENERGY_COUNTER);
  CHECK_NUM(e.joules, 525.0, 1e-12);
  CHECK_NUM(e.t_first, 10.0, 0);
  CHECK_NUM(e.t_last, 15.0, 0);
  // A window selects readings 1..3.
  CHECK_INT(tp_gpu_energy(x, 6, 0, 11.0, 13.0, &e, &err), 0);
  CHECK_INT(e.nsamples, 3);
  CHECK_NUM(e.joules, 210.0, 1e-12);
  // A counter that goes backwards (reset) falls back to the trapezoid over power.
  x[3].energy_j = 5.0;
  CHECK_INT(tp_gpu_energy(x, 6, 0, 0, 100, &e, &err), 0);
  CHECK_INT(e.method, TP_GPU_ENERGY_TRAPEZOID);
  CHECK_NUM(e.joules, 105 + 115 + 125 + 135 + 145, 1e-12);
  // No counter at all, and a missing power reading: that interval is left out.
  for (int i = 0; i < 6; i++) {
    x[i].energy_j = NAN;
  }
  x[5].power_w = NAN;
  CHECK_INT(tp_gpu_energy(x, 6, 0, 0, 100, &e, &err), 0);
  CHECK_INT(e.method, TP_GPU_ENERGY_TRAPEZOID);
  CHECK_NUM(e.joules, 105 + 115 + 125 + 135, 1e-12);
  // Another device, one reading, an empty window, a reversed window.
  CHECK_INT(tp_gpu_energy(x, 6, 1, 0, 100, &e, &err), 0);
  CHECK_INT(e.method, TP_GPU_ENERGY_NONE);
  CHECK_INT(tp_gpu_energy(x, 6, 0, 12.0, 12.5, &e, &err), 0);
  CHECK_INT(e.method, TP_GPU_ENERGY_NONE);
  CHECK_INT(e.nsamples, 1);
  CHECK_INT(tp_gpu_energy(x, 6, 0, 5.0, 4.0, &e, &err), TP_EINVAL);
  CHECK(strstr(err.msg, "window ends") != NULL);
}

int main(void) {
  const char *build = getenv("TPLUA_BUILD_DIR");
  snprintf(fakes, sizeof fakes, "%s/tests/fakes", build ? build : "build");
  // The fakes scenarios must see only themselves.
  static const char *const clear[] = {
      "CUDA_HOME",  "CUDA_PATH",    "ROCM_PATH", "HIP_PATH",   "TPLUA_GPU_LIBPATH", "TPLUA_NVML",
      "TPLUA_CUDA", "TPLUA_CUDART", "TPLUA_HIP", "TPLUA_RSMI", "TPLUA_NCCL",        "TPLUA_RCCL"};
  for (size_t i = 0; i < sizeof clear / sizeof clear[0]; i++) {
    unsetenv(clear[i]);
  }
  test_names();
  test_formats();
  test_escape_roundtrip();
  test_parse_good();
  test_parse_bad();
  test_search();
  test_energy();
  test_probe_h100();
  test_probe_mi300x();
  test_probe_mixed();
  test_probe_errmid();
  test_probe_hang();
  test_probe_stub();
  test_probe_real();
  test_sampler();
  return CHECK_DONE();
}
