// Unit tests of engine/logscan: chunk-boundary independence, prefixes, number forms, failure
// signatures, long lines, NUL bytes, invalid UTF-8, empty input, the multi-rank rule and hooks.
#include <errno.h>
#include <locale.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "logscan.h"

static char *read_file(const char *path, size_t *len) {
  FILE *f = fopen(path, "rb");
  if (!f) {
    return NULL;
  }
  TpBuf b = {0};
  char tmp[65536];
  size_t n;
  while ((n = fread(tmp, 1, sizeof tmp, f)) > 0) {
    tp_buf_append(&b, tmp, n);
  }
  fclose(f);
  *len = b.len;
  if (!b.data) {
    b.data = malloc(1);
  }
  return b.data;
}

static const char *source_dir(void) {
  const char *d = getenv("TPLUA_SOURCE_DIR");
  return d ? d : ".";
}

// Parses `data` fed in chunks of the given sizes (cycled; 0 = everything at once).
static TpLogScan *scan_chunks(const char *data, size_t len, const size_t *sizes, size_t nsizes,
                              const TpLogScanOpts *opts) {
  TpError err = {0};
  TpLogScan *s = tp_logscan_new(opts, &err);
  if (!s) {
    return NULL;
  }
  size_t pos = 0, k = 0;
  while (pos < len) {
    size_t n = nsizes ? sizes[k++ % nsizes] : len;
    if (n == 0 || n > len - pos) {
      n = len - pos;
    }
    if (tp_logscan_feed(s, data + pos, n, &err) != 0) {
      tp_logscan_free(s);
      return NULL;
    }
    pos += n;
  }
  if (tp_logscan_finish(s, &err) != 0) {
    tp_logscan_free(s);
    return NULL;
  }
  return s;
}

static TpLogScan *scan_text(const char *text) {
  return scan_chunks(text, strlen(text), NULL, 0, NULL);
}

// A textual fingerprint of everything a scan produced, for equality across chunkings.
static void fingerprint(const TpLogScan *s, TpBuf *out) {
  out->len = 0;
  int cid;
  const char *fmt = tp_logscan_format_name(tp_logscan_format(s, &cid));
  tp_buf_printf(out, "format=%s n=%zu lines=%llu\n", fmt ? fmt : "-", tp_logscan_nrecords(s),
                (unsigned long long)tp_logscan_lines(s));
  for (size_t i = 0; i < tp_logscan_nrecords(s); i++) {
    TpLogRecord r;
    tp_logscan_record(s, i, &r);
    tp_buf_printf(out, "%llx", (unsigned long long)r.present);
    for (int f = 0; f < TP_LOG_F_COUNT; f++) {
      if (r.present >> f & 1) {
        tp_buf_printf(out, " %a", r.v[f]);
      }
    }
    tp_buf_printf(out, " d%d ts=%.*s kv=%zu\n", r.step_time_derived, (int)r.timestamp_len,
                  r.timestamp ? r.timestamp : "", r.kv_len);
  }
  for (size_t i = 0; i < tp_logscan_ndiags(s); i++) {
    const TpLogDiag *d = tp_logscan_diag(s, i);
    tp_buf_printf(out, "diag %s %d %llu %llu %s\n", tp_logscan_diag_kind_name(d->kind),
                  (int)d->severity, (unsigned long long)d->line, (unsigned long long)d->count,
                  d->message);
  }
  for (int w = 0; w < 2; w++) {
    tp_buf_printf(out, "args%d=%zu\n", w, tp_logscan_nargs(s, (TpLogArgDump)w));
  }
  tp_buf_printf(out, "mem=%zu\n", tp_logscan_nmemory(s));
  const TpLogMeta *m = tp_logscan_meta(s);
  tp_buf_printf(out, "meta=%x completed=%d\n", m->present, m->completed);
}

static const char *const fixtures[] = {
    "megatron/awsome_gpt3_abbrev_startup_skipped.log",
    "megatron/issue673_nine_digit_train_iters.log",
    "megatron/issue756_mixtral_memory_report.log",
    "megatron/megatronllm33_nan_loss_missing.log",
    "megatron/nccl743_bert_old_timers_skipped.log",
    "nemo/awsome_k8s_nemo2_pid_prefix.log",
    "nemo/awsome_nemo1_eks_progressbar_overwrite.log",
    "nemo/deeplink_llama3_8b_timestamp_prefix.log",
    "nemo/issue14850_srun_prefix_blank_lines.log",
    "nemo/resiliency_llama3_54m_crash_restart.log",
    "primus/dsv4_p34_iter_lines.txt",
    "primus/dsv4_smoke_ep8_pp1_full.log",
    "primus/issue349_torchtitan_backend_hip_oom.log",
    "torchtitan/pr1884_llama3_8b_multirank.log",
    "torchtitan/qwen3_14b_b200_nocolor_logfreq1.log",
    "torchtitan/qwen3_14b_b200_oom_after_step1.log",
};

// Same records and diagnostics whatever the chunking: whole, 1 byte at a time, random sizes,
// and through the file reader.
static void test_chunking(void) {
  uint64_t rng = 88172645463325252ull;
  for (size_t f = 0; f < sizeof fixtures / sizeof fixtures[0]; f++) {
    char path[1024];
    snprintf(path, sizeof path, "%s/tests/fixtures/logs/%s", source_dir(), fixtures[f]);
    size_t len;
    char *data = read_file(path, &len);
    CHECK(data != NULL);
    if (!data) {
      continue;
    }
    TpLogScan *whole = scan_chunks(data, len, NULL, 0, NULL);
    CHECK(whole != NULL && tp_logscan_nrecords(whole) > 0);
    TpBuf a = {0}, b = {0};
    fingerprint(whole, &a);
    size_t one = 1;
    TpLogScan *bytes = scan_chunks(data, len, &one, 1, NULL);
    fingerprint(bytes, &b);
    CHECK_STR(tp_buf_cstr(&b), tp_buf_cstr(&a));
    tp_logscan_free(bytes);
    for (int round = 0; round < 4; round++) {
      size_t sizes[64];
      for (size_t i = 0; i < 64; i++) {
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        sizes[i] = 1 + (size_t)(rng % (round == 0 ? 7 : round == 1 ? 97 : 4099));
      }
      TpLogScan *r = scan_chunks(data, len, sizes, 64, NULL);
      fingerprint(r, &b);
      CHECK_STR(tp_buf_cstr(&b), tp_buf_cstr(&a));
      tp_logscan_free(r);
    }
    TpError err;
    TpLogScan *fs = tp_logscan_new(NULL, &err);
    CHECK_INT(tp_logscan_feed_file(fs, path, &err), 0);
    CHECK_INT(tp_logscan_finish(fs, &err), 0);
    fingerprint(fs, &b);
    CHECK_STR(tp_buf_cstr(&b), tp_buf_cstr(&a));
    tp_logscan_free(fs);
    tp_buf_free(&a);
    tp_buf_free(&b);
    tp_logscan_free(whole);
    free(data);
  }
}

static bool rec(const TpLogScan *s, size_t i, TpLogRecord *r) {
  return tp_logscan_record(s, i, r);
}

static double field(const TpLogScan *s, size_t i, TpLogField f) {
  TpLogRecord r;
  if (!rec(s, i, &r) || !(r.present >> f & 1)) {
    return -12345.0;
  }
  return r.v[f];
}

static bool has(const TpLogScan *s, size_t i, TpLogField f) {
  TpLogRecord r;
  return rec(s, i, &r) && (r.present >> f & 1);
}

static const TpLogDiag *diag(const TpLogScan *s, TpLogDiagKind k) {
  for (size_t i = 0; i < tp_logscan_ndiags(s); i++) {
    if (tp_logscan_diag(s, i)->kind == k) {
      return tp_logscan_diag(s, i);
    }
  }
  return NULL;
}

#define MG(it)                                                                                     \
  " iteration " it                                                                                 \
  "/     100 | consumed samples:          256 | elapsed time per iteration (ms): "                 \
  "5630.1 | learning rate: 4.000000E-07 | global batch size:   128 | lm loss: 2.021530E+00 | "     \
  "loss scale: 1.0 | grad norm: 6.895 | number of skipped iterations:   0 | number of nan "        \
  "iterations:   0 |"

// Each launcher and logger prefix in front of a Megatron line, alone and stacked.
static void test_prefixes(void) {
  static const struct {
    const char *line;
    long rank;  // -1: no rank
    const char *ts;
  } cases[] = {
      {MG("2"), -1, NULL},
      {"[default3]:" MG("2"), 3, NULL},
      {"[rank5]:" MG("2"), 5, NULL},
      {"[default2]:[rank2]:" MG("2"), 2, NULL},
      {" 0: " MG("2"), 0, NULL},
      {"   1:  " MG("2"), 1, NULL},
      {"(pretraining, pid=4112) " MG("2"), -1, NULL},
      {"ining-demo/0 " MG("2"), -1, NULL},
      {"ining-demo/0 [default0]:" MG("2"), 0, NULL},
      {"[2025-11-20T14:55:23+08:00] retraining/0 " MG("2"), -1, "2025-11-20T14:55:23+08:00"},
      {"[20260507 13:08:16][rank-7/8][DEBUG]    [---------------utils.py:425] : "
       "[2026-05-07 13:08:16.540024]" MG("2"),
       7, "2026-05-07 13:08:16.540024"},
      {"[20251211 14:23:21][rank-1/8][INFO ] " MG("2"), 1, "20251211 14:23:21"},
      {"   " MG("2"), -1, NULL},
      {"\x1b[32m[2024-04-06 02:55:45]\x1b[0m" MG("2"), -1, "2024-04-06 02:55:45"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    TpLogScan *s = scan_text(cases[i].line);
    CHECK_INT(tp_logscan_nrecords(s), 1);
    CHECK_NUM(field(s, 0, TP_LOG_F_ITERATION), 2, 0);
    CHECK_NUM(field(s, 0, TP_LOG_F_STEP_TIME_S), 5.6301, 1e-15);
    CHECK_NUM(field(s, 0, TP_LOG_F_LOSS), 2.02153, 1e-15);
    if (cases[i].rank >= 0) {
      CHECK_NUM(field(s, 0, TP_LOG_F_RANK), cases[i].rank, 0);
    } else {
      CHECK(!has(s, 0, TP_LOG_F_RANK));
    }
    TpLogRecord r;
    rec(s, 0, &r);
    if (cases[i].ts) {
      CHECK(r.timestamp != NULL && r.timestamp_len == strlen(cases[i].ts) &&
            memcmp(r.timestamp, cases[i].ts, r.timestamp_len) == 0);
      CHECK(r.present >> TP_LOG_F_TIME_S & 1);
    } else {
      CHECK(r.timestamp == NULL);
    }
    tp_logscan_free(s);
  }
  // The torchtitan and NeMo logger prefixes give the record's timestamp.
  TpLogScan *s = scan_text(
      "[rank0]:[titan] 2026-05-20 02:22:58,212 - root - INFO - step:  2  loss: 10.60813  "
      "grad_norm: 49.2500  memory: 169.10GiB(94.81%)  tps: 9,891  tflops: 833.38  mfu: 37.04%\n");
  CHECK_INT(tp_logscan_nrecords(s), 1);
  TpLogRecord r;
  rec(s, 0, &r);
  CHECK(r.timestamp && memcmp(r.timestamp, "2026-05-20 02:22:58,212", 23) == 0);
  CHECK_NUM(field(s, 0, TP_LOG_F_TOKENS_PER_S_PER_GPU), 9891, 0);
  tp_logscan_free(s);
}

static double num(const char *text, size_t *used) {
  double v = -777;
  *used = tp_logscan_parse_number(text, strlen(text), &v);
  return v;
}

// Number forms printed by the frameworks, each compared with strtod on the same text.
static void test_numbers(void) {
  static const char *const exact[] = {
      "5630.1",
      "2.021530E+00",
      "6.676E-06",
      "1.499e-07",
      "2e+3",
      "1.28e+6",
      "0.000000E+00",
      "4294967296.0",
      "0.1",
      "7.334521E-01",
      "54250.97802734375",
      "1e22",
      "1e23",
      "9007199254740993",
      "123456789012345678901",
      "4.9e-324",
      "2.2250738585072014e-308",
      "1.7976931348623157e308",
      "0.30000000000000004",
      "-3.5",
      "+42",
      ".5",
      "5.",
      "1.249e+03",
  };
  size_t used;
  for (size_t i = 0; i < sizeof exact / sizeof exact[0]; i++) {
    double v = num(exact[i], &used);
    double w = strtod(exact[i], NULL);
    CHECK_INT(used, strlen(exact[i]));
    CHECK(memcmp(&v, &w, sizeof v) == 0);
  }
  CHECK_NUM(num("9,891", &used), 9891, 0);
  CHECK_INT(used, 5);
  CHECK_NUM(num("14,768,307,200", &used), 14768307200.0, 0);
  CHECK_INT(used, 14);
  CHECK_NUM(num("1,234.5", &used), 1234.5, 0);
  CHECK_NUM(num("888.93  mfu", &used), 888.93, 0);
  CHECK_INT(used, 6);
  // Not thousands separators: the number stops at the comma.
  CHECK_NUM(num("0, 0)", &used), 0, 0);
  CHECK_INT(used, 1);
  CHECK_NUM(num("1,2345", &used), 1, 0);
  CHECK_INT(used, 1);
  CHECK_NUM(num("1234,567", &used), 1234, 0);
  CHECK_INT(used, 4);
  CHECK(isnan(num("nan", &used)) && used == 3);
  CHECK(isnan(num("NaN", &used)) && used == 3);
  CHECK(isinf(num("inf", &used)) && num("inf", &used) > 0);
  CHECK(isinf(num("-inf", &used)) && num("-inf", &used) < 0 && used == 4);
  CHECK(isinf(num("Infinity", &used)) && used == 8);
  CHECK(isinf(num("1e400", &used)));
  CHECK_INT(tp_logscan_parse_number("N/A", 3, &(double){0}), 0);
  CHECK_INT(tp_logscan_parse_number("None", 4, &(double){0}), 0);
  CHECK_INT(tp_logscan_parse_number("-", 1, &(double){0}), 0);
  CHECK_INT(tp_logscan_parse_number(".", 1, &(double){0}), 0);
  CHECK_INT(tp_logscan_parse_number("nanx", 4, &(double){0}), 0);
  CHECK_INT(tp_logscan_parse_number("", 0, &(double){0}), 0);
  // Random decimal texts against strtod (correct rounding).
  uint64_t rng = 0x9e3779b97f4a7c15ull;
  int mismatches = 0;
  for (int i = 0; i < 200000; i++) {
    char buf[64];
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    int digits = 1 + (int)(rng % 25);
    int point = (int)((rng >> 8) % (unsigned)(digits + 1));
    int e = (int)((rng >> 16) % 80) - 40;
    size_t b = 0;
    uint64_t r2 = rng;
    for (int d = 0; d < digits; d++) {
      if (d == point && d > 0) {
        buf[b++] = '.';
      }
      r2 = r2 * 6364136223846793005ull + 1442695040888963407ull;
      buf[b++] = (char)('0' + (r2 >> 33) % 10);
    }
    b += (size_t)snprintf(buf + b, sizeof buf - b, "e%d", e);
    double v;
    size_t u = tp_logscan_parse_number(buf, b, &v);
    double w = strtod(buf, NULL);
    if (u != b || memcmp(&v, &w, sizeof v) != 0) {
      mismatches++;
    }
  }
  CHECK_INT(mismatches, 0);
  // The process locale does not change how numbers are read.
  if (setlocale(LC_NUMERIC, "de_DE.UTF-8") || setlocale(LC_NUMERIC, "fr_FR.UTF-8")) {
    CHECK_NUM(num("5630.1", &used), 5630.1, 0);
    CHECK_NUM(num("12345678901234567890123.5", &used), 1.2345678901234568e22, 1e-15);
    setlocale(LC_NUMERIC, "C");
  }
  // Timestamps.
  double t;
  CHECK(tp_logscan_parse_time("1970-01-01 00:00:00", 19, &t) && t == 0);
  CHECK(tp_logscan_parse_time("2024-04-06 02:55:45", 19, &t) && t == 1712372145.0);
  CHECK(tp_logscan_parse_time("20240406 02:55:45", 17, &t) && t == 1712372145.0);
  CHECK(tp_logscan_parse_time("2024-04-06T10:55:45+08:00", 25, &t) && t == 1712372145.0);
  CHECK(tp_logscan_parse_time("2026-05-07 13:08:16.540024", 26, &t));
  CHECK_NUM(t, 1778159296.540024, 1e-15);
  CHECK(tp_logscan_parse_time("2026-05-20 02:22:56,141", 23, &t));
  CHECK_NUM(t - floor(t), 0.141, 1e-6);
  CHECK(!tp_logscan_parse_time("2024-13-06 02:55:45", 19, &t));
  CHECK(!tp_logscan_parse_time("2024-04-06", 10, &t));
  CHECK(!tp_logscan_parse_time("garbage", 7, &t));
}

// One line per failure signature: its kind and severity.
static void test_signatures(void) {
  static const struct {
    const char *line;
    TpLogDiagKind kind;
    TpLogSeverity sev;
  } cases[] = {
      {"[rank0]: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 706.00 MiB. GPU 0 "
       "has a total capacity of 178.35 GiB",
       TP_LOG_D_OOM, TP_LOG_SEV_ERROR},
      {"torch.OutOfMemoryError: HIP out of memory. Tried to allocate 11.74 GiB.", TP_LOG_D_OOM,
       TP_LOG_SEV_ERROR},
      {"RuntimeError: CUDA error: out of memory", TP_LOG_D_OOM, TP_LOG_SEV_ERROR},
      {"Out of memory: Killed process 4242 (python) total-vm:1234kB", TP_LOG_D_OOM,
       TP_LOG_SEV_ERROR},
      {"slurmstepd: error: Detected 1 oom-kill event(s) in StepId=123.0", TP_LOG_D_OOM,
       TP_LOG_SEV_ERROR},
      {"srun: error: node12: task 3: Out Of Memory", TP_LOG_D_OOM, TP_LOG_SEV_ERROR},
      {"Signal 9 (SIGKILL) received by PID 1234", TP_LOG_D_OOM, TP_LOG_SEV_ERROR},
      {"  exitcode  : -9 (pid: 206)", TP_LOG_D_OOM, TP_LOG_SEV_ERROR},
      {"run.sh: line 5: 12345 Killed                  python train.py", TP_LOG_D_OOM,
       TP_LOG_SEV_ERROR},
      {"[W CUDACachingAllocator.cpp:495] expandable_segments: memory mapping failed with OOM",
       TP_LOG_D_MEMORY_PRESSURE, TP_LOG_SEV_WARNING},
      {"[titan] 2026-05-22 18:16:50,101 - root - WARNING - 3 CUDA memory allocation retries.",
       TP_LOG_D_MEMORY_PRESSURE, TP_LOG_SEV_WARNING},
      {"[rank3]:[E ProcessGroupNCCL.cpp:607] [Rank 3] Watchdog caught collective operation "
       "timeout: WorkNCCL(SeqNum=1, OpType=ALLREDUCE, Timeout(ms)=600000) ran for 600012 ms",
       TP_LOG_D_NCCL_TIMEOUT, TP_LOG_SEV_ERROR},
      {"Some NCCL operations have failed or timed out.", TP_LOG_D_NCCL_TIMEOUT, TP_LOG_SEV_ERROR},
      {"To avoid data inconsistency, we are taking the entire process down.", TP_LOG_D_NCCL_TIMEOUT,
       TP_LOG_SEV_ERROR},
      {"terminate called after throwing an instance of 'c10::DistBackendError'",
       TP_LOG_D_NCCL_TIMEOUT, TP_LOG_SEV_ERROR},
      {"torch.distributed.DistBackendError: NCCL error in: ../torch/csrc/distributed/c10d/"
       "ProcessGroupNCCL.cpp:1970, unhandled system error",
       TP_LOG_D_NCCL_ERROR, TP_LOG_SEV_ERROR},
      {"ncclInternalError: Internal check failed.", TP_LOG_D_NCCL_ERROR, TP_LOG_SEV_ERROR},
      {"node1:123:456 [0] NCCL WARN NET/IB : Got completion with error 12", TP_LOG_D_NCCL_WARNING,
       TP_LOG_SEV_WARNING},
      {"RuntimeError: CUDA error: an illegal memory access was encountered", TP_LOG_D_GPU_FAULT,
       TP_LOG_SEV_ERROR},
      {"RuntimeError: CUBLAS_STATUS_EXECUTION_FAILED when calling cublasGemmEx", TP_LOG_D_GPU_FAULT,
       TP_LOG_SEV_ERROR},
      {"RuntimeError: HIP error: invalid device function", TP_LOG_D_GPU_FAULT, TP_LOG_SEV_ERROR},
      {"[aiter] [HIP error](invalid resource handle)", TP_LOG_D_GPU_FAULT, TP_LOG_SEV_ERROR},
      {"Memory access fault by GPU node-2 (Agent handle: 0x1) on address 0x7f. Reason: Page not "
       "present",
       TP_LOG_D_GPU_FAULT, TP_LOG_SEV_ERROR},
      {"HSA_STATUS_ERROR_EXCEPTION: An HSAIL operation resulted in a hardware exception.",
       TP_LOG_D_GPU_FAULT, TP_LOG_SEV_ERROR},
      {"Unexpected result nan (message='found NaN in local forward loss calculation')",
       TP_LOG_D_NAN_LOSS, TP_LOG_SEV_ERROR},
      {"AssertionError: Rank 3: found NaN in local grad norm for bucket #0", TP_LOG_D_NAN_LOSS,
       TP_LOG_SEV_ERROR},
      {"found Inf in local forward loss calculation", TP_LOG_D_NAN_LOSS, TP_LOG_SEV_ERROR},
      {"WARNING: Spiky loss detected at iteration 1200", TP_LOG_D_LOSS_SPIKE, TP_LOG_SEV_WARNING},
      {"Traceback (most recent call last):", TP_LOG_D_CRASH, TP_LOG_SEV_ERROR},
      {"torch.distributed.elastic.multiprocessing.errors.ChildFailedError:", TP_LOG_D_CRASH,
       TP_LOG_SEV_ERROR},
      {"Root Cause (first observed failure):", TP_LOG_D_CRASH, TP_LOG_SEV_ERROR},
      {"[ERROR] failed (exitcode: 1) local_rank: 0 (pid: 1) of binary: /usr/bin/python",
       TP_LOG_D_CRASH, TP_LOG_SEV_ERROR},
      {"Segmentation fault (core dumped)", TP_LOG_D_CRASH, TP_LOG_SEV_ERROR},
      {"[NeMo I 2025-01-01 00:00:00 preemption:1] Received signal 15, initiating graceful stop",
       TP_LOG_D_PREEMPTED, TP_LOG_SEV_WARNING},
      {"Preemption detected, saving checkpoint and exiting", TP_LOG_D_PREEMPTED,
       TP_LOG_SEV_WARNING},
      {"[exiting program after receiving SIGTERM.] datetime: 2024-01-01 00:00:00",
       TP_LOG_D_PREEMPTED, TP_LOG_SEV_WARNING},
      {"[exiting program after 230 minutes] datetime: 2024-01-01 00:00:00", TP_LOG_D_TIMEOUT,
       TP_LOG_SEV_WARNING},
      {"slurmstepd: error: *** JOB 42 ON node1 CANCELLED AT 2024-01-01T00:00:00 DUE TO TIME "
       "LIMIT ***",
       TP_LOG_D_TIMEOUT, TP_LOG_SEV_WARNING},
      {"slurmstepd: error: *** JOB 42 ON node1 CANCELLED AT 2024-01-01T00:00:00 DUE TO "
       "PREEMPTION ***",
       TP_LOG_D_PREEMPTED, TP_LOG_SEV_WARNING},
      {"slurmstepd: error: *** JOB 42 ON node1 CANCELLED AT 2024-01-01T00:00:00 DUE TO NODE "
       "FAILURE, SEE SLURMCTLD LOG FOR DETAILS ***",
       TP_LOG_D_NODE_FAILURE, TP_LOG_SEV_WARNING},
      {"slurmstepd: error: *** STEP 42.0 ON node1 CANCELLED AT 2024-01-01T00:00:00 ***",
       TP_LOG_D_CANCELLED, TP_LOG_SEV_WARNING},
      {"srun: error: Node failure on node17", TP_LOG_D_NODE_FAILURE, TP_LOG_SEV_WARNING},
      {"W0520 09:09:27.995000 2197503 torch/distributed/elastic/agent/server/api.py:753] Received "
       "15 death signal, shutting down workers",
       TP_LOG_D_SIGNAL, TP_LOG_SEV_WARNING},
      {"torch.distributed.elastic.multiprocessing.api.SignalException: Process 2197503 got "
       "signal: 15",
       TP_LOG_D_SIGNAL, TP_LOG_SEV_WARNING},
      {"[ERROR] failed (exitcode: -15) local_rank: 0 (pid: 1) of binary: /usr/bin/python",
       TP_LOG_D_SIGNAL, TP_LOG_SEV_WARNING},
      {"Warning  Evicted  The node was low on resource: memory.", TP_LOG_D_PREEMPTED,
       TP_LOG_SEV_WARNING},
      {"  restart_count=1", TP_LOG_D_RESTART, TP_LOG_SEV_WARNING},
      {"[default] Worker group FAILED. 3/3 attempts left; will restart worker group",
       TP_LOG_D_RESTART, TP_LOG_SEV_WARNING},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    TpLogScan *s = scan_text(cases[i].line);
    const TpLogDiag *d = diag(s, cases[i].kind);
    CHECK(d != NULL);
    if (d) {
      CHECK_INT(d->severity, cases[i].sev);
      CHECK_INT(d->line, 1);
    } else {
      fprintf(stderr, "  no %s for: %s\n", tp_logscan_diag_kind_name(cases[i].kind), cases[i].line);
    }
    tp_logscan_free(s);
  }
  // One line, one cause.
  TpLogScan *s = scan_text("RuntimeError: CUDA error: out of memory\n");
  CHECK(diag(s, TP_LOG_D_GPU_FAULT) == NULL);
  tp_logscan_free(s);
  s = scan_text("terminate called after throwing an instance of 'c10::DistBackendError'\n");
  CHECK(diag(s, TP_LOG_D_NCCL_ERROR) == NULL);
  tp_logscan_free(s);
  // Not signatures: restart_count=0, exit code 0, a harmless mention of NaN checks.
  s = scan_text("  restart_count=0\n  exitcode  : 0 (pid: 1)\ncheck_for_nan_in_grad=True\n"
                "failed (exitcode: 0)\nUnexpected result 1.5\n");
  CHECK_INT(tp_logscan_ndiags(s), 1);  // unrecognised (no records) only
  CHECK(diag(s, TP_LOG_D_UNRECOGNISED) != NULL);
  tp_logscan_free(s);
  // Megatron NaN: loss segment missing with 0 skipped; the loss-scale search is not NaN.
  s = scan_text(" iteration 5/10 | elapsed time per iteration (ms): 1.0 | learning rate: 1E-04 "
                "| global batch size: 8 | loss scale: 1.0 | grad norm: 1.0 | number of skipped "
                "iterations:   0 | number of nan iterations:   0 |\n");
  CHECK(diag(s, TP_LOG_D_NAN_LOSS) != NULL);
  tp_logscan_free(s);
  s = scan_text(" iteration 5/10 | elapsed time per iteration (ms): 1.0 | learning rate: 1E-04 "
                "| global batch size: 8 | loss scale: 1.0 | number of skipped iterations:   5 | "
                "number of nan iterations:   0 |\n");
  CHECK(diag(s, TP_LOG_D_NAN_LOSS) == NULL);
  CHECK(diag(s, TP_LOG_D_SKIPPED_ITERATIONS) != NULL);
  tp_logscan_free(s);
  // grad norm nan, nan iterations, torchtitan nan loss, NeMo nan loss.
  s = scan_text(MG("1") "\n iteration 2/100 | elapsed time per iteration (ms): 1.0 | lm loss: "
                        "2.0E+00 | loss scale: 1.0 | grad norm: nan | number of skipped "
                        "iterations:   1 | number of nan iterations:   1 |\n");
  const TpLogDiag *d = diag(s, TP_LOG_D_NAN_LOSS);
  CHECK(d && d->line == 2);
  d = diag(s, TP_LOG_D_SKIPPED_ITERATIONS);
  CHECK(d && d->severity == TP_LOG_SEV_WARNING);  // after losses appeared: overflow
  tp_logscan_free(s);
  s = scan_text("step: 10  loss:      nan  grad_norm:     nan  memory: 1.00GiB(1.00%)  tps: 5\n");
  CHECK(diag(s, TP_LOG_D_NAN_LOSS) != NULL);
  CHECK(isnan(field(s, 0, TP_LOG_F_LOSS)));
  tp_logscan_free(s);
  s = scan_text("Training epoch 0, iteration 3/9 | global_step: 3 | reduced_train_loss: nan\n");
  CHECK(diag(s, TP_LOG_D_NAN_LOSS) != NULL);
  tp_logscan_free(s);
}

// Truncation: a cut last line, or records stopping early without an end marker.
static void test_truncated(void) {
  TpLogScan *s = scan_text(MG("2") "\n iteration 3/100 | consumed samples: 384 | elapsed time "
                                   "per iteration (ms): 5410.6 | learning ra");
  CHECK_INT(tp_logscan_nrecords(s), 2);
  CHECK_NUM(field(s, 1, TP_LOG_F_STEP_TIME_S), 5.4106, 1e-15);
  CHECK(!has(s, 1, TP_LOG_F_LR));
  const TpLogDiag *d = diag(s, TP_LOG_D_TRUNCATED);
  CHECK(d && strstr(d->message, "cut") && d->line == 2);
  tp_logscan_free(s);
  // Complete lines that stop before train_iters.
  s = scan_text(MG("2") "\n");
  d = diag(s, TP_LOG_D_TRUNCATED);
  CHECK(d && strstr(d->message, "iteration 2 of 100"));
  tp_logscan_free(s);
  // An end marker makes the same log complete.
  s = scan_text(MG("2") "\n[after training is done] datetime: 2024-01-01 00:00:00\n");
  CHECK(diag(s, TP_LOG_D_TRUNCATED) == NULL);
  CHECK(tp_logscan_meta(s)->completed);
  tp_logscan_free(s);
  // Reaching train_iters is complete too.
  s = scan_text(" iteration      100/     100 | elapsed time per iteration (ms): 1.0 |\n");
  CHECK(diag(s, TP_LOG_D_TRUNCATED) == NULL);
  tp_logscan_free(s);
}

// The file's last line without its line end: the value that runs into the cut end is no value
// (the field is left out, the complete fields before it are kept), a line that lost its anchor
// with the cut is still read, and the log is `truncated` whatever its format; whatever the
// chunking (one-byte feeds too).
#define TT(step, loss, gn)                                                                         \
  "[rank0]:[titan] 2025-09-11 17:33:50,479 - root - INFO - step:  " step "  loss:  " loss          \
  "  grad_norm:  " gn "  memory:  1.07GiB(1.13%)  tps: 346,268  tflops: 24.77  mfu: 2.50%"

static TpLogScan *scan_bytewise(const char *text) {
  size_t one = 1;
  return scan_chunks(text, strlen(text), &one, 1, NULL);
}

static void test_cut_end(void) {
  const char *cases[] = {
      // Megatron: cut inside the lm loss value ("2" of 2.559583E+00).
      MG("2") "\n iteration 3/100 | consumed samples: 384 | elapsed time per iteration (ms): "
              "5410.6 | learning rate: 9.450E-06 | global batch size:   128 | lm loss: 2",
  };
  for (int bytewise = 0; bytewise < 2; bytewise++) {
    TpLogScan *s = bytewise ? scan_bytewise(cases[0]) : scan_text(cases[0]);
    CHECK_INT(tp_logscan_nrecords(s), 2);
    CHECK(!has(s, 1, TP_LOG_F_LOSS));
    CHECK_NUM(field(s, 1, TP_LOG_F_LR), 9.45e-06, 1e-15);
    CHECK_NUM(field(s, 1, TP_LOG_F_GLOBAL_BATCH_SIZE), 128, 0);
    const TpLogDiag *d = diag(s, TP_LOG_D_TRUNCATED);
    CHECK(d && d->line == 2);
    CHECK(diag(s, TP_LOG_D_NAN_LOSS) == NULL);
    tp_logscan_free(s);
  }
  // Megatron: cut inside T of "iteration N/T": no train_iters.
  TpLogScan *s = scan_text(MG("2") "\n iteration 3/  10");
  CHECK_INT(tp_logscan_nrecords(s), 2);
  CHECK_NUM(field(s, 1, TP_LOG_F_ITERATION), 3, 0);
  CHECK(!has(s, 1, TP_LOG_F_TRAIN_ITERS));
  tp_logscan_free(s);
  // torchtitan: cut inside grad_norm; the line lost its " memory: " anchor with the cut.
  const char *tt = TT(
      "4", "6.2345",
      "2.2490") "\n"
                "[rank0]:[titan] 2025-09-11 17:33:50,601 - root - INFO - step:  5  loss:  5.2014  "
                "grad_norm:  2";
  for (int bytewise = 0; bytewise < 2; bytewise++) {
    s = bytewise ? scan_bytewise(tt) : scan_text(tt);
    CHECK(tp_logscan_format(s, NULL) == TP_LOG_FORMAT_TORCHTITAN);
    CHECK_INT(tp_logscan_nrecords(s), 2);
    CHECK_NUM(field(s, 1, TP_LOG_F_ITERATION), 5, 0);
    CHECK_NUM(field(s, 1, TP_LOG_F_LOSS), 5.2014, 1e-15);
    CHECK(!has(s, 1, TP_LOG_F_GRAD_NORM));
    TpLogRecord r;
    CHECK(rec(s, 1, &r) && r.kv_len == 0);  // the cut field is not kept as an extra either
    const TpLogDiag *d = diag(s, TP_LOG_D_TRUNCATED);
    CHECK(d && d->line == 2);
    tp_logscan_free(s);
  }
  // torchtitan: an unprefixed copy of step 5 cut after "grad_norm:": one record, truncated.
  s = scan_text(
      TT("5", "7.0762",
         "46.5000") "\n"
                    "[titan] 2026-02-24 19:46:19,145 - root - INFO - step:  5  loss:  7.0762  "
                    "grad_norm:");
  CHECK_INT(tp_logscan_nrecords(s), 1);
  CHECK_NUM(field(s, 0, TP_LOG_F_GRAD_NORM), 46.5, 1e-15);
  CHECK(diag(s, TP_LOG_D_TRUNCATED) != NULL);
  tp_logscan_free(s);
  // torchtitan: the last line is a prefix and a date, no message: truncated, records kept.
  s = scan_text(
      TT("1", "8.0403", "1.0000") "\n" TT("2", "7.7561", "1.4095") "\n[rank0]:2024-03-20");
  CHECK_INT(tp_logscan_nrecords(s), 2);
  const TpLogDiag *d = diag(s, TP_LOG_D_TRUNCATED);
  CHECK(d && d->line == 3);
  tp_logscan_free(s);
  // NeMo ProgressPrinter: the last value cut.
  s = scan_text("Training epoch 0, iteration 3/9 | lr: 1e-05 | global_step: 3 | "
                "reduced_train_loss: 2");
  CHECK_INT(tp_logscan_nrecords(s), 1);
  CHECK(!has(s, 0, TP_LOG_F_LOSS));
  CHECK_NUM(field(s, 0, TP_LOG_F_LR), 1e-05, 1e-15);
  CHECK(diag(s, TP_LOG_D_TRUNCATED) != NULL);
  tp_logscan_free(s);
  // The same logs with their line end are complete: no field dropped, no truncated.
  s = scan_text(TT("1", "8.0403", "1.0000") "\n" TT("2", "7.7561", "1.4095") "\n");
  CHECK_INT(tp_logscan_nrecords(s), 2);
  CHECK_NUM(field(s, 1, TP_LOG_F_MFU_PCT), 2.5, 1e-15);
  CHECK(diag(s, TP_LOG_D_TRUNCATED) == NULL);
  tp_logscan_free(s);
  s = scan_text("Training epoch 0, iteration 9/9 | global_step: 9 | reduced_train_loss: 2\r\n");
  CHECK_NUM(field(s, 0, TP_LOG_F_LOSS), 2, 0);
  CHECK(diag(s, TP_LOG_D_TRUNCATED) == NULL);
  tp_logscan_free(s);
  // Any format, no record: a last line without its line end is truncated; blanks are not a line.
  s = scan_text("starting\nloading data");
  CHECK(diag(s, TP_LOG_D_TRUNCATED) != NULL);
  CHECK(diag(s, TP_LOG_D_UNRECOGNISED) != NULL);
  tp_logscan_free(s);
  s = scan_text("starting\nloading data\n  ");
  CHECK(diag(s, TP_LOG_D_TRUNCATED) == NULL);
  tp_logscan_free(s);
}

// Format detection without an iteration line: the Primus runner's markers name the format.
static void test_primus_markers(void) {
  TpLogScan *s = scan_text("[2026-07-13 21:55:48] [NODE-0(host-1.example)] [INFO] [main] Loaded "
                           "config: /x/.primus.yaml\n:::MLLOG {\"key\": \"run_start\"}\n");
  CHECK(tp_logscan_format(s, NULL) == TP_LOG_FORMAT_PRIMUS);
  CHECK_INT(tp_logscan_nrecords(s), 0);
  CHECK(diag(s, TP_LOG_D_UNRECOGNISED) != NULL);  // still no iteration record
  tp_logscan_free(s);
  s = scan_text(
      ":::MLLOG {\"key\": \"run_stop\"}\n[direct] torchrun finished successfully (code 0)\n");
  CHECK(tp_logscan_format(s, NULL) == TP_LOG_FORMAT_PRIMUS);
  const TpLogMeta *m = tp_logscan_meta(s);
  CHECK((m->present >> TP_LOG_M_EXIT_CODE & 1) && m->num[TP_LOG_M_EXIT_CODE] == 0);
  tp_logscan_free(s);
  // Look-alikes are not Primus: another bracketed "(...)] [INFO] ", a plain log.
  s = scan_text("[worker(pid=12)] [INFO] started\n[2026-07-13 21:55:48] [INFO] loading\n");
  CHECK(tp_logscan_format(s, NULL) == TP_LOG_FORMAT_NONE);
  tp_logscan_free(s);
  // With records: a Megatron log launched by the runner is Primus, as with Primus' logger.
  s = scan_text("[NODE-0(h)] [INFO] start\n" MG("2") "\n");
  CHECK(tp_logscan_format(s, NULL) == TP_LOG_FORMAT_PRIMUS);
  tp_logscan_free(s);
}

static void fill(char *p, size_t n, char c) {
  memset(p, c, n);
}

// A line over TP_LOGSCAN_MAX_LINE is skipped with a diagnostic; the records around it are kept,
// whether the line arrives whole or in pieces.
static void test_long_line(void) {
  size_t big = TP_LOGSCAN_MAX_LINE + 4321;
  const char *head = MG("2") "\n";
  const char *tail = "\n" MG("3") "\n";
  size_t hl = strlen(head), tl = strlen(tail);
  char *data = malloc(hl + big + tl);
  memcpy(data, head, hl);
  fill(data + hl, big, 'x');
  memcpy(data + hl + big / 2, "iteration 9/9 | lm loss: 1.0E+00 |", 34);  // inside: ignored
  memcpy(data + hl + big, tail, tl);
  size_t len = hl + big + tl;
  size_t sizes[] = {0, 1000, 65536, 3 * 1024 * 1024};
  for (size_t k = 0; k < sizeof sizes / sizeof sizes[0]; k++) {
    TpLogScan *s = scan_chunks(data, len, sizes[k] ? &sizes[k] : NULL, sizes[k] ? 1 : 0, NULL);
    CHECK_INT(tp_logscan_nrecords(s), 2);
    CHECK_NUM(field(s, 0, TP_LOG_F_ITERATION), 2, 0);
    CHECK_NUM(field(s, 1, TP_LOG_F_ITERATION), 3, 0);
    CHECK_NUM(field(s, 1, TP_LOG_F_LINE), 3, 0);
    const TpLogDiag *d = diag(s, TP_LOG_D_LONG_LINE);
    CHECK(d && d->line == 2 && d->count == 1);
    tp_logscan_free(s);
  }
  // The over-long line last and unterminated.
  TpLogScan *s = scan_chunks(data, hl + big, NULL, 0, NULL);
  CHECK_INT(tp_logscan_nrecords(s), 1);
  CHECK(diag(s, TP_LOG_D_LONG_LINE) != NULL);
  tp_logscan_free(s);
  // Exactly at the limit is still examined.
  char *edge = malloc(TP_LOGSCAN_MAX_LINE + 2);
  fill(edge, TP_LOGSCAN_MAX_LINE, ' ');
  const char *mg = MG("7");
  memcpy(edge + TP_LOGSCAN_MAX_LINE - strlen(mg), mg, strlen(mg));
  edge[TP_LOGSCAN_MAX_LINE] = '\n';
  s = scan_chunks(edge, TP_LOGSCAN_MAX_LINE + 1, NULL, 0, NULL);
  CHECK_INT(tp_logscan_nrecords(s), 1);
  CHECK(diag(s, TP_LOG_D_LONG_LINE) == NULL);
  tp_logscan_free(s);
  free(edge);
  free(data);
}

// NUL bytes, invalid UTF-8, binary input, empty input, CRLF and carriage-return refreshes.
static void test_bad_bytes(void) {
  // NUL bytes inside and between lines: valid records still come out.
  static const char nul[] = "garbage\0\0\0\n" MG("2") "\n\0\0" MG("3") "\n";
  TpLogScan *s = scan_chunks(nul, sizeof nul - 1, NULL, 0, NULL);
  CHECK_INT(tp_logscan_nrecords(s), 2);
  CHECK_NUM(field(s, 1, TP_LOG_F_ITERATION), 3, 0);
  const TpLogDiag *d = diag(s, TP_LOG_D_BINARY);
  CHECK(d && d->line == 1);
  tp_logscan_free(s);
  // Invalid UTF-8 in an argument value and an unknown label: stored as valid UTF-8.
  s = scan_text("------------------------ arguments ------------------------\n"
                "  data_path ....................................... /d/\xff\xfe\xc3(\n"
                "  lr .............................................. 3e-4\n"
                "-------------------- end of arguments ---------------------\n"
                " iteration 1/2 | elapsed time per iteration (ms): 2.0 | odd label: \xe2\x82 |\n");
  CHECK_INT(tp_logscan_nargs(s, TP_LOG_ARGS_MEGATRON), 2);
  const char *name, *val;
  size_t nl, vl;
  tp_logscan_arg(s, TP_LOG_ARGS_MEGATRON, 0, &name, &nl, &val, &vl);
  CHECK(nl == 9 && memcmp(name, "data_path", 9) == 0);
  CHECK(vl == 3 + 9 + 1 && memcmp(val, "/d/\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd(", vl) == 0);
  CHECK_INT(tp_logscan_nrecords(s), 1);
  TpLogRecord r;
  rec(s, 0, &r);
  size_t pos = 0;
  TpLogKv kv;
  CHECK(tp_logscan_kv_next(&r, &pos, &kv) && kv.kind == TP_LOG_KV_EXTRA);
  CHECK(kv.str_len == 3 && memcmp(kv.str, "\xef\xbf\xbd", 3) == 0);
  tp_logscan_free(s);
  // Random binary: no crash, flagged.
  char bin[200000];
  uint64_t x = 42;
  for (size_t i = 0; i < sizeof bin; i++) {
    x = x * 6364136223846793005ull + 1;
    bin[i] = (char)(x >> 56);
  }
  s = scan_chunks(bin, sizeof bin, NULL, 0, NULL);
  CHECK(diag(s, TP_LOG_D_BINARY) != NULL);
  CHECK_INT(tp_logscan_nrecords(s), 0);
  tp_logscan_free(s);
  // Empty input.
  s = scan_chunks("", 0, NULL, 0, NULL);
  CHECK_INT(tp_logscan_nrecords(s), 0);
  CHECK(diag(s, TP_LOG_D_EMPTY) != NULL);
  CHECK_INT(tp_logscan_lines(s), 0);
  CHECK(tp_logscan_format(s, NULL) == TP_LOG_FORMAT_NONE);
  tp_logscan_free(s);
  // CRLF line ends and '\r'-separated progress refreshes (one line number for all of them).
  s = scan_text(MG("2") "\r\n" MG("3") "\r\n");
  CHECK_INT(tp_logscan_nrecords(s), 2);
  CHECK_NUM(field(s, 1, TP_LOG_F_LINE), 2, 0);
  CHECK(diag(s, TP_LOG_D_TRUNCATED) && !strstr(diag(s, TP_LOG_D_TRUNCATED)->message, "cut"));
  tp_logscan_free(s);
  s = scan_text("Epoch 0:  10%|#  | 1/10 [00:01<00:09, 1.00it/s, reduced_train_loss=3.100, "
                "global_step=0.000]\rEpoch 0:  20%|##  | 2/10 [00:02<00:08, 2.00it/s, "
                "reduced_train_loss=3.000, global_step=1.000]\rEpoch 0:  20%|## | 2/10 "
                "[00:02<00:08, 2.00it/s]\n");
  CHECK_INT(tp_logscan_nrecords(s), 2);
  CHECK_NUM(field(s, 1, TP_LOG_F_ITERATION), 1, 0);
  CHECK_NUM(field(s, 1, TP_LOG_F_STEP_TIME_S), 0.5, 0);  // from the 2.00it/s rate
  rec(s, 1, &r);
  CHECK(r.step_time_derived);
  CHECK_NUM(field(s, 1, TP_LOG_F_LINE), 1, 0);
  tp_logscan_free(s);
  // OSC-8 hyperlinks and 24-bit colours inside a line.
  s = scan_text(
      "\x1b]8;id=1;file:///x.py\x1b\\x.py\x1b]8;;\x1b\\ \x1b[38;2;1;2;3m" MG("4") "\x1b[39m\n");
  CHECK_INT(tp_logscan_nrecords(s), 1);
  CHECK_NUM(field(s, 0, TP_LOG_F_ITERATION), 4, 0);
  tp_logscan_free(s);
}

// Rule 0.5: rank 0 when it prints, else the lowest; copies without a prefix dropped; restarts kept.
static void test_ranks(void) {
  TpLogScan *s = scan_text(
      "[rank3]:" MG("1") "\n[rank1]:" MG("1") "\n[rank3]:" MG("2") "\n"
                                                                   "[rank1]:" MG("2") "\n");
  CHECK_INT(tp_logscan_nrecords(s), 2);
  CHECK_NUM(field(s, 0, TP_LOG_F_RANK), 1, 0);
  CHECK_NUM(field(s, 1, TP_LOG_F_RANK), 1, 0);
  tp_logscan_free(s);
  // A stream reports rank 3's first record before rank 1 appears; the final set is rank 1's.
  TpLogScanOpts o;
  tp_logscan_opts_init(&o);
  TpError err;
  s = tp_logscan_new(&o, &err);
  const char *a = "[rank3]:" MG("1") "\n";
  tp_logscan_feed(s, a, strlen(a), &err);
  CHECK_INT(tp_logscan_take_new(s), 0);
  CHECK_INT(tp_logscan_nrecords(s), 1);
  const char *b = "[rank1]:" MG("1") "\n";
  tp_logscan_feed(s, b, strlen(b), &err);
  CHECK_INT(tp_logscan_nrecords(s), 1);
  CHECK_INT(tp_logscan_take_new(s), 0);
  CHECK_NUM(field(s, 0, TP_LOG_F_RANK), 1, 0);
  tp_logscan_finish(s, &err);
  tp_logscan_free(s);
  // Forced rank.
  o.rank = 3;
  static const char two[] = "[rank3]:" MG("1") "\n[rank0]:" MG("1") "\n";
  s = scan_chunks(two, sizeof two - 1, NULL, 0, &o);
  CHECK_INT(tp_logscan_nrecords(s), 1);
  CHECK_NUM(field(s, 0, TP_LOG_F_RANK), 3, 0);
  tp_logscan_free(s);
  // Copies without a prefix (consecutive same iteration) dropped; a restart repeats legally.
  s = scan_text(
      MG("1") "\n" MG("1") "\n" MG("2") "\nTraceback (most recent call last):\n" MG("2") "\n");
  CHECK_INT(tp_logscan_nrecords(s), 3);
  tp_logscan_free(s);
}

static int hook_detect(void *ud, const char *line, size_t len) {
  (void)ud;
  return len >= 9 && memcmp(line, "[myfw] s=", 9) == 0 ? 7 : 0;
}

static int hook_line(void *ud, TpLogScan *s, int id, const char *line, size_t len,
                     uint64_t lineno) {
  int *calls = ud;
  (*calls)++;
  (void)lineno;
  if (id != 7 || len < 9 || memcmp(line, "[myfw] s=", 9) != 0) {
    return 0;
  }
  double v;
  size_t used = tp_logscan_parse_number(line + 9, len - 9, &v);
  if (!used) {
    return 0;
  }
  tp_logscan_rec_set(s, TP_LOG_F_ITERATION, v);
  tp_logscan_rec_loss(s, "loss", 4, 1.5);
  tp_logscan_rec_set(s, TP_LOG_F_LOSS, 1.5);
  return 1;
}

// Registered-parser hooks: detection after the built-ins, then every line goes to the hook.
static void test_hooks(void) {
  int calls = 0;
  TpLogScanOpts o;
  tp_logscan_opts_init(&o);
  o.detect = hook_detect;
  o.line = hook_line;
  o.hook_ud = &calls;
  static const char text[] = "start\n\x1b[1m[myfw] s=1\x1b[0m\n[default0]:[myfw] s=2\nnoise\n";
  size_t one = 1;
  TpLogScan *s = scan_chunks(text, sizeof text - 1, &one, 1, &o);
  CHECK_INT(tp_logscan_nrecords(s), 2);
  int cid;
  CHECK(tp_logscan_format(s, &cid) == TP_LOG_FORMAT_CUSTOM && cid == 7);
  CHECK_NUM(field(s, 1, TP_LOG_F_ITERATION), 2, 0);
  CHECK_NUM(field(s, 1, TP_LOG_F_RANK), 0, 0);
  CHECK_NUM(field(s, 1, TP_LOG_F_LINE), 3, 0);
  CHECK_INT(calls, 3);  // from the detecting line on
  tp_logscan_free(s);
  // A built-in format found first keeps the hooks out.
  calls = 0;
  static const char mixed[] = MG("1") "\n[myfw] s=5\n";
  s = scan_chunks(mixed, sizeof mixed - 1, NULL, 0, &o);
  CHECK(tp_logscan_format(s, NULL) == TP_LOG_FORMAT_MEGATRON);
  CHECK_INT(tp_logscan_nrecords(s), 1);
  CHECK_INT(calls, 0);
  tp_logscan_free(s);
}

// Reading files: errors name the path.
static void test_files(void) {
  TpError err;
  TpLogScan *s = tp_logscan_new(NULL, &err);
  CHECK_INT(tp_logscan_feed_file(s, "/nonexistent/x.log", &err), -ENOENT);
  CHECK_STR(err.msg, "/nonexistent/x.log: No such file or directory");
  CHECK_INT(tp_logscan_feed_file(s, "/", &err), -EISDIR);
  CHECK_STR(err.msg, "/: Is a directory");
  tp_logscan_free(s);
  // Misuse after finish.
  s = tp_logscan_new(NULL, &err);
  CHECK_INT(tp_logscan_finish(s, &err), 0);
  CHECK_INT(tp_logscan_finish(s, &err), 0);
  CHECK_INT(tp_logscan_feed(s, "x", 1, &err), TP_EINVAL);
  tp_logscan_free(s);
  tp_logscan_free(NULL);
}

// A file read with its SHA-256 (a second thread reads it behind the scanner): the same records
// as the plain read, the digest and size of the bytes, over several read chunks (a fixture
// repeated past 3 MiB), whether the digest is waited for at once or after the scan.
static void test_feed_digest(void) {
  char src[1024];
  snprintf(src, sizeof src, "%s/tests/fixtures/logs/%s", source_dir(), fixtures[0]);
  size_t one_len;
  char *one = read_file(src, &one_len);
  CHECK(one != NULL && one_len > 0);
  if (!one || one_len == 0) {
    free(one);
    return;
  }
  size_t copies = (3u << 20) / one_len + 2, len = copies * one_len;
  char *data = malloc(len);
  CHECK(data != NULL);
  if (!data) {
    free(one);
    return;
  }
  for (size_t k = 0; k < copies; k++) {
    memcpy(data + k * one_len, one, one_len);
  }
  char dir[] = "/tmp/tplua-test-logscan-digest.XXXXXX";
  CHECK(mkdtemp(dir) != NULL);
  char path[256];
  snprintf(path, sizeof path, "%s/repeated.log", dir);
  FILE *f = fopen(path, "wb");
  CHECK(f != NULL && fwrite(data, 1, len, f) == len);
  if (f) {
    fclose(f);
  }
  char want[TP_DIGEST_SHA256_HEX + 1], hex[TP_DIGEST_SHA256_HEX + 1];
  TpError err;
  CHECK_INT(tp_digest_sha256(data, len, want, &err), 0);
  TpLogScan *plain = scan_chunks(data, len, NULL, 0, NULL);
  TpBuf a = {0}, b = {0};
  fingerprint(plain, &a);

  TpLogScan *s = tp_logscan_new(NULL, &err);
  uint64_t size = 0;
  CHECK_INT(tp_logscan_feed_file_sha256(s, path, hex, &size, &err), 0);
  CHECK_INT(tp_logscan_finish(s, &err), 0);
  CHECK_STR(hex, want);
  CHECK_INT(size, len);
  fingerprint(s, &b);
  CHECK_STR(tp_buf_cstr(&b), tp_buf_cstr(&a));
  tp_logscan_free(s);

  s = tp_logscan_new(NULL, &err);
  TpDigestFollow *follow = NULL;
  size = 0;
  CHECK_INT(tp_logscan_feed_file_digest(s, path, &follow, &size, &err), 0);
  CHECK(follow != NULL);
  CHECK_INT(size, len);
  CHECK_INT(tp_logscan_finish(s, &err), 0);
  fingerprint(s, &b);
  CHECK_STR(tp_buf_cstr(&b), tp_buf_cstr(&a));
  if (follow) {
    CHECK_INT(tp_digest_follow_wait(follow, hex, &err), 0);
    CHECK_STR(hex, want);
  }
  tp_digest_follow_free(follow);
  tp_logscan_free(s);

  // A file that cannot be read: the error, and no follower left behind.
  s = tp_logscan_new(NULL, &err);
  follow = NULL;
  CHECK_INT(tp_logscan_feed_file_digest(s, "/nonexistent/x.log", &follow, &size, &err), -ENOENT);
  CHECK_STR(err.msg, "/nonexistent/x.log: No such file or directory");
  CHECK(follow == NULL);
  CHECK_INT(tp_logscan_feed_file_sha256(s, "/", hex, &size, &err), -EISDIR);
  tp_logscan_free(s);

  tp_buf_free(&a);
  tp_buf_free(&b);
  tp_logscan_free(plain);
  unlink(path);
  rmdir(dir);
  free(data);
  free(one);
}

// torchtitan step times: derived from the start-up lines, or from gbs/seq_len/gpus options.
static void test_torchtitan_derived(void) {
  const char *step = "[rank0]:[titan] 2026-05-20 02:22:58,212 - root - INFO - \x1b[31mstep:  2  "
                     "\x1b[32mloss: 10.60813  \x1b[38;2;180;60;0mgrad_norm: 49.2500  "
                     "\x1b[38;2;54;234;195mmemory: 169.10GiB(94.81%)  \x1b[34mtps: 9,891  "
                     "\x1b[36mtflops: 833.38  \x1b[35mmfu: 37.04%\x1b[39m\n";
  TpLogScan *s = scan_text(step);
  CHECK_INT(tp_logscan_nrecords(s), 1);
  CHECK(!has(s, 0, TP_LOG_F_STEP_TIME_S));  // no batch line: absent
  CHECK_NUM(field(s, 0, TP_LOG_F_MFU_PCT), 37.04, 1e-15);
  CHECK_NUM(field(s, 0, TP_LOG_F_MEM_MAX_RESERVED_GIB), 169.10, 1e-15);
  tp_logscan_free(s);
  TpBuf b = {0};
  tp_buf_printf(&b,
                "[titan] x - root - INFO - Building device mesh with parallelism: pp=1, "
                "dp_replicate=1, dp_shard=4, cp=2, tp=1, ep=1\n"
                "Trainer is initialized with local batch size 4, global batch size 16, "
                "gradient accumulation steps 2, sequence length 8192, total steps 10 (warmup "
                "2)\n%s",
                step);
  s = scan_text(tp_buf_cstr(&b));
  CHECK_NUM(field(s, 0, TP_LOG_F_STEP_TIME_S), 4.0 * 8192 * 2 / (9891.0 * 2), 1e-15);
  const TpLogMeta *m = tp_logscan_meta(s);
  CHECK_NUM(m->num[TP_LOG_M_WORLD_SIZE], 8, 0);
  CHECK_NUM(m->num[TP_LOG_M_DP], 4, 0);
  tp_logscan_free(s);
  // The newest start-up line gives tokens per DP rank directly.
  b.len = 0;
  tp_buf_printf(&b,
                "Trainer is initialized with 65,536 tokens per DP rank, 524,288 tokens per "
                "train step, gradient accumulation steps 1, maximum context length 8192, "
                "total steps 10 (warmup 2)\n%s",
                step);
  s = scan_text(tp_buf_cstr(&b));
  CHECK_NUM(field(s, 0, TP_LOG_F_STEP_TIME_S), 65536.0 / 9891.0, 1e-15);
  CHECK_NUM(tp_logscan_meta(s)->num[TP_LOG_M_TOKENS_PER_STEP], 524288, 0);
  tp_logscan_free(s);
  TpLogScanOpts o;
  tp_logscan_opts_init(&o);
  o.gbs = 64;
  o.seq_len = 4096;
  o.gpus = 8;
  s = scan_chunks(step, strlen(step), NULL, 0, &o);
  CHECK_NUM(field(s, 0, TP_LOG_F_STEP_TIME_S), 64.0 * 4096 / (9891.0 * 8), 1e-15);
  tp_logscan_free(s);
  tp_buf_free(&b);
}

// Argument dumps: dots, no dots (48+ characters), empty values, Primus' aligned dump.
static void test_args(void) {
  TpLogScan *s = scan_text(
      "   ------------------------ arguments ------------------------\n"
      "   adam_beta1 ...................................... 0.9\n"
      "   ...\n"
      "   inference_dynamic_batching_cuda_graph_max_tokens  16384\n"
      "   inference_dynamic_batching_unified_memory_level . 0\n"
      "   data_cache_path ................................. \n"
      "   note ............................................ a ... b\n"
      "   -------------------- end of arguments ---------------------\n"
      "   tail ............................................ not an argument\n"
      "[rank-0/8][INFO] x\n"
      "Final backend args (after patches): (3 parameters)\n"
      "  adam_beta1                     : 0.9 (float)\n"
      "  model.name                     : llama3 (str)\n"
      "  weird                          : (a) (b) (tuple)\n"
      "--------------------------------------------------------------------------------\n");
  CHECK_INT(tp_logscan_nargs(s, TP_LOG_ARGS_MEGATRON), 5);
  static const char *const want[][2] = {
      {"adam_beta1", "0.9"},
      {"inference_dynamic_batching_cuda_graph_max_tokens", "16384"},
      {"inference_dynamic_batching_unified_memory_level", "0"},
      {"data_cache_path", ""},
      {"note", "a ... b"},
  };
  for (size_t i = 0; i < 5; i++) {
    const char *name, *val;
    size_t nl, vl;
    CHECK(tp_logscan_arg(s, TP_LOG_ARGS_MEGATRON, i, &name, &nl, &val, &vl));
    CHECK(nl == strlen(want[i][0]) && memcmp(name, want[i][0], nl) == 0);
    CHECK(vl == strlen(want[i][1]) && memcmp(val, want[i][1], vl) == 0);
  }
  CHECK_INT(tp_logscan_nargs(s, TP_LOG_ARGS_PRIMUS), 3);
  const char *name, *val;
  size_t nl, vl;
  CHECK(tp_logscan_arg(s, TP_LOG_ARGS_PRIMUS, 1, &name, &nl, &val, &vl));
  CHECK(nl == 10 && memcmp(name, "model.name", 10) == 0 && vl == 6 &&
        memcmp(val, "llama3", 6) == 0);
  CHECK(tp_logscan_arg(s, TP_LOG_ARGS_PRIMUS, 2, &name, &nl, &val, &vl));
  CHECK(vl == 7 && memcmp(val, "(a) (b)", 7) == 0);
  tp_logscan_free(s);
}

// A dump cut before its footer ends at the first record or failure line.
static void test_args_unterminated(void) {
  TpLogScan *s = scan_text("------------------------ arguments ------------------------\n"
                           "  adam_beta1 ...................................... 0.9\n" MG(
                               "1") "\n  not_an_arg ........ x\n");
  CHECK_INT(tp_logscan_nargs(s, TP_LOG_ARGS_MEGATRON), 1);
  CHECK_INT(tp_logscan_nrecords(s), 1);
  tp_logscan_free(s);
}

// A forced format keeps the other families out; Primus covers Megatron and torchtitan lines.
static void test_forced_format(void) {
  static const char tt[] = "[20251211 14:23:21][rank-1/8][INFO ] step:  1  loss: 12.2674  "
                           "grad_norm:  3.9375  memory: 240.17GiB(95.31%)  tps: 531\n";
  TpLogScanOpts o;
  tp_logscan_opts_init(&o);
  o.format = TP_LOG_FORMAT_PRIMUS;
  TpLogScan *s = scan_chunks(tt, sizeof tt - 1, NULL, 0, &o);
  CHECK_INT(tp_logscan_nrecords(s), 1);
  CHECK(tp_logscan_format(s, NULL) == TP_LOG_FORMAT_PRIMUS);
  tp_logscan_free(s);
  o.format = TP_LOG_FORMAT_NEMO;
  s = scan_chunks(tt, sizeof tt - 1, NULL, 0, &o);
  CHECK_INT(tp_logscan_nrecords(s), 0);
  CHECK(tp_logscan_format(s, NULL) == TP_LOG_FORMAT_NEMO);
  tp_logscan_free(s);
  o.format = TP_LOG_FORMAT_MEGATRON;
  static const char mg[] = MG("3") "\n";
  s = scan_chunks(mg, sizeof mg - 1, NULL, 0, &o);
  CHECK_INT(tp_logscan_nrecords(s), 1);
  tp_logscan_free(s);
}

// The exception line that ends a traceback names the crash.
static void test_crash_message(void) {
  TpLogScan *s = scan_text("[rank0]: Traceback (most recent call last):\n"
                           "[rank0]:   File \"x.py\", line 1, in <module>\n"
                           "[rank0]: RuntimeError: Simulated failure\n"
                           "ValueError: later, unrelated\n");
  const TpLogDiag *d = diag(s, TP_LOG_D_CRASH);
  CHECK(d && d->line == 1);
  CHECK_STR(d ? d->message : NULL, "traceback: RuntimeError: Simulated failure");
  tp_logscan_free(s);
}

// Parameter counts in their three forms.
static void test_params(void) {
  TpLogScan *s = scan_text(
      " > number of parameters on (tensor, pipeline) model parallel rank (0, 0): 100\n"
      " > number of parameters on (tensor, pipeline) model parallel rank (1, 0): 101\n"
      "[NeMo I 2025-03-07 22:37:13 megatron_parallel:549]  > number of parameters on (tensor, "
      "pipeline) model parallel rank (0 ,1): 102\n"
      " > number of parameters on (tensor, gtp_weight_remat, pipeline) model parallel rank (1, 2, "
      "1): 103\n"
      " > number of parameters on (tensor, pipeline) model parallel rank (0, 0): 100\n"
      " > number of trainable parameters: 50 (12.5% of total)\n");
  const TpLogParams *p = tp_logscan_params(s);
  CHECK(p->present && p->has_total);
  CHECK_INT(p->nshards, 4);
  CHECK_NUM(p->total, 406, 0);
  CHECK_INT(p->shards[2].tp, 0);
  CHECK_INT(p->shards[2].pp, 1);
  CHECK_INT(p->shards[3].gtp, 2);
  CHECK_INT(p->shards[3].pp, 1);
  CHECK(p->has_trainable && p->trainable == 50);
  tp_logscan_free(s);
}

// "size:  total parameters" with no number between the colon and the words is no count (it once
// stored an unset value).
static void test_params_without_number(void) {
  TpLogScan *s = scan_text("Model llama3 debugmodel size:  total parameters\n");
  CHECK(!tp_logscan_params(s)->has_total);
  tp_logscan_free(s);
  s = scan_text("Model llama3 debugmodel size: 6,229,760 total parameters\n");
  CHECK(tp_logscan_params(s)->has_total);
  CHECK_NUM(tp_logscan_params(s)->total, 6229760, 0);
  tp_logscan_free(s);
}

// How a run stopped: one Slurm line names one reason; torchelastic's SignalException ends a
// traceback that is a stop, not a crash; a real exception keeps the crash.
static void test_stops(void) {
  TpLogScan *s = scan_text("slurmstepd: error: *** JOB 7 ON n1 CANCELLED AT 2024-01-01T00:00:00 "
                           "DUE TO TIME LIMIT ***\n");
  CHECK(diag(s, TP_LOG_D_TIMEOUT) != NULL);
  CHECK(diag(s, TP_LOG_D_CANCELLED) == NULL);
  tp_logscan_free(s);
  s = scan_text("W0520 api.py:753] Received 15 death signal, shutting down workers\n"
                "Traceback (most recent call last):\n"
                "  File \"run.py\", line 1, in <module>\n"
                "torch.distributed.elastic.multiprocessing.api.SignalException: Process 2 got "
                "signal: 15\n");
  CHECK(diag(s, TP_LOG_D_CRASH) == NULL);
  const TpLogDiag *d = diag(s, TP_LOG_D_SIGNAL);
  CHECK(d && d->line == 1 && d->count == 2 && strstr(d->message, "SIGTERM") != NULL);
  tp_logscan_free(s);
  s = scan_text("Received 1 death signal, shutting down workers\n");
  d = diag(s, TP_LOG_D_SIGNAL);
  CHECK(d && strstr(d->message, "SIGHUP") != NULL);
  tp_logscan_free(s);
  s = scan_text("Traceback (most recent call last):\nValueError: bad shape\n"
                "Received 15 death signal, shutting down workers\n");
  CHECK(diag(s, TP_LOG_D_CRASH) != NULL);
  CHECK(diag(s, TP_LOG_D_SIGNAL) != NULL);
  tp_logscan_free(s);
}

// Pipeline parallelism: non-last stages print a placeholder loss (torchtitan -1.0); the rank
// that prints the real loss is kept, with or without rank prefixes, and the step time derived
// from tps divides by the whole non-data-parallel degree of the (old-style) mesh line.
static void test_pipeline(void) {
  TpLogScan *s = scan_text(
      "[rank0]:Building 2-D device mesh with ['pp', 'dp_shard'], [2, 4]\n"
      "[rank0]:Training starts at step 1, with local batch size 2, global batch size 8, sequence "
      "length 4096, total steps 3\n"
      "[rank0]:step:  1  loss: -1.0000  memory: 36.90GiB(46.63%)  tps: 4\n"
      "[rank7]:step:  1  loss: 12.0000  memory: 30.00GiB(40.00%)  tps: 4\n"
      "[rank0]:step:  2  loss: -1.0000  memory: 36.90GiB(46.63%)  tps: 4\n"
      "[rank7]:step:  2  loss: 11.0000  memory: 30.00GiB(40.00%)  tps: 4\n");
  CHECK_INT(tp_logscan_nrecords(s), 2);
  CHECK_NUM(field(s, 0, TP_LOG_F_RANK), 7, 0);
  CHECK_NUM(field(s, 1, TP_LOG_F_LOSS), 11, 0);
  CHECK_NUM(field(s, 0, TP_LOG_F_STEP_TIME_S), 2.0 * 4096 / (4 * 2), 1e-12);
  const TpLogMeta *m = tp_logscan_meta(s);
  CHECK_NUM(m->num[TP_LOG_M_PP], 2, 0);
  CHECK_NUM(m->num[TP_LOG_M_DP], 4, 0);
  tp_logscan_free(s);
  // The last stage printed first: later placeholders of a lower rank are not kept.
  s = scan_text("[rank3]:step:  1  loss: 9.5000  memory: 1.00GiB(1.00%)  tps: 4\n"
                "[rank0]:step:  1  loss: -1.0000  memory: 1.00GiB(1.00%)  tps: 4\n"
                "[rank0]:step:  2  loss: -1.0000  memory: 1.00GiB(1.00%)  tps: 4\n"
                "[rank3]:step:  2  loss: 9.2500  memory: 1.00GiB(1.00%)  tps: 4\n");
  CHECK_INT(tp_logscan_nrecords(s), 2);
  CHECK_NUM(field(s, 1, TP_LOG_F_LOSS), 9.25, 0);
  tp_logscan_free(s);
  // No prefixes: the placeholder copy printed first is replaced by the real loss.
  s = scan_text("step:  1  loss: -1.0000  memory: 1.00GiB(1.00%)  tps: 4\n"
                "step:  1  loss: 10.5000  memory: 1.00GiB(1.00%)  tps: 4\n"
                "step:  2  loss: 10.2500  memory: 1.00GiB(1.00%)  tps: 4\n"
                "step:  2  loss: -1.0000  memory: 1.00GiB(1.00%)  tps: 4\n");
  CHECK_INT(tp_logscan_nrecords(s), 2);
  CHECK_NUM(field(s, 0, TP_LOG_F_LOSS), 10.5, 0);
  CHECK_NUM(field(s, 1, TP_LOG_F_LOSS), 10.25, 0);
  tp_logscan_free(s);
  // Only a non-last stage printed, no mesh line: no loss, and no step time (pp is unknown).
  s = scan_text("Training starts at step 1, with local batch size 2, global batch size 2, "
                "sequence length 4096, total steps 3\n"
                "step:  1  loss: -1.0000  memory: 1.00GiB(1.00%)  tps: 8\n");
  CHECK_INT(tp_logscan_nrecords(s), 1);
  CHECK(!has(s, 0, TP_LOG_F_LOSS));
  CHECK(!has(s, 0, TP_LOG_F_STEP_TIME_S));
  tp_logscan_free(s);
}

// TQDM redraws separated by '\r' inside one line: one record per redraw with a new step; a
// redraw that only moves the counter (the postfix still shows the previous step) adds nothing.
static void test_progress_redraws(void) {
  TpLogScan *s = scan_text(
      "Epoch 0:   1%|          | 1/100 [00:01<02:00, 1.00it/s, v_num=0, reduced_train_loss=3.10, "
      "global_step=0.000]\rEpoch 0:   2%|          | 2/100 [00:02<02:00, 1.00it/s, v_num=0, "
      "reduced_train_loss=3.10, global_step=0.000]\rEpoch 0:   2%|          | 2/100 [00:02<02:00, "
      "1.00it/s, v_num=0, reduced_train_loss=3.00, global_step=1.000]\rEpoch 0:   3%|          | "
      "3/100 [00:03<02:00, 2.00s/it, v_num=0, reduced_train_loss=2.90, global_step=2.000]\n");
  CHECK_INT(tp_logscan_nrecords(s), 3);
  CHECK_NUM(field(s, 1, TP_LOG_F_ITERATION), 1, 0);
  CHECK_NUM(field(s, 1, TP_LOG_F_LOSS), 3.0, 0);
  CHECK_NUM(field(s, 2, TP_LOG_F_STEP_TIME_S), 2.0, 0);
  tp_logscan_free(s);
  // No global_step: the counter is the step; a redraw of the same counter adds nothing.
  s = scan_text("Epoch 0:  10%|#         | 10/100 [00:10<01:30, 1.25it/s, train_loss=2.51]\r"
                "Epoch 0:  10%|#         | 10/100 [00:10<01:30, 1.25it/s, train_loss=2.51]\r"
                "Epoch 0:  11%|#         | 11/100 [00:11<01:29, 1.25it/s, train_loss=2.49]\n");
  CHECK_INT(tp_logscan_nrecords(s), 2);
  CHECK_NUM(field(s, 0, TP_LOG_F_ITERATION), 10, 0);
  CHECK_NUM(field(s, 1, TP_LOG_F_LOSS), 2.49, 0);
  CHECK_NUM(field(s, 1, TP_LOG_F_STEP_TIME_S), 0.8, 1e-12);
  tp_logscan_free(s);
}

// Whether record i has the extra label `name` with exactly the text `text`.
static bool extra_is(const TpLogScan *s, size_t i, const char *name, const char *text) {
  TpLogRecord r;
  TpLogKv kv;
  size_t pos = 0;
  if (!rec(s, i, &r)) {
    return false;
  }
  while (tp_logscan_kv_next(&r, &pos, &kv)) {
    if (kv.kind == TP_LOG_KV_EXTRA && kv.name_len == strlen(name) &&
        memcmp(kv.name, name, kv.name_len) == 0) {
      return kv.str_len == strlen(text) && memcmp(kv.str, text, kv.str_len) == 0;
    }
  }
  return false;
}

// Scans the lines, each given its line end.
static TpLogScan *scan_lines(const char *const *lines, size_t n) {
  TpBuf b = {0};
  for (size_t i = 0; i < n; i++) {
    tp_buf_printf(&b, "%s\n", lines[i]);
  }
  TpLogScan *s = scan_text(tp_buf_cstr(&b));
  tp_buf_free(&b);
  return s;
}

#define NEMO(step, rest)                                                                           \
  "Training epoch 0, iteration " step                                                              \
  "/49 | lr: 1e-05 | global_batch_size: 8 | global_step: " step " | reduced_train_loss: " rest

// The progress lines of the evaluation loops (NeMo's ProgressPrinter for the sanity check,
// validation, test and predict, Lightning's DataLoader-suffixed descriptions) are no training
// records, whatever they carry and whatever prefix they have, cut or not; they neither lock the
// log's format nor hide the training lines around them.
static void test_eval_progress(void) {
  static const char *const evals[] = {
      "Sanity checking Validation: iteration 1/2",
      "Validation: iteration 2/2",
      "Validation: iteration 3/2 | val_loss: 2.5",
      "Testing: iteration 4/10",
      "Predicting: iteration 1/4",
      "Validation DataLoader 1: iteration 2/5",
      "Sanity Checking DataLoader 0: iteration 1/2",
      "Testing DataLoader 0: iteration 3/3",
      "Predicting DataLoader 2: iteration 7/9 | reduced_train_loss: 1.5 | global_step: 7",
      " 0: Validation: iteration 1/20",
      "[default0]:Validation: iteration 5/20",
      "    Validation: iteration 20/20",
      "[NeMo I 2025-05-15 23:42:46 nemo_logging:393] Validation: iteration 1/2",
  };
  for (size_t i = 0; i < sizeof evals / sizeof evals[0]; i++) {
    for (int cut = 0; cut < 2; cut++) {
      TpBuf b = {0};
      tp_buf_printf(&b, "%s%s", evals[i], cut ? "" : "\n");
      TpLogScan *s = scan_text(tp_buf_cstr(&b));
      CHECK_INT(tp_logscan_nrecords(s), 0);
      CHECK(tp_logscan_format(s, NULL) == TP_LOG_FORMAT_NONE);
      tp_logscan_free(s);
      tp_buf_free(&b);
    }
  }
  // A sanity check before the first step, validations between steps, lines without a step time.
  static const char *const lines[] = {
      "Sanity checking Validation: iteration 1/2",
      "Sanity checking Validation: iteration 2/2",
      NEMO("0", "10.19"),
      NEMO("1", "10.22 | consumed_samples: 16"),
      "Validation: iteration 1/2",
      "Validation: iteration 2/2",
      NEMO("2", "10.16 | consumed_samples: 24 | val_loss: 9.014"),
  };
  TpLogScan *s = scan_lines(lines, sizeof lines / sizeof lines[0]);
  CHECK(tp_logscan_format(s, NULL) == TP_LOG_FORMAT_NEMO);
  CHECK_INT(tp_logscan_nrecords(s), 3);
  for (size_t i = 0; i < 3; i++) {
    CHECK_NUM(field(s, i, TP_LOG_F_ITERATION), (double)i, 0);
    CHECK(!has(s, i, TP_LOG_F_STEP_TIME_S));
  }
  CHECK_NUM(field(s, 2, TP_LOG_F_LOSS), 10.16, 0);
  CHECK(extra_is(s, 2, "val_loss", "9.014"));
  tp_logscan_free(s);
  // Megatron-LM's own lines stay records after an evaluation line.
  s = scan_text("Validation: iteration 1/2\n" MG("1") "\n");
  CHECK(tp_logscan_format(s, NULL) == TP_LOG_FORMAT_MEGATRON);
  CHECK_INT(tp_logscan_nrecords(s), 1);
  tp_logscan_free(s);
  // A word that merely ends like an evaluation loop's name is no such description.
  s = scan_text("Revalidation: iteration 3/10 |\n");
  CHECK_INT(tp_logscan_nrecords(s), 1);
  tp_logscan_free(s);
}

// Losses printed as integers (a whole float: `145408`) or in exponent form, and val_loss in
// exponent form, are read exactly (the value strtod gives; val_loss keeps its text).
static void test_nemo_numbers(void) {
  static const char *const lines[] = {
      NEMO("0", "145408"),
      NEMO("1", "1.234e+01 | val_loss: 1.454e+05"),
      NEMO("2", "1.235e+04 | val_loss: 6.1e-05"),
      NEMO("3", "0 | train_step_timing in s: 2"),
  };
  TpLogScan *s = scan_lines(lines, sizeof lines / sizeof lines[0]);
  CHECK_INT(tp_logscan_nrecords(s), 4);
  static const char *const losses[] = {"145408", "1.234e+01", "1.235e+04", "0"};
  for (size_t i = 0; i < 4; i++) {
    double v = field(s, i, TP_LOG_F_LOSS), w = strtod(losses[i], NULL);
    CHECK(memcmp(&v, &w, sizeof v) == 0);
  }
  CHECK(extra_is(s, 1, "val_loss", "1.454e+05"));
  CHECK(extra_is(s, 2, "val_loss", "6.1e-05"));
  CHECK(!has(s, 2, TP_LOG_F_STEP_TIME_S));
  CHECK_NUM(field(s, 3, TP_LOG_F_STEP_TIME_S), 2, 0);
  tp_logscan_free(s);
  // The same in the TQDM bar's postfix (tqdm's short exponents).
  s = scan_text(
      "Epoch 0:   1%|          | 3/300 [00:03<05:00, 1.00it/s, reduced_train_loss=1.45e+5, "
      "global_step=2.000, val_loss=1.2e+4]\n");
  CHECK_NUM(field(s, 0, TP_LOG_F_LOSS), 145000, 0);
  CHECK_NUM(field(s, 0, TP_LOG_F_ITERATION), 2, 0);
  CHECK(extra_is(s, 0, "val_loss", "1.2e+4"));
  tp_logscan_free(s);
}

int main(void) {
  setlocale(LC_ALL, "C");
  test_numbers();
  test_prefixes();
  test_signatures();
  test_stops();
  test_pipeline();
  test_progress_redraws();
  test_eval_progress();
  test_nemo_numbers();
  test_truncated();
  test_cut_end();
  test_primus_markers();
  test_long_line();
  test_bad_bytes();
  test_ranks();
  test_hooks();
  test_files();
  test_feed_digest();
  test_torchtitan_derived();
  test_args();
  test_params();
  test_params_without_number();
  test_args_unterminated();
  test_forced_format();
  test_crash_message();
  test_chunking();
  return CHECK_DONE();
}
