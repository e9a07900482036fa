// The log scanner's line dispatch: the anchor table, the table of line parsers by framework
// family, and the walk of a line through them (see logscan_parse.h). A line is read in this
// order: normalised (logscan_line.c); an argument dump in progress takes it (logscan_args.c);
// then the record parsers in table order until one stores a record (or the caller's line hook,
// once it owns the log); a line that is no record goes to every other parser whose anchor it
// holds, in table order. The order is part of the behaviour: keep it when adding a parser.
#include "logscan_parse.h"

#include <string.h>

#include "logscan_args.h"
#include "logscan_lex.h"
#include "logscan_line.h"
#include "logscan_megatron.h"
#include "logscan_nemo.h"
#include "logscan_outcome.h"
#include "logscan_params.h"
#include "logscan_rec.h"
#include "logscan_state.h"
#include "logscan_torchtitan.h"

// --- Anchors ----------------------------------------------------------------------------------

// Anchor identifiers (what a matched anchor announces).
typedef enum LsAnchorId {
  LA_ITERATION,
  LA_NEMO_EPOCH,
  LA_NEMO_STEP,
  LA_TT_STEP,
  LA_ARGS_RULE,
  LA_PARAMETERS,
  LA_MEMORY_REPORT,
  LA_THEORETICAL,
  LA_SIGNATURE,  // failure signature (table in logscan_outcome.c)
  LA_FACT,       // run fact (meta) line
} LsAnchorId;

#define BIT(id) (1u << (id))

// Anchors of the record lines (a cut last line may have lost its anchor: see below).
#define RECORD_ANCHORS                                                                             \
  (BIT(LA_ITERATION) | BIT(LA_NEMO_EPOCH) | BIT(LA_NEMO_STEP) | BIT(LA_TT_STEP))

// Run facts (LA_FACT sub numbers).
enum {
  F_MESH,
  F_TT_INIT,
  F_TT_START,
  F_CAPACITY,
  F_PEAK_FLOPS,
  F_TT_VERSION,
  F_BACKEND_VERSION,
  F_TRAINING_DONE,
  F_TRAINING_COMPLETED,
  F_FIT_STOPPED,
  F_MAX_STEPS,
  F_TORCHRUN_FINISHED,
  F_TORCHRUN_FAILED,
  F_PRIMUS_RUNNER,
  F_JOB_FINISHED,
  F_MICROBATCHES,
  F_MP_SIZE,
  F_SEEDS,
  F_GLOBAL_RANK,
  F_PROCESSES,
  F_OPTIMIZER_CONFIG,
  F_GPU_MODEL,
  F_WORKER_OK,
  F_EXIT_AT_ITERATION,
  F_RESTORING,
  F_EXCEPTION,
  F_TT_ARGS,
};

#define A(t, id, sub)                                                                              \
  { t, (uint8_t)(sizeof(t) - 1), id, sub }
static const LsAnchor anchors_fixed[] = {
    A("iteration ", LA_ITERATION, 0),
    A("Training epoch ", LA_NEMO_EPOCH, 0),
    A("global_step", LA_NEMO_STEP, 0),
    A("reduced_train_loss", LA_NEMO_STEP, 0),
    A("train_loss=", LA_NEMO_STEP, 0),
    A(" memory: ", LA_TT_STEP, 0),
    A("mmemory: ", LA_TT_STEP, 0),  // after a colour code: "ESC[38;2;54;234;195mmemory: "
    A(" arguments ---", LA_ARGS_RULE, 0),
    A("parameters", LA_PARAMETERS, 0),
    A("parameter count", LA_PARAMETERS, 0),
    A("memory (MB)", LA_MEMORY_REPORT, 0),
    A("Theoretical memory footprints", LA_THEORETICAL, 0),
    A("device mesh", LA_FACT, F_MESH),
    A("is initialized with ", LA_FACT, F_TT_INIT),
    A("Training starts at step", LA_FACT, F_TT_START),
    A(" capacity: ", LA_FACT, F_CAPACITY),
    A("Peak FLOPS used", LA_FACT, F_PEAK_FLOPS),
    A("torchtitan version", LA_FACT, F_TT_VERSION),
    A("backend_version=", LA_FACT, F_BACKEND_VERSION),
    A("[after training is done]", LA_FACT, F_TRAINING_DONE),
    A("Training completed", LA_FACT, F_TRAINING_COMPLETED),
    A("Trainer.fit` stopped", LA_FACT, F_FIT_STOPPED),
    A("'max_steps' (", LA_FACT, F_MAX_STEPS),
    A("torchrun finished", LA_FACT, F_TORCHRUN_FINISHED),
    A("torchrun failed", LA_FACT, F_TORCHRUN_FAILED),
    A(")] [INFO] ", LA_FACT, F_PRIMUS_RUNNER),
    A(" finished: ", LA_FACT, F_JOB_FINISHED),
    A("microbatches to constant", LA_FACT, F_MICROBATCHES),
    A("micro-batches to constant", LA_FACT, F_MICROBATCHES),
    A("model parallel with size", LA_FACT, F_MP_SIZE),
    A("random seeds to", LA_FACT, F_SEEDS),
    A("GLOBAL_RANK: ", LA_FACT, F_GLOBAL_RANK),
    A("processes registered", LA_FACT, F_PROCESSES),
    A("OptimizerConfig(", LA_FACT, F_OPTIMIZER_CONFIG),
    A("Detected GPU model: ", LA_FACT, F_GPU_MODEL),
    A("successfully finished", LA_FACT, F_WORKER_OK),
    A("exiting program at iteration", LA_FACT, F_EXIT_AT_ITERATION),
    A("Restoring states from the checkpoint", LA_FACT, F_RESTORING),
    A("Running with args: ", LA_FACT, F_TT_ARGS),
    // The exception line that ends a Python traceback names the crash.
    A("Exception: ", LA_FACT, F_EXCEPTION),
    A("RuntimeError: ", LA_FACT, F_EXCEPTION),
    A("AssertionError", LA_FACT, F_EXCEPTION),
    A("ValueError: ", LA_FACT, F_EXCEPTION),
    A("TypeError: ", LA_FACT, F_EXCEPTION),
    A("KeyError: ", LA_FACT, F_EXCEPTION),
    A("IndexError: ", LA_FACT, F_EXCEPTION),
    A("AttributeError: ", LA_FACT, F_EXCEPTION),
    A("ImportError: ", LA_FACT, F_EXCEPTION),
    A("ModuleNotFoundError: ", LA_FACT, F_EXCEPTION),
    A("FileNotFoundError: ", LA_FACT, F_EXCEPTION),
    A("NotImplementedError", LA_FACT, F_EXCEPTION),
    A("ZeroDivisionError: ", LA_FACT, F_EXCEPTION),
    A("OutOfMemoryError: ", LA_FACT, F_EXCEPTION),
    A("DistBackendError: ", LA_FACT, F_EXCEPTION),
};
#undef A

#define NFIXED (sizeof anchors_fixed / sizeof anchors_fixed[0])

size_t ls_anchor_count(void) {
  return NFIXED + ls_outcome_nsigs();
}

LsAnchor ls_anchor_get(size_t i) {
  if (i < NFIXED) {
    return anchors_fixed[i];
  }
  const char *text = ls_outcome_sig_text(i - NFIXED);
  return (LsAnchor){text, (uint8_t)strlen(text), LA_SIGNATURE, (uint8_t)(i - NFIXED)};
}

// --- The parsers ------------------------------------------------------------------------------

// When a parser is asked: the stages of a line, then the end of the log. Before them, a line
// goes to the argument dumps (ls_process_segment): a torchtitan job config ("Running with args:"),
// then the dump in progress, if any, which may keep the line.
typedef enum LsStage {
  LS_RECORD_LINE,  // the candidates in table order, until one stores a record (returns 1)
  LS_OTHER_LINE,   // a line that is no record: every candidate, in table order
  LS_LOG_END,      // at the end of the log: every entry, in table order
} LsStage;

typedef struct LsParser {
  // The framework family whose lines it reads: "megatron" (Megatron-LM, and Primus, which
  // prints Megatron's lines), "primus" (Primus' own lines), "nemo" (NeMo and Lightning),
  // "torchtitan", or "any" (lines several frameworks print alike).
  const char *family;
  LsStage stage;
  // A line is a candidate when it holds the anchor id `anchor` (with LA_FACT: the run fact
  // `fact`) and none of the anchor ids in `unless` (bits).
  uint8_t anchor;
  uint8_t fact;
  uint32_t unless;
  // The line parser: 1 when it stored a record, 0 when the line is not its own (or gave facts
  // only), < 0 a TP_E* error. At LS_LOG_END, `end` instead: 0 or < 0.
  int (*line)(TpLogScan *s, const LsLine *L);
  int (*end)(TpLogScan *s);
} LsParser;

#define RECORD(fam, anchor, unless, fn)                                                            \
  { fam, LS_RECORD_LINE, anchor, 0, unless, fn, NULL }
#define LINE(fam, anchor, fn)                                                                      \
  { fam, LS_OTHER_LINE, anchor, 0, 0, fn, NULL }
#define FACT(fam, fact, fn)                                                                        \
  { fam, LS_OTHER_LINE, LA_FACT, fact, 0, fn, NULL }
#define END(fam, fn)                                                                               \
  { fam, LS_LOG_END, 0, 0, 0, NULL, fn }

static int records_finish(TpLogScan *s);

static const LsParser parsers[] = {
    // Record lines. A NeMo ProgressPrinter line also reads "iteration I/T": it is never
    // Megatron's.
    RECORD("nemo", LA_NEMO_EPOCH, 0, ls_nemo_printer_line),
    RECORD("nemo", LA_NEMO_STEP, BIT(LA_NEMO_EPOCH), ls_nemo_bar_line),
    RECORD("megatron", LA_ITERATION, BIT(LA_NEMO_EPOCH), ls_megatron_line),
    RECORD("torchtitan", LA_TT_STEP, 0, ls_torchtitan_line),
    // Other lines (a run fact's entries in F_* order, the order they were always read in).
    LINE("any", LA_PARAMETERS, ls_params_line),
    LINE("megatron", LA_MEMORY_REPORT, ls_megatron_memory_line),
    LINE("megatron", LA_THEORETICAL, ls_megatron_theoretical_line),
    FACT("torchtitan", F_MESH, ls_torchtitan_mesh_line),
    FACT("torchtitan", F_TT_INIT, ls_torchtitan_config_line),
    FACT("torchtitan", F_TT_START, ls_torchtitan_config_line),
    FACT("torchtitan", F_CAPACITY, ls_torchtitan_capacity_line),
    FACT("torchtitan", F_PEAK_FLOPS, ls_torchtitan_peak_flops_line),
    FACT("torchtitan", F_TT_VERSION, ls_torchtitan_version_line),
    FACT("primus", F_BACKEND_VERSION, ls_primus_patch_line),
    FACT("megatron", F_TRAINING_DONE, ls_outcome_completed_line),
    FACT("torchtitan", F_TRAINING_COMPLETED, ls_outcome_completed_line),
    FACT("nemo", F_FIT_STOPPED, ls_nemo_fit_stopped_line),
    FACT("nemo", F_MAX_STEPS, ls_nemo_max_steps_line),
    FACT("primus", F_TORCHRUN_FINISHED, ls_primus_torchrun_line),
    FACT("primus", F_TORCHRUN_FAILED, ls_primus_torchrun_line),
    FACT("primus", F_PRIMUS_RUNNER, ls_primus_runner_line),
    FACT("nemo", F_JOB_FINISHED, ls_nemo_run_job_line),
    FACT("megatron", F_MICROBATCHES, ls_megatron_microbatches_line),
    FACT("megatron", F_MP_SIZE, ls_megatron_mp_size_line),
    FACT("megatron", F_SEEDS, ls_megatron_seeds_line),
    FACT("nemo", F_GLOBAL_RANK, ls_nemo_global_rank_line),
    FACT("nemo", F_PROCESSES, ls_nemo_processes_line),
    FACT("megatron", F_OPTIMIZER_CONFIG, ls_megatron_optimizer_line),
    FACT("primus", F_GPU_MODEL, ls_primus_gpu_model_line),
    FACT("any", F_WORKER_OK, ls_outcome_worker_ok_line),
    FACT("megatron", F_EXIT_AT_ITERATION, ls_outcome_completed_line),
    FACT("nemo", F_RESTORING, ls_nemo_restoring_line),
    FACT("any", F_EXCEPTION, ls_outcome_exception_line),
    LINE("any", LA_SIGNATURE, ls_outcome_signatures_line),
    // The end of the log.
    END("any", ls_args_finish),
    END("megatron", ls_megatron_finish),
    END("any", ls_params_finish),
    END("any", records_finish),
    END("torchtitan", ls_torchtitan_finish),
    END("any", ls_outcome_finish),
};
#define NPARSERS (sizeof parsers / sizeof parsers[0])

// Hands the line to the candidates of `stage` in table order; the first non-zero result ends
// the walk (a stored record, or an error).
static int walk_line(TpLogScan *s, const LsLine *L, LsStage stage) {
  for (size_t i = 0; i < NPARSERS; i++) {
    const LsParser *p = &parsers[i];
    if (p->stage != stage) {
      continue;
    }
    bool held = p->anchor == LA_FACT ? (L->facts >> p->fact & 1) : (L->anchors >> p->anchor & 1);
    if (!held || (L->anchors & p->unless)) {
      continue;
    }
    int rc = p->line(s, L);
    if (rc != 0) {
      return rc;
    }
  }
  return 0;
}

// --- Dispatch ---------------------------------------------------------------------------------

static void found_one(void *ud, const LsAnchor *a, size_t start) {
  LsLine *L = ud;
  (void)start;
  L->anchors |= BIT(a->id);
  if (a->id == LA_FACT) {
    L->facts |= UINT64_C(1) << a->sub;
  } else if (a->id == LA_SIGNATURE) {
    L->sigs[a->sub / 64] |= UINT64_C(1) << (a->sub % 64);
  }
}

static int custom_line(TpLogScan *s, const LsLine *L) {
  int rc = tp_logscan_rec_begin(s);
  if (rc) {
    return rc;
  }
  int r = s->opts.line(s->opts.hook_ud, s, s->custom_id, L->p, L->n, L->lineno);
  if (r < 0) {
    s->pend.active = false;
    return s->failed ? s->failed : TP_EINVAL;
  }
  if (r == 0) {
    s->pend.active = false;
    return 0;
  }
  return ls_line_rec_store(s, L, !L->terminated, LS_FAM_NONE);
}

int ls_process_segment(TpLogScan *s, const char *seg, size_t n, uint64_t lineno, bool terminated) {
  LsLine L;
  memset(&L, 0, sizeof L);
  int rc = ls_line_normalise(&s->norm, seg, n, &L.has_nul);
  if (rc) {
    return rc;
  }
  LsText full = ls_trim(s->norm.data, s->norm.len);
  if (full.n == 0) {
    return 0;
  }
  L.full = full.p;
  L.full_n = full.n;
  L.lineno = lineno;
  L.terminated = terminated;
  if (L.has_nul) {
    rc = ls_diag(s, TP_LOG_D_BINARY, TP_LOG_SEV_WARNING, lineno, "NUL bytes in the log", NULL, 0);
    if (rc) {
      return rc;
    }
  }
  ls_line_strip_prefixes(&L);
  if (L.has_primus) {
    s->primus_seen = true;
    ls_meta_set(s, TP_LOG_M_WORLD_SIZE, (double)L.primus_world, false);
  }
  if (L.n == 0) {
    return 0;
  }
  LsText t = {L.p, L.n};
  ls_index_each(&s->index, L.p, L.n, found_one, &L);
  if (L.facts >> F_TT_ARGS & 1) {
    // A job-config line ends any dump in progress; the strings in it are not signatures.
    rc = ls_args_job_config_line(s, &L);
    if (rc != 0) {
      s->mode = LS_MODE_NORMAL;
      return rc < 0 ? rc : 0;
    }
  }
  if (s->mode == LS_MODE_ARGS) {
    LsText title;
    if (ls_args_rule(t, &title)) {
      s->mode = LS_MODE_NORMAL;
      return 0;
    }
    // A line with the anchor of a record or failure is an argument only in the exact layout
    // (`  iteration ........ 0` is one); otherwise the dump ended without its footer (a cut
    // log, a crash) and the line is read as usual.
    bool anchored = (L.anchors & (RECORD_ANCHORS | BIT(LA_SIGNATURE))) != 0;
    rc = ls_args_line(s, &L, anchored);
    if (rc != 0) {
      return rc < 0 ? rc : 0;
    }
    if (++s->mode_lines > 100000 || anchored) {
      s->mode = LS_MODE_NORMAL;
    }
  } else if (s->mode == LS_MODE_PRIMUS_ARGS) {
    rc = ls_args_primus_line(s, &L);
    if (rc != 0) {
      return rc < 0 ? rc : 0;
    }
    s->mode = LS_MODE_NORMAL;
  }
  bool custom = s->family == LS_FAM_CUSTOM && s->opts.line;
  if (!L.terminated && !(L.anchors & RECORD_ANCHORS)) {
    // The last line of a cut log may have lost its anchor with the cut (torchtitan's
    // "  memory: " after a cut grad_norm): the record parsers check the line's shape themselves.
    L.anchors |= BIT(LA_NEMO_STEP) | BIT(LA_ITERATION) | BIT(LA_TT_STEP);
  }
  int rec = custom ? custom_line(s, &L) : walk_line(s, &L, LS_RECORD_LINE);
  if (rec < 0) {
    return rec;
  }
  if (rec == 0 && !custom && s->family == LS_FAM_NONE && s->opts.detect &&
      s->opts.format == TP_LOG_FORMAT_NONE) {
    int id = s->opts.detect(s->opts.hook_ud, L.p, L.n);
    if (id < 0) {
      return s->failed ? s->failed : TP_EINVAL;
    }
    if (id > 0) {
      s->family = LS_FAM_CUSTOM;
      s->custom_id = id;
      if (s->opts.line) {
        rec = custom_line(s, &L);
        if (rec < 0) {
          return rec;
        }
      }
    }
  }
  if (rec > 0) {
    return 0;  // record lines carry nothing else of interest
  }
  if (L.anchors & BIT(LA_ARGS_RULE)) {
    LsText title;
    if (ls_args_rule(t, &title) && !LS_STARTS(title.p, title.n, "end of")) {
      if (s->args[TP_LOG_ARGS_MEGATRON].n > 0) {
        s->epoch++;  // a second dump: a new run appended to the same log
      }
      s->mode = LS_MODE_ARGS;
      s->mode_lines = 0;
      return 0;
    }
  }
  return walk_line(s, &L, LS_OTHER_LINE);
}

// --- End of the log ---------------------------------------------------------------------------

// The global batch size the first record states, where nothing else stated it.
static int records_finish(TpLogScan *s) {
  TpLogRecord r;
  if (s->nrecs > 0 && tp_logscan_record(s, 0, &r) &&
      (r.present >> TP_LOG_F_GLOBAL_BATCH_SIZE & 1)) {
    ls_meta_set(s, TP_LOG_M_GLOBAL_BATCH_SIZE, r.v[TP_LOG_F_GLOBAL_BATCH_SIZE], false);
  }
  return 0;
}

int ls_finish_parse(TpLogScan *s) {
  for (size_t i = 0; i < NPARSERS; i++) {
    if (parsers[i].stage == LS_LOG_END) {
      int rc = parsers[i].end(s);
      if (rc) {
        return rc;
      }
    }
  }
  return 0;
}
