// The log scanner's shared state mutators: see logscan_state.h.
#include "logscan_state.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

// --- Text hygiene -----------------------------------------------------------------------------

int ls_utf8_append(TpBuf *b, const char *p, size_t n) {
  static const char repl[] = "\xef\xbf\xbd";
  size_t i = 0;
  while (i < n) {
    unsigned char c = (unsigned char)p[i];
    size_t len = 0;
    uint32_t cp = 0;
    if (c < 0x80) {
      char ch = (c < 0x20 || c == 0x7f) ? ' ' : (char)c;
      if (tp_buf_append(b, &ch, 1) != 0) {
        return TP_ENOMEM;
      }
      i++;
      continue;
    }
    if (c >= 0xc2 && c <= 0xdf) {
      len = 2;
      cp = c & 0x1f;
    } else if (c >= 0xe0 && c <= 0xef) {
      len = 3;
      cp = c & 0x0f;
    } else if (c >= 0xf0 && c <= 0xf4) {
      len = 4;
      cp = c & 0x07;
    }
    bool ok = len > 0 && i + len <= n;
    for (size_t k = 1; ok && k < len; k++) {
      unsigned char cc = (unsigned char)p[i + k];
      if ((cc & 0xc0) != 0x80) {
        ok = false;
      }
      cp = (cp << 6) | (cc & 0x3f);
    }
    if (ok && ((len == 3 && (cp < 0x800 || (cp >= 0xd800 && cp <= 0xdfff))) ||
               (len == 4 && (cp < 0x10000 || cp > 0x10ffff)))) {
      ok = false;
    }
    if (ok) {
      if (tp_buf_append(b, p + i, len) != 0) {
        return TP_ENOMEM;
      }
      i += len;
    } else {
      // One U+FFFD for the lead byte and the continuation bytes that follow it (the maximal
      // ill-formed subpart), as decoders "with replacement" do.
      if (tp_buf_append(b, repl, 3) != 0) {
        return TP_ENOMEM;
      }
      size_t k = 1;
      while (len > 0 && k < len && i + k < n && ((unsigned char)p[i + k] & 0xc0) == 0x80) {
        k++;
      }
      i += k;
    }
  }
  return 0;
}

// --- Input position ---------------------------------------------------------------------------

uint64_t ls_lines(const TpLogScan *s) {
  return s->nl + (s->bytes > 0 && s->last_byte != '\n' ? 1 : 0);
}

// --- Record families --------------------------------------------------------------------------

bool ls_family_allows(const TpLogScan *s, int fam) {
  return (s->family == LS_FAM_NONE || s->family == fam) && (s->families >> fam & 1);
}

void ls_family_lock(TpLogScan *s, int fam) {
  if (s->family == LS_FAM_NONE) {
    s->family = fam;
  }
}

// --- Diagnostics ------------------------------------------------------------------------------

static int diag_set_message(LsDiagAcc *d, const char *what, const char *excerpt,
                            size_t excerpt_len);

int ls_diag(TpLogScan *s, TpLogDiagKind kind, TpLogSeverity sev, uint64_t line, const char *what,
            const char *excerpt, size_t excerpt_len) {
  LsDiagAcc *d = &s->diags[kind];
  s->diag_dirty = true;
  if (d->seen) {
    d->count++;
    if (sev <= d->sev) {
      return 0;
    }
  } else {
    d->seen = true;
    d->first_line = line;
    d->count = 1;
  }
  d->sev = sev;
  d->line = line;
  return diag_set_message(d, what, excerpt, excerpt_len);
}

int ls_diag_message(TpLogScan *s, TpLogDiagKind kind, const char *what, const char *excerpt,
                    size_t excerpt_len) {
  if (!s->diags[kind].seen) {
    return 0;
  }
  s->diag_dirty = true;
  return diag_set_message(&s->diags[kind], what, excerpt, excerpt_len);
}

static int diag_set_message(LsDiagAcc *d, const char *what, const char *excerpt,
                            size_t excerpt_len) {
  TpBuf b = {0};
  const size_t max_excerpt = 240;
  int rc = tp_buf_append(&b, what, strlen(what));
  if (rc == 0 && excerpt && excerpt_len > 0) {
    size_t n = excerpt_len;
    bool cut = false;
    if (n > max_excerpt) {
      n = max_excerpt;
      while (n > 0 && ((unsigned char)excerpt[n] & 0xc0) == 0x80) {
        n--;  // do not split a UTF-8 sequence
      }
      cut = true;
    }
    rc = tp_buf_append(&b, ": ", 2);
    if (rc == 0) {
      rc = ls_utf8_append(&b, excerpt, n);
    }
    if (rc == 0 && cut) {
      rc = tp_buf_append(&b, "\xe2\x80\xa6", 3);
    }
  }
  if (rc == 0 && !tp_buf_cstr(&b)) {
    rc = TP_ENOMEM;
  }
  if (rc) {
    tp_buf_free(&b);
    return rc;
  }
  free(d->msg);
  d->msg = b.data;
  return 0;
}

// --- Arguments, parameters, memory, meta ------------------------------------------------------

int ls_arg_add(TpLogScan *s, TpLogArgDump which, const char *name, size_t nlen, const char *val,
               size_t vlen) {
  LsArgs *a = &s->args[which];
  if (vlen > 65536) {
    vlen = 65536;
  }
  if (a->pool.len + nlen + vlen > TP_LOGSCAN_MAX_ARGS_BYTES) {
    // A log repeating dumps without end: keep what was read, say so once per dump kind.
    if (s->args_full[which]) {
      return 0;
    }
    s->args_full[which] = true;
    char what[160];
    snprintf(what, sizeof what, "argument dumps exceed %u MiB; later arguments are dropped",
             TP_LOGSCAN_MAX_ARGS_BYTES >> 20);
    return ls_diag(s, TP_LOG_D_BAD_ARGS, TP_LOG_SEV_WARNING, s->nl + 1, what, name, nlen);
  }
  if (a->n == a->cap) {
    size_t cap = a->cap ? a->cap * 2 : 256;
    LsArgEnt *e = realloc(a->ents, cap * sizeof *e);
    if (!e) {
      return TP_ENOMEM;
    }
    a->ents = e;
    a->cap = cap;
  }
  LsArgEnt *e = &a->ents[a->n];
  e->name_ofs = a->pool.len;
  if (ls_utf8_append(&a->pool, name, nlen) != 0) {
    return TP_ENOMEM;
  }
  e->name_len = (uint32_t)(a->pool.len - e->name_ofs);
  e->val_ofs = a->pool.len;
  if (ls_utf8_append(&a->pool, val, vlen) != 0) {
    return TP_ENOMEM;
  }
  e->val_len = (uint32_t)(a->pool.len - e->val_ofs);
  a->n++;
  return 0;
}

int ls_shard_add(TpLogScan *s, long tp, long gtp, long pp, double count) {
  for (size_t i = 0; i < s->nshards; i++) {
    TpLogShard *sh = &s->shards[i];
    if (sh->tp == tp && sh->gtp == gtp && sh->pp == pp) {
      sh->count = count;  // a restart prints the same shard again
      return 0;
    }
  }
  if (s->nshards == s->capshards) {
    size_t cap = s->capshards ? s->capshards * 2 : 8;
    TpLogShard *n = realloc(s->shards, cap * sizeof *n);
    if (!n) {
      return TP_ENOMEM;
    }
    s->shards = n;
    s->capshards = cap;
  }
  s->shards[s->nshards++] = (TpLogShard){tp, gtp, pp, count};
  s->params.present = true;
  return 0;
}

int ls_mem_add(TpLogScan *s, const TpLogMemReport *m) {
  if (s->nmem == s->capmem) {
    size_t cap = s->capmem ? s->capmem * 2 : 8;
    TpLogMemReport *n = realloc(s->mem, cap * sizeof *n);
    if (!n) {
      return TP_ENOMEM;
    }
    s->mem = n;
    s->capmem = cap;
  }
  s->mem[s->nmem++] = *m;
  return 0;
}

void ls_meta_set(TpLogScan *s, TpLogMetaKey k, double v, bool override) {
  if (!isfinite(v)) {
    return;
  }
  if (override || !(s->meta.present >> k & 1)) {
    s->meta.present |= 1u << k;
    s->meta.num[k] = v;
  }
}

int ls_meta_str(TpLogScan *s, TpLogMetaStr k, const char *v, size_t n, bool override) {
  if (s->meta_str[k] && !override) {
    return 0;
  }
  TpBuf b = {0};
  if (n > 256) {
    n = 256;
  }
  if (ls_utf8_append(&b, v, n) != 0 || !tp_buf_cstr(&b)) {
    tp_buf_free(&b);
    return TP_ENOMEM;
  }
  free(s->meta_str[k]);
  s->meta_str[k] = b.data;
  s->meta.str[k] = b.data;
  return 0;
}
