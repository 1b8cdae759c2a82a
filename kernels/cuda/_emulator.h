// The CUDA a kernel file sees, played on the CPU: enough of it to run tinyformer's teaching
// kernels unchanged on a machine with no GPU, slowly, so that CI and laptops can check them
// against their NumPy references. `_emulator.py` force-includes this header when it compiles a
// `.cu` file with the host's C++ compiler.
//
// The model: a launch runs its blocks one after another, and each CUDA thread of a block as a
// fiber (a stack of its own) on one OS thread. The fibers take turns in rank order, each running
// until it reaches a barrier, so `__syncthreads()` is a real barrier: a thread waits there until
// every living thread of its block has arrived. (A fiber switch is a few instructions; an OS
// thread per CUDA thread would pay the scheduler's wake-up, per thread, at every barrier.) A
// missing barrier shows on every run: a thread reads shared memory that later ranks have not
// written yet, where a GPU would race. A warp is 32 consecutive threads of a block with a
// barrier of its own: a shuffle writes every lane's value to a slot, waits, reads the partner's
// slot, waits again. A thread that returns leaves both barriers (as an exited thread does on the
// GPU), so later barriers wait only for the living. Threads that wait at barriers that can never
// open (some at `__syncthreads()`, the rest of a warp at its shuffle) end the launch with an
// error instead of a hang.
//
// `__shared__` becomes `static`: blocks never overlap here, so one copy serves each block in
// turn, as the GPU's shared memory does (uninitialised at a block's start, on both). Not
// emulated: timing, occupancy, memory coalescing, warp divergence, read-only caches, and the
// undefined results of racing writes.
#pragma once

// Fibers switch by a few lines of assembly on x86-64 Linux, elsewhere by `swapcontext` (which
// macOS declares only for X/Open programs; this header is the first thing compiled).
#if defined(__x86_64__) && defined(__ELF__)
#define TF_EMU_ASM_SWITCH 1
#else
#if defined(__APPLE__)
#define _XOPEN_SOURCE 600
#define _DARWIN_C_SOURCE
#endif
#include <ucontext.h>
#endif

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <functional>
#include <utility>
#include <vector>

#include <sys/mman.h>
#include <unistd.h>

#ifndef MAP_NORESERVE
#define MAP_NORESERVE 0
#endif

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

// Switching fibers. On x86-64, six callee-saved registers and the stack pointer: a switch is a
// few instructions. Elsewhere, `swapcontext`, which also saves the signal mask with a system
// call, paid twice per thread at every barrier: slower, the same results.
#if TF_EMU_ASM_SWITCH
extern "C" void tf_emu_switch(void** save, void* load);
asm(R"(
    .text
    .globl tf_emu_switch
    .hidden tf_emu_switch
    .type tf_emu_switch, @function
tf_emu_switch:
    pushq %rbp
    pushq %rbx
    pushq %r12
    pushq %r13
    pushq %r14
    pushq %r15
    movq %rsp, (%rdi)
    movq %rsi, %rsp
    popq %r15
    popq %r14
    popq %r13
    popq %r12
    popq %rbx
    popq %rbp
    ret
    .size tf_emu_switch, .-tf_emu_switch
)");
struct Context {
    void* sp = nullptr;
};
// A fresh fiber's stack, as `tf_emu_switch` leaves one: six registers to pop, then `entry` to
// return into, with the stack aligned as a call would leave it.
inline void start(Context& c, char* stack, size_t size, void (*entry)()) {
    uintptr_t aligned = reinterpret_cast<uintptr_t>(stack + size) & ~uintptr_t(15);
    auto* top = reinterpret_cast<void**>(aligned);
    *--top = nullptr;  // the return address `entry` would have: it never returns
    *--top = reinterpret_cast<void*>(entry);
    for (int r = 0; r < 6; ++r) *--top = nullptr;
    c.sp = top;
}
inline void swap(Context& from, Context& to) { tf_emu_switch(&from.sp, to.sp); }
#else
struct Context {
    ucontext_t uc;
};
inline void start(Context& c, char* stack, size_t size, void (*entry)()) {
    getcontext(&c.uc);
    c.uc.uc_stack.ss_sp = stack;
    c.uc.uc_stack.ss_size = size;
    c.uc.uc_link = nullptr;
    makecontext(&c.uc, entry, 0);
}
inline void swap(Context& from, Context& to) { swapcontext(&from.uc, &to.uc); }
#endif

// A barrier among fibers: it opens when `expected` threads (the living) have arrived; the last
// to arrive opens it and runs on, the others run again at their next turn.
struct Barrier {
    unsigned expected = 0, arrived = 0;
    uint64_t opened = 0;  // how many times it has opened
};

struct Fiber {
    Context context;
    const Barrier* waiting = nullptr;  // the barrier it waits at; null: ready to run
    uint64_t since = 0;                // that barrier's `opened` when it arrived
    bool done = false;
};

struct Block {
    unsigned threads;
    Barrier all;
    std::vector<Barrier> warps;
    std::vector<uint64_t> slots;  // one shuffle slot per thread
    std::vector<Fiber> fibers;
    Context scheduler;
    const std::function<void()>* body;
};

inline Block* block = nullptr;
inline unsigned rank = 0;  // threadIdx flattened, x fastest: the fiber running now

inline void arrive_and_wait(Barrier& b) {
    if (++b.arrived == b.expected) {
        b.arrived = 0;
        ++b.opened;
        return;
    }
    Fiber& self = block->fibers[rank];
    self.waiting = &b;
    self.since = b.opened;
    swap(self.context, block->scheduler);
}

inline void arrive_and_drop(Barrier& b) {
    if (--b.expected != 0 && b.arrived == b.expected) {
        b.arrived = 0;
        ++b.opened;
    }
}

}  // namespace tf_emu

inline uint3 threadIdx;
inline uint3 blockIdx;
inline dim3 blockDim, gridDim;
constexpr int warpSize = 32;

inline void __syncthreads() { tf_emu::arrive_and_wait(tf_emu::block->all); }
inline void __syncwarp(unsigned = 0xffffffffu) {
    tf_emu::arrive_and_wait(tf_emu::block->warps[tf_emu::rank / 32]);
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

// The fibers' stacks: one mapping, each stack with an unreadable page below it, so that a
// kernel that overflows its stack crashes at once instead of writing over its neighbour's.
class Stacks {
  public:
    static constexpr size_t size = 128 * 1024;
    explicit Stacks(unsigned n) : page_(size_t(sysconf(_SC_PAGESIZE))), n_(n) {
        void* p = mmap(nullptr, n * (size + page_), PROT_READ | PROT_WRITE,
                       MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
        base_ = p == MAP_FAILED ? nullptr : static_cast<char*>(p);
        for (unsigned t = 0; base_ && t < n; ++t)
            mprotect(base_ + t * (size + page_), page_, PROT_NONE);
    }
    ~Stacks() {
        if (base_) munmap(base_, n_ * (size + page_));
    }
    Stacks(const Stacks&) = delete;
    Stacks& operator=(const Stacks&) = delete;
    bool ok() const { return base_ != nullptr; }
    char* at(unsigned t) const { return base_ + t * (size + page_) + page_; }

  private:
    size_t page_;
    unsigned n_;
    char* base_;
};

// A fiber's whole life: the kernel, then it leaves the barriers and hands the OS thread back to
// the scheduler for good.
inline void run_thread() {
    Block& b = *block;
    (*b.body)();
    arrive_and_drop(b.warps[rank / 32]);
    arrive_and_drop(b.all);
    b.fibers[rank].done = true;
    swap(b.fibers[rank].context, b.scheduler);
}

inline char launch_error[256];

// Run `body` as every thread of every block of the grid, blocks one after another. Returns null,
// or what went wrong (threads stuck at barriers that cannot open; no memory for the stacks).
inline const char* launch(const unsigned* dims, const std::function<void()>& body) {
    gridDim = {dims[0], dims[1], dims[2]};
    blockDim = {dims[3], dims[4], dims[5]};
    unsigned n = blockDim.x * blockDim.y * blockDim.z;
    unsigned blocks = gridDim.x * gridDim.y * gridDim.z;
    if (n == 0 || blocks == 0) return nullptr;
    Stacks stacks(n);
    if (!stacks.ok()) return "no memory for the emulated threads' stacks";
    Block b{n, {}, std::vector<Barrier>((n + 31) / 32), std::vector<uint64_t>(n),
            std::vector<Fiber>(n), {}, &body};
    block = &b;
    const char* failed = nullptr;
    for (unsigned index = 0; index < blocks && !failed; ++index) {
        blockIdx = {index % gridDim.x, index / gridDim.x % gridDim.y,
                    index / (gridDim.x * gridDim.y)};
        b.all = {n, 0, 0};
        for (unsigned w = 0; w < b.warps.size(); ++w)
            b.warps[w] = {std::min(32u, n - 32 * w), 0, 0};
        for (unsigned t = 0; t < n; ++t) {
            Fiber& f = b.fibers[t];
            f.waiting = nullptr;
            f.done = false;
            start(f.context, stacks.at(t), Stacks::size, run_thread);
        }
        for (unsigned living = n; living > 0;) {
            bool ran = false;
            for (unsigned t = 0; t < n; ++t) {
                Fiber& f = b.fibers[t];
                if (f.done || (f.waiting && f.waiting->opened == f.since)) continue;
                f.waiting = nullptr;
                rank = t;
                threadIdx = {t % blockDim.x, t / blockDim.x % blockDim.y,
                             t / (blockDim.x * blockDim.y)};
                swap(b.scheduler, f.context);
                ran = true;
                living -= f.done;
            }
            if (!ran) {
                unsigned at_block = 0, at_warp = 0;
                for (const Fiber& f : b.fibers) {
                    if (f.done) continue;
                    (f.waiting == &b.all ? at_block : at_warp) += 1;
                }
                std::snprintf(launch_error, sizeof launch_error,
                              "block (%u, %u, %u) can never go on: %u threads wait at "
                              "__syncthreads() and %u at a warp's barrier (a shuffle or "
                              "__syncwarp) that the others never reach",
                              blockIdx.x, blockIdx.y, blockIdx.z, at_block, at_warp);
                failed = launch_error;
                break;
            }
        }
    }
    block = nullptr;
    return failed;
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
