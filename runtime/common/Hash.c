/*===- Hash.c - the weights hash shared by compiler and runtime ---------===*
 *
 * hpcrt_hash64 (see hpcrt.h). One definition, compiled into libhpcrt and into
 * the compiler's HPCTarget library, so the hash the compiler writes and the
 * one the runtime checks cannot drift apart.
 *
 *===--------------------------------------------------------------------===*/

#include "hpcrt.h"

#include <string.h>

uint64_t hpcrt_hash64(const void *data, size_t bytes) {
  const uint8_t *p = (const uint8_t *)data;
  uint64_t h = 0xcbf29ce484222325ULL;
  const uint64_t prime = 0x100000001b3ULL;
  size_t words = bytes / 8;
  for (size_t i = 0; i < words; ++i) {
    uint64_t w;
    memcpy(&w, p + 8 * i, 8); /* x86-64 is little-endian */
    h ^= w;
    h *= prime;
  }
  size_t tail = bytes % 8;
  if (tail) {
    uint64_t w = 0;
    for (size_t i = 0; i < tail; ++i)
      w |= (uint64_t)p[8 * words + i] << (8 * i);
    h ^= w;
    h *= prime;
  }
  return h ^ (uint64_t)bytes;
}
