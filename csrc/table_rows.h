// Table row maps of the transforming ops (ntt, intt, mod_up, mod_up_keyswitch_inner,
// switch_modulus; semantics in csrc/bind/schema.cpp): limb l of an op reads row row[l] of
// its NTT table, so the ring's full tables serve a level, a digit or the special primes
// without per-level copies. Without a map (count 0) limb l reads row l. Torch-free, shared
// by the CPU and CUDA kernels; held inline, so the CUDA launches take it by value in their
// parameters (no device copy, graph-capturable). The binding (csrc/bind/common.h,
// check_table_rows) fills and checks it.
#pragma once
#include <cstdint>

#include "arith.h"

namespace fhetorch {

constexpr int kMaxTableRows = 256;   // limbs a map covers
constexpr int kMaxTableRow = 32767;  // the largest row a map names (entries are int16)

struct TableRows {
  int count;                    // limbs mapped: 0 (no map: row l), else the op's limb count
  int16_t row[kMaxTableRows];   // the table row of limb l < count
};

FT_HD int table_row(const TableRows& r, int l) { return r.count ? r.row[l] : l; }

// Whether a map fits an op of `limbs` limbs: none, or one row per limb.
FT_HD bool table_rows_fit(const TableRows& r, int limbs) { return r.count == 0 || r.count == limbs; }

}  // namespace fhetorch
