// The log scanner's anchor filter: every line worth a closer look contains one of the anchors
// (fixed strings); this index finds anchor occurrences in a buffer without comparing every
// position. It knows nothing of what an anchor announces: the table comes from its caller.
#pragma once

#include <stddef.h>
#include <stdint.h>

// Anchors are found with a strided 4-byte-gram filter: positions p, p+6, p+12, ... are hashed and
// looked up in a bitmap of the grams the anchors contain; any anchor of 9 bytes or more has a
// gram at one of these positions (one per residue class of the stride is registered, the rarest
// by a byte-frequency estimate), so only candidates are compared in full.
#define LS_GRAM       4
#define LS_MIN_ANCHOR 9
#define LS_STRIDE     (LS_MIN_ANCHOR - LS_GRAM + 1)
#define LS_HASH_BITS  15
#define LS_HASH_SIZE  (1u << LS_HASH_BITS)

typedef struct LsAnchor {
  const char *text;
  uint8_t len;
  uint8_t id;   // what the anchor announces (the caller's numbering)
  uint8_t sub;  // a second number of the caller's (signature or fact number)
} LsAnchor;

typedef struct LsGramEnt {
  uint16_t anchor;  // index in the anchor table
  uint8_t off;      // offset of the gram inside the anchor
  int16_t next;     // next entry with the same hash, -1 at the end
} LsGramEnt;

typedef struct LsIndex {
  LsAnchor *anchors;  // the caller's anchors, in table order
  uint64_t *prefix;   // first 8 bytes of each anchor, for a one-load pre-check
  size_t nanchors;
  uint8_t hit[LS_HASH_SIZE];  // 1 where some registered gram hashes
  int16_t head[LS_HASH_SIZE];
  LsGramEnt *ents;
  size_t nents;
  // Gram frequencies sampled from the input: the registered gram of each anchor and residue is
  // re-chosen as the rarest one in this log (every LS_ADAPT_EVERY bytes), so the filter stays
  // selective whatever the log's vocabulary (NCCL chatter, Python warnings, ...).
  uint32_t *counts;
  uint64_t scanned;
  uint64_t next_adapt;
} LsIndex;

#define LS_ADAPT_EVERY  (32u << 20)
#define LS_ADAPT_SAMPLE (256u << 10)

// Builds the index of the `n` anchors `get(0)` ... `get(n - 1)` into a zeroed `ix`. Returns 0,
// TP_ENOMEM, or TP_EINVAL for an anchor shorter than LS_MIN_ANCHOR (the filter would miss it: a
// table error). On failure the caller still frees `ix` with ls_index_free.
int ls_index_build(LsIndex *ix, size_t n, LsAnchor (*get)(size_t i));
// Frees what the index allocated (the struct itself is the caller's).
void ls_index_free(LsIndex *ix);

// Accounts for a region of `n` input bytes about to be scanned: every LS_ADAPT_EVERY bytes, the
// gram frequencies of a large enough region are sampled and the probed grams re-selected.
void ls_index_sample(LsIndex *ix, const char *b, size_t n);

// Looks for the first anchor occurrence starting at or after `floor`, probing positions *pp,
// *pp + LS_STRIDE, ... below `to`; every byte up to `limit` may be read. Returns the start of
// the occurrence (its table index in *anchor) or SIZE_MAX; *pp is where probing stopped.
size_t ls_index_find(const LsIndex *ix, const char *b, size_t *pp, size_t to, size_t floor,
                     size_t limit, size_t *anchor);

// Calls fn for every anchor occurrence in b[0, n) (in probe order, not position order).
void ls_index_each(const LsIndex *ix, const char *b, size_t n,
                   void (*fn)(void *ud, const LsAnchor *a, size_t start), void *ud);
