// Embedding backward: gw[v] = the sum of the rows of gy (R, D) whose index is v, and 0 for rows
// never looked up and for padding_idx. Deterministic: the same bits on every run, no atomics.
//
// The scatter-add `gw[idx[r]] += gy[r]` races when a token repeats (a character-level batch
// holds ' ' in about one row of seven), and float atomics add in whatever order the hardware
// picks. So we first sort: `order` = a stable argsort of the indices (CuPy's, before these
// kernels), which lines up each index's rows in their original order. Along the sorted order
// the rows of one index form a contiguous run, and the work is a segmented sum of runs.
//
// One block per run would be simple but unbalanced: the run of a frequent token is thousands of
// rows long while most are short, and that one block would set the time. Instead the sorted
// order is cut into chunks of `chunk` positions (at most EMB_MAX_CHUNK), whatever the runs:
//
//   pass 1 (embedding_backward_pieces): one block per chunk, threads across the D columns
//          (coalesced reads of each gy row). A chunk's positions, their gy rows and indices are
//          staged in shared memory; each thread walks them in order, summing its column, and
//          at every change of index it has the sum of one *piece* of a run. A piece that is a
//          whole run (the run starts and ends inside this chunk) goes straight to gw[v]. The
//          chunk's first and last pieces also go to `pieces` (2 rows of D per chunk), for runs
//          cut by a chunk boundary. Thread 0 notes where each run starts and ends in `span`.
//   pass 2 (embedding_backward_merge): one block per table row v. A run spanning chunks
//          c0 < c1 is the last piece of c0 plus the first pieces of c0+1 .. c1 (a chunk inside
//          the run is one piece, first = last), summed in that order. Rows with no run and the
//          padding row are written 0 here, so gw needs no zeroing beforehand.
// Each element of gw is written by exactly one of the passes, and every sum runs in a fixed
// order; a run inside one chunk even adds in the original order, as the reference's add.at.
//
// Launches: CuPy's argsort (a cast to int32 keys and a Thrust radix sort, a handful of
// launches), the zeroing of `span`, then these two. Memory traffic: gy read once (R x D);
// order and the indices read once per chunk (2R int64 reads); pieces written and read once
// (2 D values per chunk); gw written once (V x D). With chunk = 32 the pieces add 1/8 to the
// read of gy, and pass 2 reads at most R/chunk + 1 piece rows for the longest run.
// Offsets are 64-bit: R * D can pass 2^31.
#include "common.cuh"

#define EMB_MAX_CHUNK 32  // sorted positions per block in pass 1: the size of its shared arrays

template <class T>
__device__ void embedding_backward_pieces(const T* __restrict__ gy,
                                          const long long* __restrict__ indices,
                                          const long long* __restrict__ order, T* __restrict__ gw,
                                          T* __restrict__ pieces, long long* __restrict__ span,
                                          long long rows, int cols, int chunk, long long padding) {
    __shared__ long long row_of[EMB_MAX_CHUNK];  // the gy row at each sorted position
    __shared__ long long key_of[EMB_MAX_CHUNK];  // its index: the table row it adds to
    __shared__ long long neighbours[2];          // the index just before and just after the chunk
    long long start = (long long)blockIdx.x * chunk;
    int n = (int)min((long long)chunk, rows - start);
    for (int k = threadIdx.x; k < n; k += blockDim.x) {
        long long r = order[start + k];
        row_of[k] = r;
        key_of[k] = indices[r];
    }
    if (threadIdx.x == 0) {  // -1 matches no index: there is no neighbour at the ends
        neighbours[0] = start > 0 ? indices[order[start - 1]] : -1;
        neighbours[1] = start + n < rows ? indices[order[start + n]] : -1;
    }
    __syncthreads();
    long long before = neighbours[0], after = neighbours[1];
    T* first = pieces + 2LL * blockIdx.x * cols;  // this chunk's first piece
    T* last = first + cols;                       // and its last (the same one if it has one)
    for (int j = threadIdx.x; j < cols; j += blockDim.x) {
        // The column's values first, all loads in flight at once, then the walk in registers:
        // summing straight from memory would wait for each load in turn.
        T val[EMB_MAX_CHUNK];
#pragma unroll
        for (int k = 0; k < EMB_MAX_CHUNK; ++k)
            if (k < n) val[k] = gy[row_of[k] * cols + j];
        T acc = 0;
        int a = 0;  // where the current piece began
#pragma unroll
        for (int k = 0; k < EMB_MAX_CHUNK; ++k) {
            if (k == n) break;
            acc += val[k];
            if (k + 1 < n && key_of[k + 1] == key_of[k]) continue;
            // the piece [a, k] ends here: its run began earlier, or goes on later, or neither
            long long v = key_of[k];
            bool began_earlier = a == 0 && before == v;
            bool goes_on = k + 1 == n && after == v;
            if (a == 0) first[j] = acc;
            if (k + 1 == n) last[j] = acc;
            if (!began_earlier && !goes_on && v != padding) gw[v * cols + j] = acc;
            if (j == 0) {  // one thread per block records the run's bounds
                if (!began_earlier) span[2 * v] = start + a;
                if (!goes_on) span[2 * v + 1] = start + k + 1;
            }
            acc = 0;
            a = k + 1;
        }
    }
}

template <class T>
__device__ void embedding_backward_merge(const T* __restrict__ pieces,
                                         const long long* __restrict__ span, T* __restrict__ gw,
                                         int cols, int chunk, long long padding) {
    long long v = blockIdx.x;
    long long lo = span[2 * v], hi = span[2 * v + 1];  // 0 and 0: v was never looked up
    T* out = gw + v * cols;
    if (lo == hi || v == padding) {
        for (int j = threadIdx.x; j < cols; j += blockDim.x) out[j] = 0;
        return;
    }
    long long c0 = lo / chunk, c1 = (hi - 1) / chunk;
    if (c0 == c1) return;  // the run lies in one chunk: pass 1 wrote it
    for (int j = threadIdx.x; j < cols; j += blockDim.x) {
        T acc = pieces[(2 * c0 + 1) * cols + j];  // the last piece of c0
#pragma unroll 4
        for (long long c = c0 + 1; c <= c1; ++c) acc += pieces[2 * c * cols + j];
        out[j] = acc;
    }
}

extern "C" __global__ void embedding_backward_pieces_f32(const float* gy, const long long* indices,
                                                         const long long* order, float* gw,
                                                         float* pieces, long long* span,
                                                         long long rows, int cols, int chunk,
                                                         long long padding) {
    embedding_backward_pieces(gy, indices, order, gw, pieces, span, rows, cols, chunk, padding);
}
extern "C" __global__ void embedding_backward_pieces_f64(const double* gy, const long long* indices,
                                                         const long long* order, double* gw,
                                                         double* pieces, long long* span,
                                                         long long rows, int cols, int chunk,
                                                         long long padding) {
    embedding_backward_pieces(gy, indices, order, gw, pieces, span, rows, cols, chunk, padding);
}
extern "C" __global__ void embedding_backward_merge_f32(const float* pieces, const long long* span,
                                                        float* gw, int cols, int chunk,
                                                        long long padding) {
    embedding_backward_merge(pieces, span, gw, cols, chunk, padding);
}
extern "C" __global__ void embedding_backward_merge_f64(const double* pieces,
                                                        const long long* span, double* gw,
                                                        int cols, int chunk, long long padding) {
    embedding_backward_merge(pieces, span, gw, cols, chunk, padding);
}
