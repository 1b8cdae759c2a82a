// Fused attention, FlashAttention-2 style: y = softmax(q k^T * scale + mask) v, and its gradient,
// without ever storing the (Tq, Tk) score matrix: memory stays O(T) (y, and one lse per row).
//
// Layout: q (BH, Tq, d), k (BH, Tk, d), v (BH, Tk, dv), y and gy (BH, Tq, dv), lse (BH, Tq), all
// contiguous; BH = every batch and head dim flattened (the wrapper broadcasts and copies). The mask
// is read in place through strides (b, h, i, j), 0 where it broadcasts: element (pair bh, query i,
// key j) sits at (bh / heads) * b + (bh % heads) * h + i * i_stride + j * j_stride. A boolean mask
// keeps True entries, a float mask is added; masked scores are -inf. Causal: query i sees keys
// j <= i, also when Tq != Tk (PyTorch's top-left alignment, as the reference's xp.tri). A query
// row that sees no key gives y = 0 and lse = +inf (so that backward's exp(s - lse) is 0 there).
//
// A block is 4 warps (128 threads). Tiles live in static shared memory: BR query rows, BC keys
// (32: a key per lane; 16 for float64 heads of 128, two lanes per key, each summing half the
// features, joined by one shuffle). Head dims are bounded by D: float32 has an entry point for
// D = 32, 64 and 128, so that small heads keep registers and shared memory small; float64, which
// is for checking rather than speed, has D = 128 only (fewer kernels for NVRTC to compile). The
// feature loops run to the actual d and dv (which may differ), and a lane holds output features
// lane, lane + 32, ... (D / 32 of them). K and V tile rows are padded to D + 1 elements so that
// 32 lanes reading 32 different keys hit 32 different banks.
//
// Forward (attention_forward_d<D>_<dtype>): a block per (pair, tile of BR query rows); each warp
// owns BR / 4 of the rows. For each K/V tile (tiles wholly above the causal diagonal skipped):
//   1. the block loads K and V (coalesced rows) into shared memory;
//   2. each lane scores its key against its warp's rows (q from shared memory), masks it, and
//      the warp updates each row's online softmax with shuffles over the keys: m' = max(m, max_j
//      s_j), p_j = exp(s_j - m'), l = l exp(m - m') + sum_j p_j, acc *= exp(m - m');
//   3. p goes to shared memory, and each lane adds sum_j p_j v_j to its output features.
// At the end y = acc / l and lse = m + log l. Traffic: q and y once, K and V once per query tile.
//
// Backward, two launches, no atomics (deterministic): with p = exp(s - lse), D_i = gy_i . y_i,
// ds = p (gy v^T - D):  gq = ds k scale,  gk = ds^T q scale,  gv = p^T gy.
//   attention_backward_q: a block per (pair, query tile), the forward's mapping. It computes D_i
//     for its rows (saved for the next launch), then for each K/V tile recomputes s and p from q,
//     k and lse, the lanes' dot gy_i . v_j, ds, and accumulates gq row by row like the forward's
//     acc. No online softmax: lse already normalises.
//   attention_backward_kv: a block per (pair, tile of BC keys) holding its K and V tiles for the
//     whole launch, looping over the query tiles that see them (causal: from the tile of the
//     first key on). Per query tile, the lanes compute p and ds as above into shared memory; then
//     each warp owns BC / 4 keys and accumulates gv += p^T gy and gk += ds^T q in registers.
// Each gradient element is written once, by one thread, summed in a fixed order.
// Gradient layout: gq, gk and gv are (BH, T, width) arrays, or, with grad_bthd, (B, T, H, width)
// ones (`grad_row`): the layout of heads split from one (B, T, H * width) projection, so that
// the gradient flowing back to that projection is already in place instead of copied (a launch
// per gradient). The wrapper chooses it when gy arrives in that layout.
//
// Shared memory per block stays under the 48 KB that needs no opt-in: BR starts at 16 query rows
// and halves until the tiles fit (`Tiles`; attention.py keeps a copy of the resulting sizes for
// its grids, and the kernels loop over tiles, so the grid may be any size). Float32 accumulates in
// float, float64 in double. Offsets into the arrays are 64-bit.
#include "common.cuh"

constexpr int WARPS = 4;  // warps per block; attention.py launches 32 * WARPS threads
constexpr int SHARED_LIMIT = 48 * 1024;  // static shared memory per block without opt-in
constexpr unsigned FULL = 0xffffffffu;
enum MaskKind { NO_MASK = 0, KEEP = 1, BIAS = 2 };

// Shared bytes of a block: q_tiles (BR, D) tiles, K and V (BC, D + 1), p_tiles (BR, BC).
__host__ __device__ constexpr int tile_bytes(int size, int d, int br, int bc, int q_tiles,
                                            int p_tiles) {
    return size * (q_tiles * br * d + 2 * bc * (d + 1) + p_tiles * br * bc);
}

// Query rows per tile: 16, halved until the tiles fit (at least a row per warp).
__host__ __device__ constexpr int rows_that_fit(int size, int d, int bc, int q_tiles, int p_tiles) {
    int br = 16;
    while (br > WARPS && tile_bytes(size, d, br, bc, q_tiles, p_tiles) > SHARED_LIMIT) br /= 2;
    return br;
}

// Tile sizes for elements of SIZE bytes and head dims up to D.
template <int SIZE, int D>
struct Tiles {
    // 32 keys (a key per lane) unless two such K/V tiles leave too little room for the rest.
    static constexpr int BC = 2 * 32 * (D + 1) * SIZE <= 34 * 1024 ? 32 : 16;
    static constexpr int FORWARD_BR = rows_that_fit(SIZE, D, BC, 1, 1);   // Q; P
    static constexpr int BACKWARD_BR = rows_that_fit(SIZE, D, BC, 2, 2);  // Q, gY; P, dS
};

struct Dims {
    int bh, tq, tk, d, dv;
    int grad_bthd;  // gradients in (B, T, H, width) layout (0 in the forward)
};

// Offset of row i (of len) of pair bh in a gradient of row width w: row (bh, i) of a
// (BH, len, w) array, or with n.grad_bthd row (b, i, h) of a (B, len, H, w) one.
__device__ __forceinline__ long long grad_row(const Dims& n, int heads, int bh, long long i,
                                              int len, int w) {
    if (!n.grad_bthd) return ((long long)bh * len + i) * w;
    return (((long long)(bh / heads) * len + i) * heads + bh % heads) * w;
}

template <class T>
struct Mask {
    const bool* keep;  // KEEP: true = may attend
    const T* bias;     // BIAS: added to the scores
    int kind, causal, heads;
    long long b, h, i, j;  // element strides; 0 where the mask broadcasts

    __device__ long long base(int bh) const {
        return (long long)(bh / heads) * b + (long long)(bh % heads) * h;
    }
};

// The scaled score of query i with key j after the masks: -inf where i may not attend to j
// (and for the padding rows and keys of a partial tile).
template <class T>
__device__ __forceinline__ T masked(T s, const Mask<T>& m, long long base, int i, int j,
                                    const Dims& n) {
    if (i >= n.tq || j >= n.tk || (m.causal && j > i)) return T(-TF_INF);
    long long at = base + i * m.i + j * m.j;
    if (m.kind == KEEP) return m.keep[at] ? s : T(-TF_INF);
    if (m.kind == BIAS) return s + m.bias[at];
    return s;
}

// Max and sum over one row's BC keys: butterflies within each group of BC lanes (with BC < 32
// the groups hold the same values, so each gets the full result).
template <int BC, class T>
__device__ __forceinline__ T keys_max(T v) {
#pragma unroll
    for (int o = BC / 2; o > 0; o >>= 1) v = max(v, __shfl_xor_sync(FULL, v, o));
    return v;
}
template <int BC, class T>
__device__ __forceinline__ T keys_sum(T v) {
#pragma unroll
    for (int o = BC / 2; o > 0; o >>= 1) v += __shfl_xor_sync(FULL, v, o);
    return v;
}

// s[r] = rows[r] . key over `len` features, for this lane's key. SPLIT lanes share a key, each
// taking every SPLIT-th feature from `part`; a shuffle over those lanes joins the partial sums.
template <int ROWS, int SPLIT, int LD, class T>
__device__ __forceinline__ void dots(T (&s)[ROWS], T (*rows)[LD], const T* key, int part, int len) {
#pragma unroll
    for (int r = 0; r < ROWS; ++r) s[r] = T(0);
    for (int t = part; t < len; t += SPLIT) {
        T kt = key[t];
#pragma unroll
        for (int r = 0; r < ROWS; ++r) s[r] += rows[r][t] * kt;
    }
#pragma unroll
    for (int o = 32 / SPLIT; o < 32; o <<= 1) {
#pragma unroll
        for (int r = 0; r < ROWS; ++r) s[r] += __shfl_xor_sync(FULL, s[r], o);
    }
}

// tile[r][:cols] = src row first + r (zeros past `count` rows): a warp per row, lanes along it,
// so each warp reads contiguous memory.
template <int R, int LD, class T>
__device__ void load_rows(T (*tile)[LD], const T* src, int first, int count, int cols) {
    int lane = threadIdx.x % 32;
    for (int r = threadIdx.x / 32; r < R; r += WARPS) {
        bool live = first + r < count;
        const T* row = src + (long long)(first + r) * cols;
        // memory-bound: unrolling would buy nothing and slow NVRTC down
#pragma unroll 1
        for (int t = lane; t < cols; t += 32) tile[r][t] = live ? row[t] : T(0);
    }
}

template <class T, int D>
__device__ void attention_forward(const T* q, const T* k, const T* v, Mask<T> m, T* y, T* lse,
                                  Dims n, T scale) {
    using Tile = Tiles<sizeof(T), D>;
    constexpr int BR = Tile::FORWARD_BR, BC = Tile::BC;
    constexpr int ROWS = BR / WARPS, SPLIT = 32 / BC, COLS = D / 32;
    static_assert(tile_bytes(sizeof(T), D, BR, BC, 1, 1) <= SHARED_LIMIT, "tiles too big");
    __shared__ T qs[BR][D];
    __shared__ T ks[BC][D + 1];
    __shared__ T vs[BC][D + 1];
    __shared__ T ps[BR][BC];
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    const int key = lane % BC, part = lane / BC, mine = warp * ROWS;  // mine: the warp's rows
    for (int bh = blockIdx.y; bh < n.bh; bh += gridDim.y) {
        const T* kb = k + (long long)bh * n.tk * n.d;
        const T* vb = v + (long long)bh * n.tk * n.dv;
        const long long at = m.base(bh), row0 = (long long)bh * n.tq;
        for (int i0 = blockIdx.x * BR; i0 < n.tq; i0 += gridDim.x * BR) {
            __syncthreads();  // the last tile's readers are done with qs
            load_rows<BR>(qs, q + (row0 + i0) * n.d, 0, n.tq - i0, n.d);
            T top[ROWS], total[ROWS], acc[ROWS][COLS];  // m, l and the unnormalised output
#pragma unroll
            for (int r = 0; r < ROWS; ++r) {
                top[r] = T(-TF_INF), total[r] = T(0);
#pragma unroll
                for (int c = 0; c < COLS; ++c) acc[r][c] = T(0);
            }
            const int end = m.causal ? min(n.tk, i0 + BR) : n.tk;  // keys past the diagonal
            for (int j0 = 0; j0 < end; j0 += BC) {
                __syncthreads();  // ks, vs free again (and qs loaded, the first time)
                load_rows<BC>(ks, kb, j0, n.tk, n.d);
                load_rows<BC>(vs, vb, j0, n.tk, n.dv);
                __syncthreads();
                T s[ROWS];
                dots<ROWS, SPLIT>(s, qs + mine, ks[key], part, n.d);
#pragma unroll
                for (int r = 0; r < ROWS; ++r) {
                    T x = masked(s[r] * scale, m, at, i0 + mine + r, j0 + key, n);
                    T new_top = max(top[r], keys_max<BC>(x));
                    T shift = new_top == T(-TF_INF) ? T(0) : new_top;  // no key yet: no NaN
                    T p = exp(x - shift), rescale = exp(top[r] - shift);
                    total[r] = total[r] * rescale + keys_sum<BC>(p);
                    top[r] = new_top;
#pragma unroll
                    for (int c = 0; c < COLS; ++c) acc[r][c] *= rescale;
                    if (lane < BC) ps[mine + r][key] = p;
                }
                __syncwarp();  // the warp's p rows are written
                const int keys = min(BC, n.tk - j0);
                for (int j = 0; j < keys; ++j) {
                    T pj[ROWS];
#pragma unroll
                    for (int r = 0; r < ROWS; ++r) pj[r] = ps[mine + r][j];
#pragma unroll
                    for (int c = 0; c < COLS; ++c) {
                        T vj = vs[j][lane + 32 * c];
#pragma unroll
                        for (int r = 0; r < ROWS; ++r) acc[r][c] += pj[r] * vj;
                    }
                }
            }
#pragma unroll
            for (int r = 0; r < ROWS; ++r) {
                const int i = i0 + mine + r;
                if (i >= n.tq) continue;
                const bool seen = total[r] > T(0);  // false: every key masked
                const T inv = seen ? T(1) / total[r] : T(0);
#pragma unroll
                for (int c = 0; c < COLS; ++c) {
                    const int t = lane + 32 * c;
                    if (t < n.dv) y[(row0 + i) * n.dv + t] = acc[r][c] * inv;
                }
                if (lane == 0) lse[row0 + i] = seen ? top[r] + log(total[r]) : T(TF_INF);
            }
        }
    }
}

// gq, and D_i = gy_i . y_i into `rowdot` for attention_backward_kv.
template <class T, int D>
__device__ void attention_backward_q(const T* gy, const T* q, const T* k, const T* v, const T* y,
                                     const T* lse, Mask<T> m, T* rowdot, T* gq, Dims n,
                                     T scale) {
    using Tile = Tiles<sizeof(T), D>;
    constexpr int BR = Tile::BACKWARD_BR, BC = Tile::BC;
    constexpr int ROWS = BR / WARPS, SPLIT = 32 / BC, COLS = D / 32;
    static_assert(tile_bytes(sizeof(T), D, BR, BC, 2, 1) <= SHARED_LIMIT, "tiles too big");
    __shared__ T qs[BR][D];
    __shared__ T gys[BR][D];
    __shared__ T ks[BC][D + 1];
    __shared__ T vs[BC][D + 1];
    __shared__ T dss[BR][BC];
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    const int key = lane % BC, part = lane / BC, mine = warp * ROWS;
    for (int bh = blockIdx.y; bh < n.bh; bh += gridDim.y) {
        const T* kb = k + (long long)bh * n.tk * n.d;
        const T* vb = v + (long long)bh * n.tk * n.dv;
        const long long at = m.base(bh), row0 = (long long)bh * n.tq;
        for (int i0 = blockIdx.x * BR; i0 < n.tq; i0 += gridDim.x * BR) {
            __syncthreads();
            load_rows<BR>(qs, q + (row0 + i0) * n.d, 0, n.tq - i0, n.d);
            load_rows<BR>(gys, gy + (row0 + i0) * n.dv, 0, n.tq - i0, n.dv);
            __syncthreads();
            T big_d[ROWS], row_lse[ROWS], acc[ROWS][COLS];
#pragma unroll
            for (int r = 0; r < ROWS; ++r) {
                const int i = i0 + mine + r;
                T part_d = T(0);
#pragma unroll
                for (int c = 0; c < COLS; ++c) {
                    const int t = lane + 32 * c;
                    if (i < n.tq && t < n.dv) part_d += gys[mine + r][t] * y[(row0 + i) * n.dv + t];
                    acc[r][c] = T(0);
                }
                big_d[r] = warp_sum(part_d);
                row_lse[r] = i < n.tq ? lse[row0 + i] : T(TF_INF);
                if (lane == 0 && i < n.tq) rowdot[row0 + i] = big_d[r];
            }
            const int end = m.causal ? min(n.tk, i0 + BR) : n.tk;
            for (int j0 = 0; j0 < end; j0 += BC) {
                __syncthreads();
                load_rows<BC>(ks, kb, j0, n.tk, n.d);
                load_rows<BC>(vs, vb, j0, n.tk, n.dv);
                __syncthreads();
                T s[ROWS], gp[ROWS];  // scores q k^T, and gp = gy v^T
                dots<ROWS, SPLIT>(s, qs + mine, ks[key], part, n.d);
                dots<ROWS, SPLIT>(gp, gys + mine, vs[key], part, n.dv);
#pragma unroll
                for (int r = 0; r < ROWS; ++r) {
                    T x = masked(s[r] * scale, m, at, i0 + mine + r, j0 + key, n);
                    T p = exp(x - row_lse[r]);  // 0 where masked, and in rows with lse = +inf
                    if (lane < BC) dss[mine + r][key] = p * (gp[r] - big_d[r]);
                }
                __syncwarp();
                const int keys = min(BC, n.tk - j0);
                for (int j = 0; j < keys; ++j) {
                    T ds[ROWS];
#pragma unroll
                    for (int r = 0; r < ROWS; ++r) ds[r] = dss[mine + r][j];
#pragma unroll
                    for (int c = 0; c < COLS; ++c) {
                        T kj = ks[j][lane + 32 * c];
#pragma unroll
                        for (int r = 0; r < ROWS; ++r) acc[r][c] += ds[r] * kj;
                    }
                }
            }
#pragma unroll
            for (int r = 0; r < ROWS; ++r) {
                const int i = i0 + mine + r;
#pragma unroll
                for (int c = 0; c < COLS; ++c) {
                    const int t = lane + 32 * c;
                    if (i < n.tq && t < n.d)
                        gq[grad_row(n, m.heads, bh, i, n.tq, n.d) + t] = acc[r][c] * scale;
                }
            }
        }
    }
}

// gk and gv; reads D_i from `rowdot`, written by attention_backward_q.
template <class T, int D>
__device__ void attention_backward_kv(const T* gy, const T* q, const T* k, const T* v,
                                      const T* lse, const T* rowdot, Mask<T> m, T* gk, T* gv,
                                      Dims n, T scale) {
    using Tile = Tiles<sizeof(T), D>;
    constexpr int BR = Tile::BACKWARD_BR, BC = Tile::BC;
    constexpr int ROWS = BR / WARPS, SPLIT = 32 / BC, COLS = D / 32, KEYS = BC / WARPS;
    static_assert(tile_bytes(sizeof(T), D, BR, BC, 2, 2) <= SHARED_LIMIT, "tiles too big");
    __shared__ T ks[BC][D + 1];
    __shared__ T vs[BC][D + 1];
    __shared__ T qs[BR][D];
    __shared__ T gys[BR][D];
    __shared__ T ps[BR][BC];
    __shared__ T dss[BR][BC];
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    const int key = lane % BC, part = lane / BC, mine = warp * ROWS;
    for (int bh = blockIdx.y; bh < n.bh; bh += gridDim.y) {
        const T* qb = q + (long long)bh * n.tq * n.d;
        const T* gyb = gy + (long long)bh * n.tq * n.dv;
        const long long at = m.base(bh), row0 = (long long)bh * n.tq, key0 = (long long)bh * n.tk;
        for (int j0 = blockIdx.x * BC; j0 < n.tk; j0 += gridDim.x * BC) {
            __syncthreads();  // the last key tile's readers are done with ks, vs
            load_rows<BC>(ks, k + (key0 + j0) * n.d, 0, n.tk - j0, n.d);
            load_rows<BC>(vs, v + (key0 + j0) * n.dv, 0, n.tk - j0, n.dv);
            T gk_acc[KEYS][COLS], gv_acc[KEYS][COLS];  // the warp's keys j0 + warp * KEYS + kk
#pragma unroll
            for (int kk = 0; kk < KEYS; ++kk) {
#pragma unroll
                for (int c = 0; c < COLS; ++c) gk_acc[kk][c] = gv_acc[kk][c] = T(0);
            }
            // Causal: query i sees keys j <= i, so queries before j0 see none of these keys.
            for (int i0 = m.causal ? j0 - j0 % BR : 0; i0 < n.tq; i0 += BR) {
                __syncthreads();  // qs, gys, ps, dss free again (and ks, vs loaded)
                load_rows<BR>(qs, qb, i0, n.tq, n.d);
                load_rows<BR>(gys, gyb, i0, n.tq, n.dv);
                __syncthreads();
                // p and ds of this query tile: a warp per BR / 4 rows, a lane per key
                T s[ROWS], gp[ROWS];
                dots<ROWS, SPLIT>(s, qs + mine, ks[key], part, n.d);
                dots<ROWS, SPLIT>(gp, gys + mine, vs[key], part, n.dv);
#pragma unroll
                for (int r = 0; r < ROWS; ++r) {
                    const int i = i0 + mine + r;
                    const T row_lse = i < n.tq ? lse[row0 + i] : T(TF_INF);
                    const T big_d = i < n.tq ? rowdot[row0 + i] : T(0);
                    T p = exp(masked(s[r] * scale, m, at, i, j0 + key, n) - row_lse);
                    if (lane < BC) {
                        ps[mine + r][key] = p;
                        dss[mine + r][key] = p * (gp[r] - big_d);
                    }
                }
                __syncthreads();  // every warp reads every row of ps and dss below
                // gv += p^T gy and gk += ds^T q: a warp per KEYS keys, lanes along features
                const int rows = min(BR, n.tq - i0);
                for (int r = 0; r < rows; ++r) {
                    T qr[COLS], gyr[COLS];
#pragma unroll
                    for (int c = 0; c < COLS; ++c) {
                        qr[c] = qs[r][lane + 32 * c];
                        gyr[c] = gys[r][lane + 32 * c];
                    }
#pragma unroll
                    for (int kk = 0; kk < KEYS; ++kk) {
                        const T p = ps[r][warp * KEYS + kk], ds = dss[r][warp * KEYS + kk];
#pragma unroll
                        for (int c = 0; c < COLS; ++c) {
                            gv_acc[kk][c] += p * gyr[c];
                            gk_acc[kk][c] += ds * qr[c];
                        }
                    }
                }
            }
#pragma unroll
            for (int kk = 0; kk < KEYS; ++kk) {
                const int j = j0 + warp * KEYS + kk;
                if (j >= n.tk) continue;
#pragma unroll
                for (int c = 0; c < COLS; ++c) {
                    const int t = lane + 32 * c;
                    if (t < n.d) gk[grad_row(n, m.heads, bh, j, n.tk, n.d) + t] =
                        gk_acc[kk][c] * scale;
                    if (t < n.dv) gv[grad_row(n, m.heads, bh, j, n.tk, n.dv) + t] = gv_acc[kk][c];
                }
            }
        }
    }
}

// Entry points: one per kernel, head-dim bound D and dtype. Mask arguments: kind (MaskKind),
// keep or bias (the other one is any array, unread), heads (the last batch dim, for splitting
// bh), and the element strides b, h, i, j.
#define TF_MASK(T) Mask<T>{keep, bias, mask_kind, causal, heads, mask_b, mask_h, mask_i, mask_j}
#define TF_DIMS Dims{bh, tq, tk, d, dv, 0}
#define TF_GRAD_DIMS Dims{bh, tq, tk, d, dv, grad_bthd}
#define TF_FORWARD(T, D) attention_forward<T, D>(q, k, v, TF_MASK(T), y, lse, TF_DIMS, scale)
#define TF_BACKWARD_Q(T, D) \
    attention_backward_q<T, D>(gy, q, k, v, y, lse, TF_MASK(T), rowdot, gq, TF_GRAD_DIMS, scale)
#define TF_BACKWARD_KV(T, D) \
    attention_backward_kv<T, D>(gy, q, k, v, lse, rowdot, TF_MASK(T), gk, gv, TF_GRAD_DIMS, scale)

extern "C" __global__ void attention_forward_d32_f32(
    const float* q, const float* k, const float* v, const bool* keep, const float* bias, float* y,
    float* lse, int bh, int tq, int tk, int d, int dv, int causal, int mask_kind, int heads,
    long long mask_b, long long mask_h, long long mask_i, long long mask_j, float scale) {
    TF_FORWARD(float, 32);
}
extern "C" __global__ void attention_forward_d64_f32(
    const float* q, const float* k, const float* v, const bool* keep, const float* bias, float* y,
    float* lse, int bh, int tq, int tk, int d, int dv, int causal, int mask_kind, int heads,
    long long mask_b, long long mask_h, long long mask_i, long long mask_j, float scale) {
    TF_FORWARD(float, 64);
}
extern "C" __global__ void attention_forward_d128_f32(
    const float* q, const float* k, const float* v, const bool* keep, const float* bias, float* y,
    float* lse, int bh, int tq, int tk, int d, int dv, int causal, int mask_kind, int heads,
    long long mask_b, long long mask_h, long long mask_i, long long mask_j, float scale) {
    TF_FORWARD(float, 128);
}
extern "C" __global__ void attention_forward_d128_f64(
    const double* q, const double* k, const double* v, const bool* keep, const double* bias,
    double* y, double* lse, int bh, int tq, int tk, int d, int dv, int causal, int mask_kind,
    int heads, long long mask_b, long long mask_h, long long mask_i, long long mask_j,
    double scale) {
    TF_FORWARD(double, 128);
}

extern "C" __global__ void attention_backward_q_d32_f32(
    const float* gy, const float* q, const float* k, const float* v, const float* y,
    const float* lse, const bool* keep, const float* bias, float* rowdot, float* gq, int bh,
    int tq, int tk, int d, int dv, int causal, int mask_kind, int heads, long long mask_b,
    long long mask_h, long long mask_i, long long mask_j, int grad_bthd, float scale) {
    TF_BACKWARD_Q(float, 32);
}
extern "C" __global__ void attention_backward_q_d64_f32(
    const float* gy, const float* q, const float* k, const float* v, const float* y,
    const float* lse, const bool* keep, const float* bias, float* rowdot, float* gq, int bh,
    int tq, int tk, int d, int dv, int causal, int mask_kind, int heads, long long mask_b,
    long long mask_h, long long mask_i, long long mask_j, int grad_bthd, float scale) {
    TF_BACKWARD_Q(float, 64);
}
extern "C" __global__ void attention_backward_q_d128_f32(
    const float* gy, const float* q, const float* k, const float* v, const float* y,
    const float* lse, const bool* keep, const float* bias, float* rowdot, float* gq, int bh,
    int tq, int tk, int d, int dv, int causal, int mask_kind, int heads, long long mask_b,
    long long mask_h, long long mask_i, long long mask_j, int grad_bthd, float scale) {
    TF_BACKWARD_Q(float, 128);
}
extern "C" __global__ void attention_backward_q_d128_f64(
    const double* gy, const double* q, const double* k, const double* v, const double* y,
    const double* lse, const bool* keep, const double* bias, double* rowdot, double* gq, int bh,
    int tq, int tk, int d, int dv, int causal, int mask_kind, int heads, long long mask_b,
    long long mask_h, long long mask_i, long long mask_j, int grad_bthd, double scale) {
    TF_BACKWARD_Q(double, 128);
}

extern "C" __global__ void attention_backward_kv_d32_f32(
    const float* gy, const float* q, const float* k, const float* v, const float* lse,
    const float* rowdot, const bool* keep, const float* bias, float* gk, float* gv, int bh,
    int tq, int tk, int d, int dv, int causal, int mask_kind, int heads, long long mask_b,
    long long mask_h, long long mask_i, long long mask_j, int grad_bthd, float scale) {
    TF_BACKWARD_KV(float, 32);
}
extern "C" __global__ void attention_backward_kv_d64_f32(
    const float* gy, const float* q, const float* k, const float* v, const float* lse,
    const float* rowdot, const bool* keep, const float* bias, float* gk, float* gv, int bh,
    int tq, int tk, int d, int dv, int causal, int mask_kind, int heads, long long mask_b,
    long long mask_h, long long mask_i, long long mask_j, int grad_bthd, float scale) {
    TF_BACKWARD_KV(float, 64);
}
extern "C" __global__ void attention_backward_kv_d128_f32(
    const float* gy, const float* q, const float* k, const float* v, const float* lse,
    const float* rowdot, const bool* keep, const float* bias, float* gk, float* gv, int bh,
    int tq, int tk, int d, int dv, int causal, int mask_kind, int heads, long long mask_b,
    long long mask_h, long long mask_i, long long mask_j, int grad_bthd, float scale) {
    TF_BACKWARD_KV(float, 128);
}
extern "C" __global__ void attention_backward_kv_d128_f64(
    const double* gy, const double* q, const double* k, const double* v, const double* lse,
    const double* rowdot, const bool* keep, const double* bias, double* gk, double* gv, int bh,
    int tq, int tk, int d, int dv, int causal, int mask_kind, int heads, long long mask_b,
    long long mask_h, long long mask_i, long long mask_j, int grad_bthd, double scale) {
    TF_BACKWARD_KV(double, 128);
}
