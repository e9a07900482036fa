// The log scanner's anchor filter (strided gram index): see logscan_index.h.
#include "logscan_index.h"

#include <stdlib.h>
#include <string.h>

#include "common.h"

// Rough frequency (per mille) of a byte in English-like log text: used to register, for each
// anchor and stride residue, the rarest 4-byte gram, which keeps false candidates few.
static int byte_weight(unsigned char c) {
  static const char common[] = " etaoinsrhldcum";  // most frequent first
  const char *q = memchr(common, c, sizeof common - 1);
  if (q) {
    return 120 - (int)(q - common) * 6;
  }
  if (c >= 'a' && c <= 'z') {
    return 20;
  }
  if (c >= '0' && c <= '9') {
    return 25;
  }
  if (c == '.' || c == '/' || c == '_' || c == ':' || c == '-' || c == ',') {
    return 30;
  }
  return 5;
}

static uint32_t gram_hash(const char *p) {
  uint32_t v;
  memcpy(&v, p, 4);
  return (v * 2654435761u) >> (32 - LS_HASH_BITS);
}

// Registers, for each anchor and stride residue, the gram to probe: the rarest by the sampled
// counts when there are any, else by the static byte weights.
static void index_select(LsIndex *ix) {
  memset(ix->hit, 0, sizeof ix->hit);
  for (size_t i = 0; i < LS_HASH_SIZE; i++) {
    ix->head[i] = -1;
  }
  ix->nents = 0;
  for (size_t a = 0; a < ix->nanchors; a++) {
    const LsAnchor *an = &ix->anchors[a];
    for (size_t r = 0; r < LS_STRIDE; r++) {
      size_t best = SIZE_MAX;
      uint64_t best_w = 0;
      for (size_t o = r; o + LS_GRAM <= an->len; o += LS_STRIDE) {
        uint64_t w = 0;
        for (size_t k = 0; k < LS_GRAM; k++) {
          w += (uint64_t)byte_weight((unsigned char)an->text[o + k]);
        }
        if (ix->counts) {
          w += (uint64_t)ix->counts[gram_hash(an->text + o)] << 10;
        }
        if (best == SIZE_MAX || w < best_w) {
          best = o;
          best_w = w;
        }
      }
      if (best == SIZE_MAX) {
        continue;  // cannot happen for anchors of LS_MIN_ANCHOR bytes or more
      }
      uint32_t h = gram_hash(an->text + best);
      LsGramEnt *e = &ix->ents[ix->nents];
      e->anchor = (uint16_t)a;
      e->off = (uint8_t)best;
      e->next = ix->head[h];
      ix->head[h] = (int16_t)ix->nents;
      ix->nents++;
      ix->hit[h] = 1;
    }
  }
}

int ls_index_build(LsIndex *ix, size_t na, LsAnchor (*get)(size_t i)) {
  ix->anchors = calloc(na, sizeof *ix->anchors);
  ix->prefix = calloc(na, sizeof *ix->prefix);
  ix->ents = calloc(na * LS_STRIDE, sizeof *ix->ents);
  if (!ix->ents || !ix->anchors || !ix->prefix) {
    return TP_ENOMEM;
  }
  for (size_t a = 0; a < na; a++) {
    ix->anchors[a] = get(a);
    if (ix->anchors[a].len < LS_MIN_ANCHOR) {
      return TP_EINVAL;  // the filter would miss it: a table error
    }
    memcpy(&ix->prefix[a], ix->anchors[a].text, 8);
  }
  ix->nanchors = na;
  index_select(ix);
  return 0;
}

void ls_index_free(LsIndex *ix) {
  free(ix->anchors);
  free(ix->prefix);
  free(ix->ents);
  free(ix->counts);
}

// Samples the gram frequencies of b[0, n) (older samples count half) and re-selects the grams.
static void index_adapt(LsIndex *ix, const char *b, size_t n) {
  if (!ix->counts) {
    ix->counts = calloc(LS_HASH_SIZE, sizeof *ix->counts);
    if (!ix->counts) {
      return;  // keep the static choice
    }
  } else {
    for (size_t i = 0; i < LS_HASH_SIZE; i++) {
      ix->counts[i] >>= 1;
    }
  }
  if (n > LS_ADAPT_SAMPLE) {
    n = LS_ADAPT_SAMPLE;
  }
  for (size_t i = 0; i + LS_GRAM <= n; i++) {
    ix->counts[gram_hash(b + i)]++;
  }
  index_select(ix);
}

void ls_index_sample(LsIndex *ix, const char *b, size_t n) {
  if (ix->scanned >= ix->next_adapt && n >= LS_ADAPT_SAMPLE / 4) {
    index_adapt(ix, b, n);
    ix->next_adapt = ix->scanned + LS_ADAPT_EVERY;
  }
  ix->scanned += n;
}

size_t ls_index_find(const LsIndex *ix, const char *b, size_t *pp, size_t to, size_t floor,
                     size_t limit, size_t *anchor) {
  const LsAnchor *an = ix->anchors;
  const uint8_t *hit = ix->hit;
  size_t p = *pp;
  size_t end = limit >= LS_GRAM ? limit - LS_GRAM + 1 : 0;
  if (to > end) {
    to = end;
  }
  while (p < to) {
    // Four probes per round: most rounds find no gram of interest.
    while (p + 3 * LS_STRIDE < to) {
      uint32_t h0 = gram_hash(b + p), h1 = gram_hash(b + p + LS_STRIDE);
      uint32_t h2 = gram_hash(b + p + 2 * LS_STRIDE), h3 = gram_hash(b + p + 3 * LS_STRIDE);
      if (hit[h0] | hit[h1] | hit[h2] | hit[h3]) {
        break;
      }
      p += 4 * LS_STRIDE;
    }
    size_t stop = p + 4 * LS_STRIDE;
    for (; p < to && p < stop; p += LS_STRIDE) {
      uint32_t h = gram_hash(b + p);
      if (!hit[h]) {
        continue;
      }
      for (int e = ix->head[h]; e >= 0; e = ix->ents[e].next) {
        const LsGramEnt *g = &ix->ents[e];
        const LsAnchor *a = &an[g->anchor];
        if (p < floor + g->off) {
          continue;
        }
        size_t st = p - g->off;
        if (st + a->len > limit) {
          continue;
        }
        uint64_t head8;
        memcpy(&head8, b + st, 8);
        if (head8 == ix->prefix[g->anchor] && memcmp(b + st + 8, a->text + 8, a->len - 8u) == 0) {
          *pp = p;
          *anchor = g->anchor;
          return st;
        }
      }
    }
  }
  *pp = p;
  return SIZE_MAX;
}

void ls_index_each(const LsIndex *ix, const char *b, size_t n,
                   void (*fn)(void *ud, const LsAnchor *a, size_t start), void *ud) {
  for (size_t p = 0; p + LS_GRAM <= n; p += LS_STRIDE) {
    uint32_t h = gram_hash(b + p);
    if (!ix->hit[h]) {
      continue;
    }
    for (int e = ix->head[h]; e >= 0; e = ix->ents[e].next) {
      const LsGramEnt *g = &ix->ents[e];
      const LsAnchor *a = &ix->anchors[g->anchor];
      if (p < g->off || p - g->off + a->len > n) {
        continue;
      }
      if (memcmp(b + p - g->off, a->text, a->len) == 0) {
        fn(ud, a, p - g->off);
      }
    }
  }
}
