// hashidx: the growable arrays and the open-addressing index the trace stores share. The index: two
// parallel arrays of a power-of-two capacity, a 64-bit word per slot (a hash, or the key itself)
// and a 32-bit id, the slot empty when both are 0, probed linearly. The callers keep the arrays in
// their own structs and look up in them; this file grows them and hashes bytes.
#ifndef TPLUA_HASHIDX_H
#define TPLUA_HASHIDX_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

// The slot a word starts probing from, before masking; NULL for the word itself.
typedef uint64_t (*TpHashHome)(uint64_t word);

// Doubles the index (to `first` slots when empty), re-placing every used slot at
// home(word) & (capacity - 1) and onward; the old arrays are freed. Returns false, the index
// unchanged, when out of memory or when the capacity would overflow.
bool tp_hashidx_grow(uint64_t **word, uint32_t **id, size_t *cap, size_t first, TpHashHome home);

// Makes room for element n of an array of `elem`-byte elements: doubles it (to `first` elements
// when empty) when n reaches *cap. Returns false, the array unchanged, when out of memory or when
// its size would overflow.
bool tp_grow_array(void **arr, size_t *cap, size_t n, size_t elem, size_t first);

// FNV-1a of n bytes with the length folded in.
uint64_t tp_hash_bytes(const char *p, size_t n);

#endif
