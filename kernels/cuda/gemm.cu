// GEMM: C = op(A) op(B), batched, with the epilogues a linear layer needs, tiled in shared
// memory. Written for CUDA graphs: CuPy refuses cuBLAS during stream capture, so a captured
// step runs its matrix products here (eager steps keep cuBLAS, which is faster).
//
//   op(A) is (M, K): A stored (M, K) row-major, or (K, M) when trans_a (A^T is used)
//   op(B) is (K, N): B stored (K, N) row-major, or (N, K) when trans_b (B^T is used)
//   C     is (M, N) row-major
//   Linear forward   y  = x W^T (+ b) (GELU):  A = x (rows, in), B = W (out, in), trans_b
//   Linear backward  gx = gy W:                A = gy (rows, out), B = W (out, in)
//                    gW = gy^T x (+= gW):      A = gy (rows, out) with trans_a, B = x (rows, in)
//
// Epilogue, per element of C, in this order (flags, a bit mask, GEMM_* below):
//   v = sum_k op(A)[i, k] op(B)[k, j]
//   v += bias[j]                   GEMM_BIAS
//   pre[i, j] = v                  GEMM_STORE_PRE   the pre-activation a GELU backward needs
//   v = gelu(v)                    GEMM_GELU (exact, erf form) or GEMM_GELU_TANH
//   v += C[i, j]                   GEMM_ACCUMULATE  gradient accumulation: C += op(A) op(B)
//   C[i, j] = v
// GELU is the formula of gelu.cu and tinyformer/ops/gelu.py, with the same constants.
//
// Mapping: one block of 16 x 16 = 256 threads owns a 64 x 64 tile of C; thread (tx, ty) owns
// the 4 x 4 micro-tile of rows ty + 16 i and columns tx + 16 j (i, j < 4), kept in registers.
// The block walks K in steps of 16: it stages a 64 x 16 tile of op(A) and a 16 x 64 tile of
// op(B) in shared memory (each thread loads 4 elements of each), waits, and every thread adds
// 16 rank-1 updates to its micro-tile: per step of k it reads 4 values of A and 4 of B from
// shared memory for 16 multiply-adds. Batches are grid.z (a loop past CUDA's 65535).
// Strided columns (tx + 16 j) rather than 4 adjacent ones: consecutive threads of a warp then
// read consecutive shared-memory words of B (no bank conflict) and write consecutive words of
// C (coalesced stores).
// Loads: whichever layout an operand has, consecutive threads load consecutive addresses of
// global memory (along k when A is (M, K), along m when it is (K, M); likewise B), so loads
// coalesce for all four transpose cases; out-of-range rows, columns and k read 0, so M, N and
// K need not be multiples of the tiles. The shared tiles are stored k-major with one word of
// padding per row, so that the transposing stores do not all fall in one bank.
// Memory traffic: each element of A is read N / 64 times and each of B M / 64 times (from L2,
// mostly), C written once (read once more with GEMM_ACCUMULATE). Accumulators are T: float32
// for float32 (as cuBLAS's default SGEMM), float64 for float64.
// Offsets are 64-bit: a batch's stride and i * N can pass 2^31.
// Not done (a teaching kernel, sized for baby models): vector loads, double buffering of the
// shared tiles, tensor cores, split-K for a long K with a small M x N.
#include "common.cuh"

#define GEMM_BIAS 1
#define GEMM_GELU 2
#define GEMM_GELU_TANH 4
#define GEMM_STORE_PRE 8
#define GEMM_ACCUMULATE 16

#define TILE 64     // rows and columns of C per block
#define TILE_K 16   // k per shared-memory step
#define THREADS 16  // threads per block along each of x and y
#define MICRO 4     // TILE / THREADS: rows and columns per thread

#define GEMM_SQRT_2_OVER_PI 0.7978845608028654
#define GEMM_INV_SQRT_2 0.7071067811865475
#define GEMM_TANH_C 0.044715

__device__ __forceinline__ float gemm_erfc(float v) { return erfcf(v); }
__device__ __forceinline__ double gemm_erfc(double v) { return erfc(v); }
__device__ __forceinline__ float gemm_tanh(float v) { return tanhf(v); }
__device__ __forceinline__ double gemm_tanh(double v) { return tanh(v); }

template <class T>
__device__ __forceinline__ T gemm_gelu(T v, int flags) {
    if (flags & GEMM_GELU_TANH) {
        T u = T(GEMM_SQRT_2_OVER_PI) * (v + T(GEMM_TANH_C) * v * v * v);
        return T(0.5) * v * (T(1) + gemm_tanh(u));
    }
    return v * (T(0.5) * gemm_erfc(-v * T(GEMM_INV_SQRT_2)));
}

// Element (r, c) of a logical R x C operand stored row-major, or as its transpose (C x R
// row-major) when `trans`; 0 outside the matrix.
template <class T>
__device__ __forceinline__ T operand(const T* p, int trans, int r, int c, int R, int C) {
    if (r >= R || c >= C) return T(0);
    return trans ? p[(long long)c * R + r] : p[(long long)r * C + c];
}

template <class T>
__device__ void gemm(const T* __restrict__ a, const T* __restrict__ b, const T* bias, T* c,
                     T* pre, int m, int n, int k, int batch, long long stride_a,
                     long long stride_b, long long stride_c, int trans_a, int trans_b,
                     int flags) {
    __shared__ T tile_a[TILE_K][TILE + 1];  // op(A)[row0 + i, k0 + kk] at [kk][i]
    __shared__ T tile_b[TILE_K][TILE + 1];  // op(B)[k0 + kk, col0 + j] at [kk][j]
    int tx = threadIdx.x, ty = threadIdx.y, t = ty * THREADS + tx;
    int row0 = blockIdx.y * TILE, col0 = blockIdx.x * TILE;
    for (int z = blockIdx.z; z < batch; z += gridDim.z) {
        const T* az = a + z * stride_a;
        const T* bz = b + z * stride_b;
        T acc[MICRO][MICRO];
        for (int i = 0; i < MICRO; ++i)
            for (int j = 0; j < MICRO; ++j) acc[i][j] = T(0);
        for (int k0 = 0; k0 < k; k0 += TILE_K) {
            // Each thread stages MICRO elements of each tile; element e of a tile is (e / 16,
            // e % 16) or (e % 64, e / 64), whichever walks the operand's contiguous axis.
            for (int s = 0; s < MICRO; ++s) {
                int e = t + s * THREADS * THREADS;
                int i = trans_a ? e % TILE : e / TILE_K, ka = trans_a ? e / TILE : e % TILE_K;
                tile_a[ka][i] = operand(az, trans_a, row0 + i, k0 + ka, m, k);
                int j = trans_b ? e / TILE_K : e % TILE, kb = trans_b ? e % TILE_K : e / TILE;
                tile_b[kb][j] = operand(bz, trans_b, k0 + kb, col0 + j, k, n);
            }
            __syncthreads();
            for (int kk = 0; kk < TILE_K; ++kk) {
                T ra[MICRO], rb[MICRO];
                for (int i = 0; i < MICRO; ++i) ra[i] = tile_a[kk][ty + THREADS * i];
                for (int j = 0; j < MICRO; ++j) rb[j] = tile_b[kk][tx + THREADS * j];
                for (int i = 0; i < MICRO; ++i)
                    for (int j = 0; j < MICRO; ++j) acc[i][j] += ra[i] * rb[j];
            }
            __syncthreads();  // the tiles are overwritten by the next step of k
        }
        for (int i = 0; i < MICRO; ++i) {
            int row = row0 + ty + THREADS * i;
            if (row >= m) continue;
            for (int j = 0; j < MICRO; ++j) {
                int col = col0 + tx + THREADS * j;
                if (col >= n) continue;
                long long at = z * stride_c + (long long)row * n + col;
                T v = acc[i][j];
                if (flags & GEMM_BIAS) v += bias[col];
                if (flags & GEMM_STORE_PRE) pre[at] = v;
                if (flags & (GEMM_GELU | GEMM_GELU_TANH)) v = gemm_gelu(v, flags);
                if (flags & GEMM_ACCUMULATE) v += c[at];
                c[at] = v;
            }
        }
    }
}

// bias and pre are read or written only when their flag is set; the wrapper passes c there
// otherwise (a launch needs some address for every pointer).
extern "C" __global__ void gemm_f32(const float* a, const float* b, const float* bias, float* c,
                                    float* pre, int m, int n, int k, int batch,
                                    long long stride_a, long long stride_b, long long stride_c,
                                    int trans_a, int trans_b, int flags) {
    gemm(a, b, bias, c, pre, m, n, k, batch, stride_a, stride_b, stride_c, trans_a, trans_b,
         flags);
}
extern "C" __global__ void gemm_f64(const double* a, const double* b, const double* bias,
                                    double* c, double* pre, int m, int n, int k, int batch,
                                    long long stride_a, long long stride_b, long long stride_c,
                                    int trans_a, int trans_b, int flags) {
    gemm(a, b, bias, c, pre, m, n, k, batch, stride_a, stride_b, stride_c, trans_a, trans_b,
         flags);
}
