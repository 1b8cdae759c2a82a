// The CUDA a kernel file sees, played on the CPU: enough of it to run tinyformer's teaching
// kernels unchanged on a machine with no GPU, slowly, so that CI and laptops can check them
// against their NumPy references. `_emulator.py` force-includes this header when it compiles a
// `.cu` file with the host's C++ compiler.
//
// The model: a launch runs its blocks one after another, each CUDA thread of a block as an OS
// thread (the same ones for every block of the launch), so `__syncthreads()` is a real barrier
// and a data race stays a race. A warp is 32
// consecutive threads of a block with a barrier of its own: a shuffle writes every lane's value
// to a slot, waits, reads the partner's slot, waits again. A thread that returns leaves both
// barriers (as an exited thread does on the GPU), so later barriers wait only for the living.
//
// `__shared__` becomes `static`: blocks never overlap here, so one copy serves each block in
// turn, as the GPU's shared memory does (uninitialised at a block's start, on both). Not
// emulated: timing, occupancy, memory coalescing, warp divergence, read-only caches, and the
// undefined results of racing writes (here they are merely unpredictable).
#pragma once

#include <algorithm>
#include <atomic>
#include <barrier>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <memory>
#include <thread>
#include <utility>
#include <vector>

#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __noinline__
#define __restrict__ __restrict
#define __shared__ static
#define __launch_bounds__(...)

struct uint3 {
    unsigned x, y, z;
};
struct dim3 {
    unsigned x = 1, y = 1, z = 1;
};

namespace tf_emu {

struct Block {
    unsigned threads;
    std::unique_ptr<std::barrier<>> all;
    std::vector<std::unique_ptr<std::barrier<>>> warps;
    std::vector<uint64_t> slots;  // one shuffle slot per thread
};

inline Block* block = nullptr;
inline thread_local unsigned rank = 0;  // threadIdx flattened, x fastest

}  // namespace tf_emu

inline thread_local uint3 threadIdx;
inline uint3 blockIdx;
inline dim3 blockDim, gridDim;
constexpr int warpSize = 32;

inline void __syncthreads() { tf_emu::block->all->arrive_and_wait(); }
inline void __syncwarp(unsigned = 0xffffffffu) {
    tf_emu::block->warps[tf_emu::rank / 32]->arrive_and_wait();
}

namespace tf_emu {

// Every lane posts `v`, then reads lane `source(lane)`'s post; lanes outside the warp (or the
// width) read their own value, as CUDA's shuffles do.
template <class T, class Source>
T shuffle(T v, Source source) {
    static_assert(sizeof(T) <= sizeof(uint64_t), "shuffle of a type wider than 8 bytes");
    unsigned lane = rank % 32, first = rank - lane;
    std::memcpy(&block->slots[rank], &v, sizeof(T));
    __syncwarp();
    unsigned from = source(lane);
    T out = v;
    if (from < 32 && first + from < block->threads)
        std::memcpy(&out, &block->slots[first + from], sizeof(T));
    __syncwarp();
    return out;
}

}  // namespace tf_emu

template <class T>
T __shfl_xor_sync(unsigned, T v, int mask, int width = 32) {
    return tf_emu::shuffle(v, [&](unsigned lane) {
        unsigned to = lane ^ unsigned(mask);
        return to / width == lane / width ? to : lane;
    });
}
template <class T>
T __shfl_down_sync(unsigned, T v, unsigned delta, int width = 32) {
    return tf_emu::shuffle(v, [&](unsigned lane) {
        unsigned to = lane + delta;
        return to / width == lane / width ? to : lane;
    });
}
template <class T>
T __shfl_up_sync(unsigned, T v, unsigned delta, int width = 32) {
    return tf_emu::shuffle(v, [&](unsigned lane) {
        return lane % width >= delta ? lane - delta : lane;
    });
}
template <class T>
T __shfl_sync(unsigned, T v, int src, int width = 32) {
    return tf_emu::shuffle(v, [&](unsigned lane) { return lane / width * width + src % width; });
}

// Atomics: std::atomic_ref on the same memory, so concurrent threads of a block add exactly.
template <class T>
T atomicAdd(T* address, T value) {
    return std::atomic_ref<T>(*address).fetch_add(value);
}
template <class T>
T atomicExch(T* address, T value) {
    return std::atomic_ref<T>(*address).exchange(value);
}
template <class T>
T atomicCAS(T* address, T expected, T desired) {
    std::atomic_ref<T>(*address).compare_exchange_strong(expected, desired);
    return expected;
}
template <class T>
T atomicMax(T* address, T value) {
    std::atomic_ref<T> a(*address);
    T old = a.load();
    while (old < value && !a.compare_exchange_weak(old, value)) {
    }
    return old;
}

// Device math: CUDA overloads exp, log, ... for float; the host's C library has only double.
using std::abs, std::ceil, std::cos, std::erf, std::exp, std::expm1, std::fabs, std::floor,
    std::fma, std::fmax, std::fmin, std::isinf, std::isnan, std::log, std::log1p, std::pow,
    std::sin, std::sqrt, std::tanh;
inline float rsqrtf(float x) { return 1.0f / std::sqrt(x); }
inline double rsqrt(double x) { return 1.0 / std::sqrt(x); }
inline float __expf(float x) { return std::exp(x); }
inline float __logf(float x) { return std::log(x); }
inline float __fdividef(float a, float b) { return a / b; }
inline float __saturatef(float x) { return std::min(1.0f, std::max(0.0f, x)); }
inline float __int_as_float(int i) {
    float f;
    std::memcpy(&f, &i, sizeof f);
    return f;
}
inline int __float_as_int(float f) {
    int i;
    std::memcpy(&i, &f, sizeof i);
    return i;
}
inline double __longlong_as_double(long long i) {
    double d;
    std::memcpy(&d, &i, sizeof d);
    return d;
}
inline long long __double_as_longlong(double d) {
    long long i;
    std::memcpy(&i, &d, sizeof i);
    return i;
}
template <class T>
T __ldg(const T* p) {
    return *p;
}
// CUDA's min/max are overloaded for each arithmetic type; mixing types is an error here too.
#define TF_EMU_MINMAX(T)                                 \
    inline T min(T a, T b) { return b < a ? b : a; }     \
    inline T max(T a, T b) { return a < b ? b : a; }
TF_EMU_MINMAX(int)
TF_EMU_MINMAX(unsigned)
TF_EMU_MINMAX(long long)
TF_EMU_MINMAX(unsigned long long)
TF_EMU_MINMAX(float)
TF_EMU_MINMAX(double)
#undef TF_EMU_MINMAX

namespace tf_emu {

// Run `body` as every thread of every block of the grid. The blocks still run one after another,
// but on one set of OS threads for the whole launch: creating a block's threads cost more than
// running many a small block. Between blocks every thread waits at `next`, whose completion
// (run by the last to arrive, while the others wait) sets up the next block: fresh barriers, as
// the threads that returned early dropped out of the old ones.
inline void launch(const unsigned* dims, const std::function<void()>& body) {
    gridDim = {dims[0], dims[1], dims[2]};
    blockDim = {dims[3], dims[4], dims[5]};
    unsigned n = blockDim.x * blockDim.y * blockDim.z;
    unsigned blocks = gridDim.x * gridDim.y * gridDim.z;
    if (n == 0 || blocks == 0) return;
    Block b{n, nullptr, {}, std::vector<uint64_t>(n)};
    unsigned index = 0;
    auto set_up = [&] {
        b.all = std::make_unique<std::barrier<>>(n);
        b.warps.clear();
        for (unsigned w = 0; w * 32 < n; ++w)
            b.warps.push_back(std::make_unique<std::barrier<>>(std::min(32u, n - 32 * w)));
        blockIdx = {index % gridDim.x, index / gridDim.x % gridDim.y,
                    index / (gridDim.x * gridDim.y)};
    };
    set_up();
    block = &b;
    auto after_block = [&]() noexcept {
        if (++index < blocks) set_up();
    };
    std::barrier next(n, after_block);
    std::vector<std::thread> threads;
    threads.reserve(n);
    for (unsigned t = 0; t < n; ++t)
        threads.emplace_back([&, t] {
            rank = t;
            threadIdx = {t % blockDim.x, t / blockDim.x % blockDim.y, t / (blockDim.x * blockDim.y)};
            for (unsigned i = 0; i < blocks; ++i) {
                body();
                b.warps[t / 32]->arrive_and_drop();
                b.all->arrive_and_drop();
                next.arrive_and_wait();
            }
        });
    for (auto& t : threads) t.join();
    block = nullptr;
}

// Call kernel `f` with its arguments unpacked from `args`, an array of pointers to each
// argument: the layout cuLaunchKernel takes.
template <class... A, std::size_t... I>
void call(void (*f)(A...), void** args, std::index_sequence<I...>) {
    f(*static_cast<std::remove_cv_t<std::remove_reference_t<A>>*>(args[I])...);
}
template <class... A>
void call(void (*f)(A...), void** args) {
    call(f, args, std::index_sequence_for<A...>{});
}

}  // namespace tf_emu
