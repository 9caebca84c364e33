/* A work-claiming thread pool for the generated kernels (one per library).

   Why not OpenMP: its fork-join waits at every barrier for every thread of the
   team, so when other processes hold the cores a preempted worker stalls the
   whole layer (measured: a 0.6 ms layer took 3 ms at load 8 on 2 cores). Here
   the caller runs items itself and waits only for items a running worker has
   claimed, as onnxruntime's pool does; a worker that wakes late finds nothing
   left to claim.

   One 64-bit word holds the job: generation (16 bits), item count (24 bits)
   and next item (24 bits). Claiming is a compare-and-swap on that word, so a
   claim either belongs to the current job or fails; the job's function and
   argument are read only after a successful claim, when the job cannot have
   ended (the claimed item is not yet done). */
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>

typedef void (*pool_item_fn)(void *arg, long item);

#define POOL_MAX_THREADS 64
static _Atomic uint64_t pool_claim;
static _Atomic long pool_finished;
static pool_item_fn pool_fn;
static void *pool_arg;
static uint64_t pool_generation;
static int pool_workers;
static int pool_active;            /* workers that join the current job */
/* vdla_run holds this: one call of a kernel at a time (its job state is global). */
static pthread_mutex_t pool_call_mutex = PTHREAD_MUTEX_INITIALIZER;
static pthread_mutex_t pool_mutex = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t pool_wake = PTHREAD_COND_INITIALIZER;
static _Atomic uint64_t pool_published;
/* Polls of pool_published before a worker sleeps: ~50 us, so the job that
   follows (tiles after packing) finds it awake, yet an idle kernel holds no core. */
#define POOL_SPINS 2000
#if defined(__x86_64__) || defined(__i386__)
#define POOL_PAUSE() __builtin_ia32_pause()
#else
#define POOL_PAUSE() ((void)0)
#endif

static void pool_run_items(uint64_t generation)
{
    uint64_t word = atomic_load_explicit(&pool_claim, memory_order_acquire);
    for (;;) {
        uint64_t total = (word >> 24) & 0xffffff, next = word & 0xffffff;
        if ((word >> 48) != (generation & 0xffff) || next >= total) return;
        if (!atomic_compare_exchange_weak_explicit(&pool_claim, &word, word + 1,
                                                   memory_order_acq_rel, memory_order_acquire))
            continue;
        pool_fn(pool_arg, (long)next);
        atomic_fetch_add_explicit(&pool_finished, 1, memory_order_release);
        word = atomic_load_explicit(&pool_claim, memory_order_acquire);
    }
}

static void *pool_worker(void *id_)
{
    uint64_t seen = 0;
    const long id = (long)(intptr_t)id_;
    for (;;) {
        for (int spin = 0; spin < POOL_SPINS && atomic_load(&pool_published) == seen; spin++)
            POOL_PAUSE();
        pthread_mutex_lock(&pool_mutex);
        while (atomic_load(&pool_published) == seen) pthread_cond_wait(&pool_wake, &pool_mutex);
        seen = atomic_load(&pool_published);
        const int joins = id < pool_active;
        pthread_mutex_unlock(&pool_mutex);
        if (joins) pool_run_items(seen);
    }
    return 0;
}

/* Run fn(arg, i) for i in [0, total) on up to `threads` threads (the caller is one). */
static void pool_parallel(pool_item_fn fn, void *arg, long total, int threads)
{
    if (threads > POOL_MAX_THREADS) threads = POOL_MAX_THREADS;
    if (threads <= 1 || total <= 1) {
        for (long i = 0; i < total; i++) fn(arg, i);
        return;
    }
    while (pool_workers < threads - 1) {
        pthread_t thread;
        if (pthread_create(&thread, 0, pool_worker, (void *)(intptr_t)pool_workers) != 0) break;
        pthread_detach(thread);
        pool_workers++;
    }
    uint64_t generation = ++pool_generation;
    pool_fn = fn;
    pool_arg = arg;
    atomic_store_explicit(&pool_finished, 0, memory_order_relaxed);
    atomic_store_explicit(&pool_claim, ((generation & 0xffff) << 48) | ((uint64_t)total << 24),
                          memory_order_release);
    pthread_mutex_lock(&pool_mutex);
    pool_active = threads - 1;
    atomic_store(&pool_published, generation);
    pthread_cond_broadcast(&pool_wake);
    pthread_mutex_unlock(&pool_mutex);
    pool_run_items(generation);
    /* Only items a running worker claimed are left: spin, never yield (a
       yield on a busy machine gives the core away for a whole time slice). */
    while (atomic_load_explicit(&pool_finished, memory_order_acquire) < total) POOL_PAUSE();
}
