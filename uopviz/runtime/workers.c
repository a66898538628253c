/* uopviz's CPU worker pool: threads that run the THREAD indices of a kernel, compiled once per machine by the CPU
   runtime (uopviz/runtime/workers.py loads it through ctypes).

   Why native: Python threads handing out indices needed the GIL between every index and slept on a lock
   between calls, so a call paid a wake-up and GIL hand-offs on top of the kernel; worker threads here spin a
   short while after a call (the next kernel of a program usually follows within microseconds) and only then
   sleep on a condition variable.

   One call at a time: a call opens a "round" by publishing its task under a new even generation; workers join
   the round by raising its busy count in the same atomic word (so none can join once the caller has closed it),
   take indices from a shared counter until none are left, and leave. The caller takes indices too, then waits
   until every joined worker has left before it closes the round (odd generation) and returns, so the task's
   arguments, which live in the caller's memory, are never read after the call. Both sides spin only for
   spin_ns, then sleep on a condition variable: on a machine that other processes keep busy, a thread that
   spins against one that lost its core only delays it. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <time.h>
#if defined(__x86_64__) || defined(__i386__)
/* the pause instruction itself: immintrin.h for _mm_pause is 63k lines to parse under -march=native (0.2 s of every
   cold first step that runs a threaded kernel, against 0.06 s without it) */
#define RELAX() __builtin_ia32_pause()
#else
#define RELAX() ((void)0)
#endif

typedef void (*task_fn)(const long long *args, int index);

#define BUSY_BITS 16
#define BUSY_MASK ((UINT64_C(1) << BUSY_BITS) - 1)
#define GENERATION(state) ((state) >> BUSY_BITS)

struct pool {
  pthread_mutex_t call;  /* one call at a time */
  pthread_mutex_t sleep; /* guards the condition variable's wait */
  pthread_cond_t wake;     /* a round opened, for sleeping workers */
  pthread_cond_t finished; /* the last joined worker left, for a sleeping caller */
  atomic_int caller_waiting;
  _Atomic uint64_t state; /* generation << BUSY_BITS | workers in the round; an odd generation is closed */
  atomic_int sleepers;
  atomic_int next;        /* the next index to take */
  task_fn fn;
  const long long *args;
  int count;
  long spin_ns;
};

static long elapsed_ns(const struct timespec *since) {
  struct timespec now;
  clock_gettime(CLOCK_MONOTONIC, &now);
  return (now.tv_sec - since->tv_sec) * 1000000000L + (now.tv_nsec - since->tv_nsec);
}

static void take_indices(struct pool *p) {
  for (int i; (i = atomic_fetch_add(&p->next, 1)) < p->count;) p->fn(p->args, i);
}

/* Join the round opened after generation `seen`, if it is still open: true when joined. */
static int join(struct pool *p, uint64_t *seen) {
  uint64_t s = atomic_load(&p->state);
  while (GENERATION(s) % 2 == 0 && GENERATION(s) != *seen) {
    if (atomic_compare_exchange_weak(&p->state, &s, s + 1)) {
      *seen = GENERATION(s);
      return 1;
    }
  }
  return 0;
}

/* Whether a round other than `seen` is open, or has been since (then it is over and there is nothing to join). */
static int news(struct pool *p, uint64_t seen) {
  uint64_t g = GENERATION(atomic_load(&p->state));
  return g != seen && g != seen + 1;
}

static void *work(void *arg) {
  struct pool *p = arg;
  uint64_t seen = 0; /* the last round joined: none yet (a thread that starts late still joins the round open now) */
  for (;;) {
    struct timespec start;
    clock_gettime(CLOCK_MONOTONIC, &start);
    for (unsigned spins = 0; !news(p, seen); spins++) {
      RELAX();
      if (spins % 256 == 255 && elapsed_ns(&start) > p->spin_ns) {
        pthread_mutex_lock(&p->sleep);
        atomic_fetch_add(&p->sleepers, 1);
        while (!news(p, seen)) pthread_cond_wait(&p->wake, &p->sleep);
        atomic_fetch_sub(&p->sleepers, 1);
        pthread_mutex_unlock(&p->sleep);
      }
    }
    if (join(p, &seen)) {
      take_indices(p);
      if ((atomic_fetch_sub(&p->state, 1) & BUSY_MASK) == 1 && atomic_load(&p->caller_waiting)) {
        pthread_mutex_lock(&p->sleep);
        pthread_cond_broadcast(&p->finished);
        pthread_mutex_unlock(&p->sleep);
      }
    } else {
      seen = GENERATION(atomic_load(&p->state)) & ~UINT64_C(1); /* missed a round: wait for the next */
    }
  }
  return NULL;
}

/* A pool of `workers` threads besides the caller's (fewer if the system refuses some), which spin `spin_ns`
   nanoseconds after a round before they sleep; NULL if it cannot be allocated. */
struct pool *uopviz_pool_new(int workers, long spin_ns) {
  struct pool *p = calloc(1, sizeof *p);
  if (p == NULL) return NULL;
  pthread_mutex_init(&p->call, NULL);
  pthread_mutex_init(&p->sleep, NULL);
  pthread_cond_init(&p->wake, NULL);
  pthread_cond_init(&p->finished, NULL);
  atomic_init(&p->state, UINT64_C(1) << BUSY_BITS); /* generation 1: closed */
  p->spin_ns = spin_ns;
  for (int k = 0; k < workers; k++) {
    pthread_t t;
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    pthread_create(&t, &attr, work, p); /* if it fails, the caller takes that thread's indices */
    pthread_attr_destroy(&attr);
  }
  return p;
}

/* Call fn(args, i) for every i in [0, count), on the caller's thread and the pool's; return when all are done. */
void uopviz_pool_run(struct pool *p, task_fn fn, const long long *args, int count) {
  pthread_mutex_lock(&p->call);
  p->fn = fn;
  p->args = args;
  p->count = count;
  atomic_store(&p->next, 0);
  atomic_fetch_add(&p->state, UINT64_C(1) << BUSY_BITS); /* open: an even generation */
  if (atomic_load(&p->sleepers) > 0) {
    pthread_mutex_lock(&p->sleep);
    pthread_cond_broadcast(&p->wake);
    pthread_mutex_unlock(&p->sleep);
  }
  take_indices(p);
  /* Close once no joined worker is still at work. A worker still at work past spin_ns has likely lost its core to
     another process (each index is short), so sleep until it leaves rather than spin against it. */
  struct timespec start;
  clock_gettime(CLOCK_MONOTONIC, &start);
  for (unsigned spins = 0;; spins++) {
    uint64_t s = atomic_load(&p->state);
    if ((s & BUSY_MASK) == 0) {
      if (atomic_compare_exchange_weak(&p->state, &s, s + (UINT64_C(1) << BUSY_BITS))) break;
      continue;
    }
    RELAX();
    if (spins % 256 == 255 && elapsed_ns(&start) > p->spin_ns) {
      pthread_mutex_lock(&p->sleep);
      atomic_store(&p->caller_waiting, 1);
      while ((atomic_load(&p->state) & BUSY_MASK) != 0) pthread_cond_wait(&p->finished, &p->sleep);
      atomic_store(&p->caller_waiting, 0);
      pthread_mutex_unlock(&p->sleep);
    }
  }
  pthread_mutex_unlock(&p->call);
}
