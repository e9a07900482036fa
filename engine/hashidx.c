// The growable arrays and the open-addressing index the trace stores share (hashidx.h).
#include <stdlib.h>

#include "hashidx.h"

bool tp_hashidx_grow(uint64_t **word, uint32_t **id, size_t *cap, size_t first, TpHashHome home) {
  size_t nc = *cap ? *cap * 2 : first;
  if (nc < *cap || nc > SIZE_MAX / sizeof(uint64_t)) {
    return false;
  }
  uint64_t *nw = calloc(nc, sizeof(*nw));
  uint32_t *ni = calloc(nc, sizeof(*ni));
  if (!nw || !ni) {
    free(nw);
    free(ni);
    return false;
  }
  for (size_t i = 0; i < *cap; i++) {
    if ((*id)[i] || (*word)[i]) {
      uint64_t w = (*word)[i];
      size_t j = (size_t)(home ? home(w) : w) & (nc - 1);
      while (ni[j] || nw[j]) {
        j = (j + 1) & (nc - 1);
      }
      nw[j] = w;
      ni[j] = (*id)[i];
    }
  }
  free(*word);
  free(*id);
  *word = nw;
  *id = ni;
  *cap = nc;
  return true;
}

bool tp_grow_array(void **arr, size_t *cap, size_t n, size_t elem, size_t first) {
  if (n < *cap) {
    return true;
  }
  size_t nc = *cap ? *cap * 2 : first;
  if (nc < *cap || nc > SIZE_MAX / elem) {
    return false;
  }
  void *p = realloc(*arr, nc * elem);
  if (!p) {
    return false;
  }
  *arr = p;
  *cap = nc;
  return true;
}

uint64_t tp_hash_bytes(const char *p, size_t n) {
  uint64_t h = 1469598103934665603ULL;  // FNV-1a offset basis
  for (size_t i = 0; i < n; i++) {
    h ^= (unsigned char)p[i];
    h *= 1099511628211ULL;  // FNV-1a prime
  }
  return h ^ (n * 0x9E3779B97F4A7C15ULL);
}
